package slackbot_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/internal/oidcissuer"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/sso"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const audience = "fluidbox-slack-test"

// ssoStack is the Slack stack in SSO mode (a real OIDC issuer on
// 127.0.0.1), with a sealer and loopback egress so that a member can
// connect their own MCP server.
type ssoStack struct {
	*stack
	iss *oidcissuer.Issuer
}

func newSSOStack(t *testing.T, users, explicit map[string]string, with func(*api.Config)) *ssoStack {
	t.Helper()
	iss := oidcissuer.Start(t, audience)
	v, err := sso.NewVerifier(context.Background(), sso.Config{Issuer: iss.URL, Audience: audience})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "keys", "dev-seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWith(t, users, explicit, func(c *api.Config) {
		c.OIDC, c.Sealer, c.Egress = v, sealer, testenv.Loopback
		if with != nil {
			with(c)
		}
	})
	return &ssoStack{stack: s, iss: iss}
}

// signIn is a request of person sub with a fresh token carrying email and
// roles, which records (or refreshes) them as a member, as any request of
// theirs does; it returns a client holding the token.
func (s *ssoStack) signIn(sub, email string, roles ...string) *client.Client {
	s.t.Helper()
	claims := s.iss.Claims(sub, sso.DefaultRolesClaim, roles)
	claims["email"] = email
	c, err := client.New(s.url, s.iss.Sign(s.t, claims))
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := c.Approvals(context.Background()); err != nil {
		s.t.Fatalf("%s signs in: %v", sub, err)
	}
	return c
}

// personalCall has owner connect their own MCP server (official Go SDK,
// on 127.0.0.1) as a personal connection, start a run on it and have the
// runner call its create_issue tool, which waits for a human. It returns
// the approval and a function asking again for the runner's answer.
func (s *ssoStack) personalCall(owner *client.Client, name string) (string, func() client.Answer) {
	s.t.Helper()
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	type in struct {
		Title string `json:"title" jsonschema:"the issue's title"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "create_issue", Description: "Creates an issue."},
		func(_ context.Context, _ *mcp.CallToolRequest, v in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created " + v.Title}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	up := httptest.NewServer(h)
	s.t.Cleanup(up.Close)

	var con struct{ ID string }
	if err := owner.Do(ctx, "POST", "/v1/connections", map[string]any{
		"name": name, "url": up.URL, "kind": "personal",
		"credential":   map[string]any{"type": "bearer", "token": "owner-secret"},
		"tool_classes": map[string]string{"create_issue": "write"},
	}, &con); err != nil {
		s.t.Fatalf("create the personal connection: %v", err)
	}
	if err := owner.Do(ctx, "POST", "/v1/connections/"+con.ID+"/tools/refresh", nil, nil); err != nil {
		s.t.Fatalf("refresh: %v", err)
	}
	var pol struct{ ID string }
	if err := owner.Do(ctx, "POST", "/v1/policies", json.RawMessage(`{"name":"p","default_verdict":"require_approval","rules":[]}`), &pol); err != nil {
		s.t.Fatal(err)
	}
	var ses struct{ ID, Token string }
	if err := owner.Do(ctx, "POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "connections": []string{con.ID}, "budget": map[string]any{"limit_usd": 1}}, &ses); err != nil {
		s.t.Fatalf("create the run: %v", err)
	}
	runner, _ := client.New(s.url, ses.Token)
	ask := func() client.Answer {
		var ans client.Answer
		if err := runner.Do(ctx, "POST", "/v1/sessions/"+ses.ID+"/tools/call", map[string]any{"tool_call_id": "toolu_p", "tool_name": "mcp__" + name + "__create_issue", "input": map[string]any{"title": "mine"}}, &ans); err != nil {
			s.t.Fatalf("tools/call: %v", err)
		}
		return ans
	}
	first := ask()
	if first.Decision != vocab.Pending {
		s.t.Fatalf("the personal call = %+v, want pending", first)
	}
	return first.ApprovalID, ask
}

// postsOf returns the messages posted about approval id.
func postsOf(posts []message, id string) []message {
	var out []message
	for _, p := range posts {
		if strings.Contains(p.Text, id) {
			out = append(out, p)
		}
	}
	return out
}

// TestPersonalCallGoesToItsOwner: a call on a personal connection is sent
// to its owner alone, as a direct message with the buttons; no channel
// sees it. An admin's and another member's clicks on it are refused; the
// owner's approves it, the message loses its buttons, and the call runs.
// A shared call still goes to the channel.
func TestPersonalCallGoesToItsOwner(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t, map[string]string{"U_OWNER": "owner@example.com", "U_ADA": "ada@example.com", "U_BOB": "bob@example.com"}, nil, nil)
	owner := s.signIn("owner-sub", "owner@example.com", "admin") // admins create runs
	s.signIn("ada-sub", "ada@example.com", "admin")
	s.signIn("bob-sub", "bob@example.com", "member")
	apr, ask := s.personalCall(owner, "notes")

	var dm []message
	waitFor(t, "the owner's direct message", func() bool {
		posts, _, _, _ := s.slack.snapshot()
		dm = postsOf(posts, apr)
		return len(dm) > 0
	})
	if len(dm) != 1 || dm[0].Channel != "U_OWNER" {
		t.Fatalf("messages of the personal call = %+v, want one, to U_OWNER", dm)
	}
	text := blocksText(dm[0].Blocks)
	if !strings.Contains(text, "Only you decide this") || !slices.Contains(blockTypes(dm[0].Blocks), "actions") {
		t.Errorf("the owner's message reads %q (blocks %v), want who decides it and the buttons", text, blockTypes(dm[0].Blocks))
	}
	if strings.Contains(text, "owner-secret") {
		t.Error("the message carries the connection's credential")
	}

	for i, u := range []string{"U_ADA", "U_BOB"} {
		s.interact(s.clickBody(u, slackbot.ActionApproveOnce, apr, 10+i))
	}
	waitFor(t, "the refusals", func() bool { _, _, r, _ := s.slack.snapshot(); return len(r) >= 2 })
	_, _, replies, _ := s.slack.snapshot()
	for _, r := range replies {
		if !strings.Contains(r, "You may not decide") {
			t.Errorf("reply to another's click = %q, want refused", r)
		}
	}
	// Nor does the deny modal, which shows the call, open for them.
	s.interact(s.clickBody("U_BOB", slackbot.ActionDeny, apr, 12))
	if _, _, r, views := s.slack.snapshot(); views != 0 || len(r) != 3 || !strings.Contains(r[2], "You may not decide") {
		t.Errorf("another member's deny click: %d modals, replies %q; want none and a refusal", views, r)
	}
	if got := s.status(apr); got != "pending" {
		t.Fatalf("after the others' clicks the approval is %s, want pending", got)
	}

	s.interact(s.clickBody("U_OWNER", slackbot.ActionApproveOnce, apr, 20))
	waitFor(t, "the owner's decision", func() bool { return s.status(apr) == "approved_once" })
	waitFor(t, "the message's update", func() bool {
		_, updates, _, _ := s.slack.snapshot()
		for _, u := range updates {
			if u.Channel == "U_OWNER" && !slices.Contains(blockTypes(u.Blocks), "actions") {
				return true
			}
		}
		return false
	})
	if ans := ask(); ans.Decision != vocab.Allow {
		t.Errorf("the call after the owner approved = %+v, want allow", ans)
	}
	a, _ := s.admin.Approval(context.Background(), apr)
	if a.DecidedBy != "owner-sub" {
		t.Errorf("decided by %q, want owner-sub", a.DecidedBy)
	}

	// A shared call still goes to the channel; the personal one never did.
	runID, tok := s.run()
	shared := s.pending(runID, tok, "s1", "rm x")
	waitFor(t, "the shared call's message", func() bool { posts, _, _, _ := s.slack.snapshot(); return len(postsOf(posts, shared)) == 1 })
	posts, updates, _, _ := s.slack.snapshot()
	if p := postsOf(posts, shared); p[0].Channel != channel {
		t.Errorf("the shared call went to %s, want %s", p[0].Channel, channel)
	}
	for _, m := range append(posts, updates...) {
		if strings.Contains(m.Text, apr) && m.Channel != "U_OWNER" {
			t.Errorf("the personal call reached %s", m.Channel)
		}
	}
}

// TestPersonalCallWithoutASlackUser: an owner Slack cannot vouch for (no
// user with their email, or one whose email is unconfirmed) gets no
// message, and nothing is posted anywhere else instead.
func TestPersonalCallWithoutASlackUser(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t, map[string]string{"U_OTHER": "other@example.com", "U_UNCONFIRMED": "carol@example.com"}, nil, nil)
	s.slack.unconfirmed["U_UNCONFIRMED"] = true
	for _, who := range []struct{ sub, email string }{{"owner-sub", "owner@example.com"}, {"carol-sub", "carol@example.com"}} {
		apr, _ := s.personalCall(s.signIn(who.sub, who.email, "admin"), "notes"+strings.TrimSuffix(who.sub, "-sub"))
		// The notifier runs after the commit; a shared call posted after it
		// shows the notifier has had its turn.
		runID, tok := s.run()
		shared := s.pending(runID, tok, "s-"+who.sub, "rm x")
		waitFor(t, "the shared call's message", func() bool { posts, _, _, _ := s.slack.snapshot(); return len(postsOf(posts, shared)) == 1 })
		time.Sleep(100 * time.Millisecond)
		if posts, _, _, _ := s.slack.snapshot(); len(postsOf(posts, apr)) != 0 {
			t.Errorf("%s's personal call was posted: %+v", who.sub, postsOf(posts, apr))
		}
	}
}

// TestExplicitMappingForTheOwner: FLUIDBOX_SLACK_USERS names the owner's
// Slack user ahead of the email.
func TestExplicitMappingForTheOwner(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t, map[string]string{"U_BYEMAIL": "owner@example.com"}, map[string]string{"U_MAPPED": "owner-sub"}, nil)
	apr, _ := s.personalCall(s.signIn("owner-sub", "owner@example.com", "admin"), "notes")
	waitFor(t, "the owner's direct message", func() bool { posts, _, _, _ := s.slack.snapshot(); return len(postsOf(posts, apr)) == 1 })
	if posts, _, _, _ := s.slack.snapshot(); postsOf(posts, apr)[0].Channel != "U_MAPPED" {
		t.Errorf("the message went to %s, want the explicit mapping U_MAPPED", postsOf(posts, apr)[0].Channel)
	}
}

// TestStaleRolesAskToSignIn: a click decides only with roles seen within
// the window (24 hours unless set); past it the bot asks the person to
// sign in again and decides nothing; once they have, the click decides.
func TestStaleRolesAskToSignIn(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t, map[string]string{"U_APRIL": "april@example.com", "U_RECENT": "recent@example.com"}, map[string]string{"U_MAPPED": "mapped-sub", "U_OP": "admin"}, nil)
	at := func(ago time.Duration) string { return store.FormatTime(time.Now().Add(-ago)) }
	for _, m := range []store.Member{
		{Sub: "april-sub", Email: "april@example.com", Roles: []string{"approver"}, LastSeen: at(25 * time.Hour)},
		{Sub: "recent-sub", Email: "recent@example.com", Roles: []string{"approver"}, LastSeen: at(23 * time.Hour)},
		{Sub: "mapped-sub", Roles: []string{"approver"}, LastSeen: at(48 * time.Hour)},
	} {
		m.Status, m.FirstSeen = store.MemberActive, m.LastSeen
		if err := s.st.PutMember(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	runID, tok := s.run()
	n := 0
	click := func(user, id string) string {
		t.Helper()
		n++
		before := len(s.replies())
		s.interact(s.clickBody(user, slackbot.ActionApproveOnce, id, n))
		waitFor(t, "the reply to "+user, func() bool { return len(s.replies()) > before })
		return s.replies()[before]
	}
	stale := s.pending(runID, tok, "c1", "rm a")
	for _, u := range []string{"U_APRIL", "U_MAPPED"} {
		if r := click(u, stale); !strings.Contains(r, "Sign in to fluidbox again") || !strings.Contains(r, "Nothing was decided") {
			t.Errorf("%s's click with roles seen long ago: reply %q, want to sign in again", u, r)
		}
		// The modal does not open for them either.
		s.interact(s.clickBody(u, slackbot.ActionDeny, stale, 100+n))
	}
	if _, _, _, views := s.slack.snapshot(); views != 0 {
		t.Errorf("the deny modal opened %d times for stale roles", views)
	}
	if got := s.status(stale); got != "pending" {
		t.Fatalf("after stale clicks the approval is %s, want pending", got)
	}
	// Within the window; and the operator's explicit mapping has no roles
	// to go stale.
	if r := click("U_RECENT", stale); !strings.Contains(r, "Done: "+stale+" approved_once") {
		t.Errorf("a click with roles seen 23 hours ago: reply %q, want it decided", r)
	}
	if r := click("U_OP", s.pending(runID, tok, "c2", "rm b")); !strings.Contains(r, "Done: ") {
		t.Errorf("the operator's mapped click: reply %q, want it decided", r)
	}
	// Signing in again (any request with a fresh token) renews the roles.
	s.signIn("april-sub", "april@example.com", "approver")
	if r := click("U_APRIL", s.pending(runID, tok, "c3", "rm c")); !strings.Contains(r, "Done: ") {
		t.Errorf("a click after signing in again: reply %q, want it decided", r)
	}
}

// TestRolesWindowIsASetting: FLUIDBOX_SLACK_ROLES_MAX_AGE_SECONDS narrows
// the window.
func TestRolesWindowIsASetting(t *testing.T) {
	t.Parallel()
	s := newSSOStack(t, map[string]string{"U_APRIL": "april@example.com"}, nil, func(c *api.Config) { c.Slack.RolesMaxAge = 2 * time.Hour })
	m := store.Member{Sub: "april-sub", Status: store.MemberActive, Email: "april@example.com", Roles: []string{"approver"}, LastSeen: store.FormatTime(time.Now().Add(-3 * time.Hour))}
	m.FirstSeen = m.LastSeen
	if err := s.st.PutMember(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")
	s.interact(s.clickBody("U_APRIL", slackbot.ActionApproveOnce, apr, 1))
	waitFor(t, "the reply", func() bool { return len(s.replies()) == 1 })
	if r := s.replies()[0]; !strings.Contains(r, "longer than the 2h0m0s") {
		t.Errorf("reply = %q, want the configured window named", r)
	}
	if got := s.status(apr); got != "pending" {
		t.Errorf("approval = %s, want pending", got)
	}
}

func (s *stack) replies() []string {
	_, _, r, _ := s.slack.snapshot()
	return r
}
