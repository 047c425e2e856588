//go:build e2e

package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/browsertest"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/internal/oidcissuer"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/sso"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// personalPolicy asks a human about the personal connection's one tool.
const personalPolicy = `{"name":"personal","default_verdict":"deny","rules":[
 {"id":"ask-issue","tool":"mcp__notes__create_issue","verdict":"require_approval"}]}`

// newPersonalStack is the whole API in SSO mode with a sealer and loopback
// egress, so a member's personal connection can reach an MCP server.
func newPersonalStack(t *testing.T) *stack {
	t.Helper()
	st, db := testenv.StoreOn(t)
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "keys", "dev-seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{st: st, dbURL: db.URL, issuer: oidcissuer.Start(t, clientID)}
	v, err := sso.NewVerifier(context.Background(), sso.Config{Issuer: s.issuer.URL, Audience: clientID})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.Build(api.Config{AdminToken: adminToken, Ledger: ledger.New(st, time.Now), OIDC: v, Sealer: sealer, Egress: testenv.Loopback})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	if s.admin, err = client.New(srv.URL, adminToken); err != nil {
		t.Fatal(err)
	}
	return s
}

// notesServer is an MCP server (official Go SDK, Streamable HTTP) on
// 127.0.0.1 with one tool, create_issue, behind a bearer token.
func notesServer(t *testing.T, token string) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	type in struct {
		Title string `json:"title" jsonschema:"the issue's title"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "create_issue", Description: "Creates an issue."},
		func(_ context.Context, _ *mcp.CallToolRequest, v in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created " + v.Title}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// personalApproval has owner (a signed-in person's token) connect their own
// MCP server as a personal connection, start a run on it, and have the
// runner call its tool, which waits for a human; it returns the approval
// and a function that asks again for the runner's answer.
func (s *stack) personalApproval(t *testing.T, owner string) (string, func() client.Answer) {
	t.Helper()
	ctx := context.Background()
	c, err := client.New(s.url, owner)
	if err != nil {
		t.Fatal(err)
	}
	var con struct{ ID string }
	if err := c.Do(ctx, "POST", "/v1/connections", map[string]any{
		"name": "notes", "url": notesServer(t, "personal-secret"), "kind": "personal",
		"credential":   map[string]any{"type": "bearer", "token": "personal-secret"},
		"tool_classes": map[string]string{"create_issue": "write"},
	}, &con); err != nil {
		t.Fatalf("create the personal connection: %v", err)
	}
	if err := c.Do(ctx, "POST", "/v1/connections/"+con.ID+"/tools/refresh", nil, nil); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	var pol struct{ ID string }
	if err := c.Do(ctx, "POST", "/v1/policies", json.RawMessage(personalPolicy), &pol); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	var ses struct{ ID, Token string }
	if err := c.Do(ctx, "POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "connections": []string{con.ID}, "budget": map[string]any{"limit_usd": 1}}, &ses); err != nil {
		t.Fatalf("create the run: %v", err)
	}
	runner, err := client.New(s.url, ses.Token)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() client.Answer {
		var ans client.Answer
		if err := runner.Do(ctx, "POST", "/v1/sessions/"+ses.ID+"/tools/call", map[string]any{"tool_call_id": "toolu_personal", "tool_name": "mcp__notes__create_issue", "input": map[string]any{"title": "mine"}}, &ans); err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		return ans
	}
	first := ask()
	if first.Decision != vocab.Pending || first.ApprovalID == "" {
		t.Fatalf("the personal call = %+v, want pending", first)
	}
	return first.ApprovalID, ask
}

// signInAs signs claims' person in on a fresh page and waits for the inbox.
func (s *stack) signInAs(t *testing.T, claims map[string]any) context.Context {
	t.Helper()
	ctx := browsertest.Start(t, 1280, 900, false)
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	s.issuer.SignInAs(claims)
	if err := chromedp.Do(step,
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.ID("sign-in")),
		chromedp.Click(chromedp.ID("sign-in")),
		chromedp.WaitVisible(chromedp.ID("app")),
	); err != nil {
		t.Fatalf("sign in as %v: %v", claims["sub"], err)
	}
	waitText(t, step, "#conn", "connected")
	return step
}

// TestBrowserPersonalInbox: a member signed in sees the call on their own
// personal connection and approves it on the page, which runs it; another
// member sees an empty inbox, not an error; an admin sees the shared call
// and gets no card, so no button, for the member's.
func TestBrowserPersonalInbox(t *testing.T) {
	s := newPersonalStack(t)
	alice := s.issuer.Sign(t, s.issuer.Claims("u-alice", sso.DefaultRolesClaim, []string{"admin"}))
	mine, ask := s.personalApproval(t, alice)
	_, shared, _ := s.waitingCall(t, "rm -rf build/")
	card := func(id string) string { return `li.approval[data-approval-id="` + id + `"]` }

	// Another member: nothing to decide, and the page says so.
	bob := s.signInAs(t, map[string]any{"sub": "u-bob", "email": "bob@example.com", "fluidbox_roles": []string{"member"}})
	if n := eval[int](t, bob, `document.querySelectorAll("li.approval").length`); n != 0 {
		t.Errorf("another member's page shows %d approvals, want none", n)
	}
	if got := text(t, bob, "#pending-count"); got != "0" || eval[bool](t, bob, `document.getElementById("attention-empty").hidden`) {
		t.Errorf("another member's count = %q, empty note shown = %v; want 0 and the note", got, !eval[bool](t, bob, `document.getElementById("attention-empty").hidden`))
	}
	if got := text(t, bob, "#conn"); strings.Contains(got, "403") {
		t.Errorf("another member's page reads %q: an empty inbox is no refusal", got)
	}

	// An admin: the shared call, not the member's.
	ada := s.signInAs(t, map[string]any{"sub": "u-ada", "email": "ada@example.com", "fluidbox_roles": []string{"admin"}})
	if err := chromedp.Do(ada, chromedp.WaitVisible(chromedp.CSS(card(shared.ID)))); err != nil {
		t.Fatalf("the admin's page: %v", err)
	}
	if n := eval[int](t, ada, `document.querySelectorAll('`+card(mine)+`').length`); n != 0 {
		t.Errorf("the admin's page has a card (and buttons) for another's personal call")
	}
	if got := text(t, ada, "#pending-count"); got != "1" {
		t.Errorf("the admin's count = %q, want 1", got)
	}

	// The owner, signed in as a member: their call, decided on the page.
	me := s.signInAs(t, map[string]any{"sub": "u-alice", "email": "alice@example.com", "fluidbox_roles": []string{"member"}})
	if err := chromedp.Do(me, chromedp.WaitVisible(chromedp.CSS(card(mine)))); err != nil {
		t.Fatalf("the owner's page: %v", err)
	}
	if n := eval[int](t, me, `document.querySelectorAll('`+card(shared.ID)+`').length`); n != 0 {
		t.Errorf("a member's page shows a shared call they may not decide")
	}
	if got := text(t, me, "#inbox-hint"); !strings.Contains(got, "your own personal connections") {
		t.Errorf("the owner's inbox says %q, want what it holds", got)
	}
	shot(t, me, "personal-inbox.png", 1280, 900)
	if err := chromedp.Do(me, chromedp.Click(chromedp.CSS(card(mine)+" button.approve-once")), chromedp.WaitNotPresent(chromedp.CSS(card(mine)))); err != nil {
		t.Fatalf("approve: %v", err)
	}
	waitText(t, me, "#notice", mine+" approved_once: applied")
	if ans := ask(); ans.Decision != vocab.Allow {
		t.Errorf("the runner's call after the owner approved = %+v, want allow", ans)
	}
	a, err := s.admin.Approval(context.Background(), mine)
	if err != nil || a.DecidedBy != "u-alice" {
		t.Errorf("approval = %+v, %v; want decided by u-alice", a, err)
	}
}

// TestBrowserInboxFollowsCursors: with more approvals waiting than one page
// of the API holds (100), the page reads every page: it shows them all and
// counts them all.
func TestBrowserInboxFollowsCursors(t *testing.T) {
	s := newStack(t, false)
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatal(err)
	}
	const runs, each = 6, 18 // the default cap is 20 a run
	last := ""
	for r := 0; r < runs; r++ {
		var ses struct{ ID, Token string }
		if err := s.admin.Do(ctx, "POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 5}}, &ses); err != nil {
			t.Fatal(err)
		}
		runner, _ := client.New(s.url, ses.Token)
		for c := 0; c < each; c++ {
			in, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("rm f%d", c)})
			ans, err := runner.Permission(ctx, ses.ID, client.PermissionRequest{ToolCallID: fmt.Sprintf("c%d", c), ToolName: "Bash", Input: in}, 0)
			if err != nil || ans.Decision != vocab.Pending {
				t.Fatalf("ask = %+v, %v", ans, err)
			}
			last = ans.ApprovalID
		}
	}
	step, cancel := context.WithTimeout(browsertest.Start(t, 1280, 900, false), 60*time.Second)
	defer cancel()
	if err := chromedp.Do(step,
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.ID("token-save")),
		chromedp.WaitVisible(chromedp.CSS(`li.approval[data-approval-id="`+last+`"]`)),
	); err != nil {
		t.Fatalf("the newest of %d approvals, past the first page: %v", runs*each, err)
	}
	if got := text(t, step, "#pending-count"); got != fmt.Sprint(runs*each) {
		t.Errorf("the count reads %q, want %d", got, runs*each)
	}
	if n := eval[int](t, step, `document.querySelectorAll("li.approval").length`); n != runs*each {
		t.Errorf("the page shows %d cards, want %d", n, runs*each)
	}
}
