package slackbot_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestMessageApproveAndUpdate: an approval posts a message that shows the
// call safely with its rule, run, trust tier, time left and what each
// button allows; a click by an approver (matched by email) decides it, the
// runner is answered, the clicker is told, and the message is updated from
// the committed decision, its buttons gone.
func TestMessageApproveAndUpdate(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"U_ALICE": "Alice@Example.com"}, nil)
	s.member("alice-sub", "alice@example.com", "approver")
	runID, tok := s.run()
	cmd := "rm -rf build/ '\u202egnp.exe'" + strings.Repeat("\n", 40) + "x"
	apr := s.pending(runID, tok, "c1", cmd)

	waitFor(t, "the message", func() bool { p, _, _, _ := s.slack.snapshot(); return len(p) == 1 })
	posts, _, _, _ := s.slack.snapshot()
	m := posts[0]
	text := blocksText(m.Blocks)
	for _, want := range []string{
		"Approval needed: Bash",
		`rm -rf build/ '\u{202E}gnp.exe'`, "[40 line breaks]",
		`Rule: {"id":"ask-rm","match":{"command_prefix":["rm"]},"tool":"Bash","verdict":"require_approval"}`,
		"Run: " + runID, "Trust tier: trusted", "Time left: ",
		"Approve for run: allows every `rm ...` command for the rest of this run (" + runID + ")",
		"Approve once", "Approve for run", "Deny",
		"Look twice before approving:\n• destructive: rm removes recursively or by force", "Policy: slack (pol_",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("message reads:\n%s\nwant %q in it", text, want)
		}
	}
	// A destructive line's Approve button is not the primary one.
	for _, b := range m.Blocks.BlockSet {
		if ab, ok := b.(*slack.ActionBlock); ok {
			for _, e := range ab.Elements.ElementSet {
				if be, ok := e.(*slack.ButtonBlockElement); ok && be.ActionID == slackbot.ActionApproveOnce && be.Style == slack.StylePrimary {
					t.Error("the Approve once button of a destructive line is the primary one")
				}
			}
		}
	}
	if strings.ContainsRune(text, '\u202e') {
		t.Error("message carries a raw bidi override")
	}
	if m.Channel != channel || !slices.Contains(blockTypes(m.Blocks), "actions") {
		t.Errorf("message in %q with blocks %v, want %q with buttons", m.Channel, blockTypes(m.Blocks), channel)
	}

	if r := s.interact(s.clickBody("U_ALICE", slackbot.ActionApproveOnce, apr, 1)); r.status != 200 {
		t.Fatalf("click = %+v", r)
	}
	if got := s.status(apr); got != "approved_once" {
		t.Fatalf("approval after the click = %s, want approved_once", got)
	}
	a, _ := s.admin.Approval(context.Background(), apr)
	if a.DecidedBy != "alice-sub" {
		t.Errorf("decided_by = %q, want alice-sub", a.DecidedBy)
	}
	if ans := s.answer(runID, tok, "c1", cmd); ans.Decision != vocab.Allow {
		t.Errorf("runner after the click = %+v, want allow", ans)
	}
	// The post's own follow-up and the decision's observer may both find
	// the message pending and update it: each shows the settled state.
	waitFor(t, "the update", func() bool { _, u, _, _ := s.slack.snapshot(); return len(u) >= 1 })
	_, updates, responses, _ := s.slack.snapshot()
	for _, u := range updates {
		if u.TS != m.TS || u.Channel != channel || slices.Contains(blockTypes(u.Blocks), "actions") ||
			!strings.Contains(blocksText(u.Blocks), "Approved once by alice-sub: Bash") {
			t.Errorf("update = ts %s, blocks %v:\n%s\nwant message %s, settled, without buttons", u.TS, blockTypes(u.Blocks), blocksText(u.Blocks), m.TS)
		}
	}
	if len(responses) != 1 || !strings.Contains(responses[0], "Done: "+apr+" approved_once") {
		t.Errorf("replies to the clicker = %q", responses)
	}
	if strings.Contains(s.logs.String(), botToken) || strings.Contains(s.logs.String(), signingSecret) {
		t.Error("a Slack secret reached the log")
	}
}

// TestSignatures: unsigned, badly signed, tampered, stale and future
// requests are refused before anything is read or written; a replay of a
// good request is refused.
func TestSignatures(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"U_ALICE": "alice@example.com"}, nil)
	s.member("alice-sub", "alice@example.com", "approver")
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")
	body := s.clickBody("U_ALICE", slackbot.ActionApproveOnce, apr, 1)
	now := time.Now()

	unsigned := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	noTS := sign(signingSecret, now, body)
	noTS.Del("X-Slack-Request-Timestamp")
	tampered := sign(signingSecret, now, body)
	cases := []struct {
		name string
		h    http.Header
		body string
	}{
		{"unsigned", unsigned, body},
		{"no timestamp", noTS, body},
		{"another secret", sign("not-the-secret", now, body), body},
		{"tampered body", tampered, strings.Replace(body, "approve_once", "approve_session", 1)},
		{"stale (6 minutes)", sign(signingSecret, now.Add(-6*time.Minute), body), body},
		{"from the future", sign(signingSecret, now.Add(6*time.Minute), body), body},
	}
	for _, c := range cases {
		if r := s.post(c.h, c.body); r.status != 401 || !strings.Contains(r.body, `"unauthenticated"`) {
			t.Errorf("%s: %+v, want 401 unauthenticated", c.name, r)
		}
	}
	if got := s.status(apr); got != "pending" {
		t.Fatalf("approval after refused requests = %s, want pending", got)
	}
	if s.slack.userInfos != 0 {
		t.Errorf("users.info called %d times for refused requests, want 0", s.slack.userInfos)
	}
	for _, it := range scanKeys(t, s) {
		if strings.HasPrefix(it, "SLACKREQ#") {
			t.Errorf("a refused request left %s in the table", it)
		}
	}

	good := sign(signingSecret, now.Add(-4*time.Minute), body)
	if r := s.post(good, body); r.status != 200 {
		t.Fatalf("signed request 4 minutes old = %+v, want 200", r)
	}
	if got := s.status(apr); got != "approved_once" {
		t.Fatalf("approval = %s, want approved_once", got)
	}
	if r := s.post(good, body); r.status != 409 {
		t.Errorf("replayed request = %+v, want 409", r)
	}
	// The same signature spelled in upper-case hex is still a valid
	// signature of the same request, and so still a replay.
	recased := good.Clone()
	recased.Set("X-Slack-Signature", "v0="+strings.ToUpper(strings.TrimPrefix(good.Get("X-Slack-Signature"), "v0=")))
	if r := s.post(recased, body); r.status != 409 {
		t.Errorf("replayed request with its signature re-cased = %+v, want 409", r)
	}
}

// TestNotAnApprover: a member without role approver, an unknown Slack user
// and a deactivated member decide nothing, approve or deny.
func TestNotAnApprover(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"U_BOB": "bob@example.com", "U_EVE": "eve@example.com", "U_OLD": "old@example.com"}, nil)
	s.member("bob-sub", "bob@example.com", "member")
	s.member("old-sub", "old@example.com", "approver")
	if _, err := s.st.SetMemberStatus(context.Background(), "old-sub", "inactive", "admin", "2030-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")
	for i, c := range []struct{ user, want string }{
		{"U_BOB", "You may not decide this approval"},
		{"U_EVE", "fluidbox does not know you"},
		{"U_OLD", "deactivated"},
	} {
		if r := s.interact(s.clickBody(c.user, slackbot.ActionApproveSession, apr, 10+i)); r.status != 200 {
			t.Fatalf("%s click = %+v", c.user, r)
		}
		r := s.interact(s.denyBody(c.user, apr, "no", 20+i))
		if r.status != 200 || !strings.Contains(r.body, c.want) {
			t.Errorf("%s deny = %+v, want the modal to say %q", c.user, r, c.want)
		}
	}
	if got := s.status(apr); got != "pending" {
		t.Fatalf("approval = %s, want pending", got)
	}
	_, _, responses, _ := s.slack.snapshot()
	if len(responses) != 3 || !strings.Contains(responses[0], "You may not decide") || !strings.Contains(responses[1], "does not know you") {
		t.Errorf("replies = %q", responses)
	}
}

// TestPersonalConnectionOwner: a call on a personal connection is decided
// through Slack only by its owner; an admin is refused, approve and deny
// alike, and the owner's deny (through the modal, with a reason) applies.
func TestPersonalConnectionOwner(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"U_ADMIN": "root@example.com"}, map[string]string{"U_OWNER": "owner-sub"})
	s.member("admin-sub", "root@example.com", "admin")
	s.member("owner-sub", "owner@example.com", "member")
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")
	s.markPersonal(runID, "c1", "owner-sub")

	s.interact(s.clickBody("U_ADMIN", slackbot.ActionApproveOnce, apr, 1))
	if r := s.interact(s.denyBody("U_ADMIN", apr, "admin says no", 2)); !strings.Contains(r.body, "You may not decide") {
		t.Errorf("admin deny = %+v, want refused", r)
	}
	if got := s.status(apr); got != "pending" {
		t.Fatalf("approval after the admin's clicks = %s, want pending", got)
	}
	// The deny button opens the modal for the owner.
	s.interact(s.clickBody("U_OWNER", slackbot.ActionDeny, apr, 3))
	if _, _, _, views := s.slack.snapshot(); views != 1 {
		t.Errorf("views.open calls = %d, want 1", views)
	}
	r := s.interact(s.denyBody("U_OWNER", apr, "not with my token", 4))
	if !strings.Contains(r.body, "Done: "+apr+" denied") {
		t.Errorf("owner deny = %+v, want applied", r)
	}
	a, _ := s.admin.Approval(context.Background(), apr)
	if a.Status != vocab.ApprovalDenied || a.DecidedBy != "owner-sub" || a.Reason != "not with my token" {
		t.Errorf("approval = %+v, want denied by owner-sub with the reason", a)
	}
}

// TestRacingClicks: 20 concurrent decisions on one approval, approve and
// deny from different approvers: exactly one applies, and every other
// clicker is shown the state it settled in.
func TestRacingClicks(t *testing.T) {
	t.Parallel()
	users := map[string]string{}
	for i := range 20 {
		users[fmt.Sprintf("U%02d", i)] = fmt.Sprintf("u%02d@example.com", i)
	}
	s := newStack(t, users, nil)
	for i := range 20 {
		s.member(fmt.Sprintf("sub-%02d", i), fmt.Sprintf("u%02d@example.com", i), "approver")
	}
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")

	var wg sync.WaitGroup
	answers := make([]string, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("U%02d", i)
			if i%2 == 0 {
				answers[i] = s.interact(s.clickBody(user, slackbot.ActionApproveOnce, apr, i)).body
			} else {
				answers[i] = s.interact(s.denyBody(user, apr, "race", i)).body
			}
		}()
	}
	wg.Wait()
	a, _ := s.admin.Approval(context.Background(), apr)
	if a.Status != vocab.ApprovedOnce && a.Status != vocab.ApprovalDenied {
		t.Fatalf("approval = %+v, want settled", a)
	}
	_, _, responses, _ := s.slack.snapshot()
	all := append(slices.Clone(responses), answers...)
	done, told := 0, 0
	for _, r := range all {
		switch {
		case strings.Contains(r, "Done: "+apr+" "+string(a.Status)):
			done++
		case strings.Contains(r, "Already settled: "+apr+" is "+string(a.Status)+" by "+a.DecidedBy):
			told++
		}
	}
	if done != 1 || told != 19 {
		t.Errorf("%d applied and %d shown the settled state, want 1 and 19:\n%s", done, told, strings.Join(all, "\n"))
	}
	evs, err := s.admin.Events(context.Background(), runID, 0, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	decided := 0
	for _, e := range evs.Events {
		if e.Type == "approval.decided" {
			decided++
		}
	}
	if decided != 1 {
		t.Errorf("approval.decided events = %d, want 1", decided)
	}
}

// TestExpiryUpdatesMessage: an approval nobody decides expires, and its
// message says so, without buttons.
func TestExpiryUpdatesMessage(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, nil)
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "git push origin main")
	waitFor(t, "the message", func() bool { p, _, _, _ := s.slack.snapshot(); return len(p) == 1 })
	time.Sleep(1100 * time.Millisecond)
	if applied, err := s.expirer.Expire(context.Background(), apr); err != nil || !applied {
		t.Fatalf("Expire = %v, %v", applied, err)
	}
	waitFor(t, "the update", func() bool { _, u, _, _ := s.slack.snapshot(); return len(u) == 1 })
	_, updates, _, _ := s.slack.snapshot()
	if u := updates[0]; slices.Contains(blockTypes(u.Blocks), "actions") || !strings.Contains(blocksText(u.Blocks), "Expired (nobody decided in time, so denied)") {
		t.Errorf("update after expiry: %v\n%s", blockTypes(u.Blocks), blocksText(u.Blocks))
	}
	// Another delivery of the same notification changes nothing.
	if err := s.notifier.Show(context.Background(), apr); err != nil {
		t.Fatal(err)
	}
	if p, u, _, _ := s.slack.snapshot(); len(p) != 1 || len(u) != 1 {
		t.Errorf("after a redelivery: %d posts and %d updates, want 1 and 1", len(p), len(u))
	}
}

// TestSlackDown: with Slack failing, the approval is decided from the API
// (what the page and the CLI call) as ever; the notifier's failure is
// logged and retried, and once Slack is back the message shows the
// committed outcome.
func TestSlackDown(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil, nil)
	s.slack.fail.Store(true)
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")
	settled, err := s.admin.Decide(context.Background(), apr, "denied", "not now")
	if err != nil || settled.Applied == nil || !*settled.Applied {
		t.Fatalf("decide through the API with Slack down = %+v, %v", settled, err)
	}
	if ans := s.answer(runID, tok, "c1", "rm a"); ans.Decision != vocab.Deny {
		t.Errorf("runner = %+v, want deny", ans)
	}
	waitFor(t, "a logged retry", func() bool { return strings.Contains(s.logs.String(), "show approval failed; retrying") })
	s.slack.fail.Store(false)
	waitFor(t, "the message", func() bool { p, _, _, _ := s.slack.snapshot(); return len(p) >= 1 })
	time.Sleep(300 * time.Millisecond)
	posts, updates, _, _ := s.slack.snapshot()
	last := posts[len(posts)-1].Blocks
	if len(updates) > 0 {
		last = updates[len(updates)-1].Blocks
	}
	if txt := blocksText(last); !strings.Contains(txt, "Denied by admin: Bash") || !strings.Contains(txt, "Reason: not now") || slices.Contains(blockTypes(last), "actions") {
		t.Errorf("message once Slack is back:\n%s\nwant the committed deny, without buttons", txt)
	}
	if len(posts) != 1 {
		t.Errorf("posts = %d, want one message per approval", len(posts))
	}
}

// TestExternalOrganizationUser: a Slack Connect user from another
// organization, in a channel shared with the approvals channel, whose
// profile email is an approver's (their organization chose it: its SSO
// can assert any address) decides nothing, approve or deny. Only the
// app's own team vouches for an email.
func TestExternalOrganizationUser(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"U_ALICE": "alice@example.com", "U_EXT": "alice@example.com"}, nil)
	s.slack.teams["U_EXT"] = "T0OTHERORG"
	s.member("alice-sub", "alice@example.com", "approver")
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")

	if r := s.interact(s.clickBody("U_EXT", slackbot.ActionApproveOnce, apr, 1)); r.status != 200 {
		t.Fatalf("click = %+v", r)
	}
	if r := s.interact(s.denyBody("U_EXT", apr, "external says no", 2)); !strings.Contains(r.body, "does not know you") {
		t.Errorf("external deny = %+v, want refused as unknown", r)
	}
	if got := s.status(apr); got != "pending" {
		t.Fatalf("approval after an external user's clicks = %s, want pending", got)
	}
	_, _, responses, _ := s.slack.snapshot()
	if len(responses) != 1 || !strings.Contains(responses[0], "does not know you") {
		t.Errorf("replies = %q, want the click refused as unknown", responses)
	}
	// The app's own Alice still decides.
	s.interact(s.clickBody("U_ALICE", slackbot.ActionApproveOnce, apr, 3))
	if got := s.status(apr); got != "approved_once" {
		t.Errorf("approval after Alice's click = %s, want approved_once", got)
	}
}

// TestUnconfirmedEmail: a Slack user of the app's own team whose profile
// email is an approver's but was never confirmed with Slack (Slack lets a
// user type any address on a profile before confirming it) decides
// nothing, approve or deny; once Slack reports it confirmed, the same
// user decides.
func TestUnconfirmedEmail(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"U_ALICE": "alice@example.com"}, nil)
	s.slack.mu.Lock()
	s.slack.unconfirmed["U_ALICE"] = true
	s.slack.mu.Unlock()
	s.member("alice-sub", "alice@example.com", "approver")
	runID, tok := s.run()
	apr := s.pending(runID, tok, "c1", "rm a")

	if r := s.interact(s.clickBody("U_ALICE", slackbot.ActionApproveOnce, apr, 1)); r.status != 200 {
		t.Fatalf("click = %+v", r)
	}
	if r := s.interact(s.denyBody("U_ALICE", apr, "unconfirmed says no", 2)); !strings.Contains(r.body, "does not know you") {
		t.Errorf("unconfirmed deny = %+v, want refused as unknown", r)
	}
	if got := s.status(apr); got != "pending" {
		t.Fatalf("approval after an unconfirmed user's clicks = %s, want pending", got)
	}
	_, _, responses, _ := s.slack.snapshot()
	if len(responses) != 1 || !strings.Contains(responses[0], "does not know you") {
		t.Errorf("replies = %q, want the click refused as unknown", responses)
	}
	// Confirmed now: an unconfirmed answer was not remembered, so Slack is
	// asked again and the click applies.
	s.slack.mu.Lock()
	delete(s.slack.unconfirmed, "U_ALICE")
	s.slack.mu.Unlock()
	s.interact(s.clickBody("U_ALICE", slackbot.ActionApproveOnce, apr, 3))
	if got := s.status(apr); got != "approved_once" {
		t.Errorf("approval after the confirmed click = %s, want approved_once", got)
	}
}
