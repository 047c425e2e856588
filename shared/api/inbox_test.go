package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/oidcissuer"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/sso"
)

// newPersonalStack is the API in SSO mode with a sealer and loopback
// egress: people sign in through a real OIDC issuer on 127.0.0.1, and a
// personal connection reaches a real MCP server (official Go SDK).
func newPersonalStack(t *testing.T) *ssoStack {
	t.Helper()
	iss := oidcissuer.Start(t, ssoAudience)
	verifier, err := sso.NewVerifier(context.Background(), sso.Config{Issuer: iss.URL, Audience: ssoAudience})
	if err != nil {
		t.Fatal(err)
	}
	st, db := roleStore(t)
	led := ledger.New(st, time.Now)
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, OIDC: verifier, Sealer: localSealer(t), Egress: testenv.Loopback})))
	t.Cleanup(srv.Close)
	return &ssoStack{stack: &stack{t: t, url: srv.URL, st: st, db: db, led: led}, iss: iss}
}

// personalRun is a run that owner (signed in with token) starts on their
// own personal connection "jira" to a real MCP server, and the approval
// its create_issue call waits on.
func (s *ssoStack) personalRun(token string) (runID, runToken, approvalID string) {
	s.t.Helper()
	up := newMCPUpstream(s.t, "personal-secret")
	con := s.must(201, "POST", "/v1/connections", token, map[string]any{
		"name": "jira", "url": up.url(), "kind": "personal",
		"credential":   map[string]any{"type": "bearer", "token": "personal-secret"},
		"tool_classes": map[string]string{"echo": "read", "create_issue": "write"},
	})["id"].(string)
	s.must(200, "POST", "/v1/connections/"+con+"/tools/refresh", token, nil)
	pol := s.policy(brokerPolicy)
	run := s.must(201, "POST", "/v1/sessions", token, map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "connections": []string{con}, "budget": map[string]any{"limit_usd": 1}})
	runID, runToken = run["id"].(string), run["token"].(string)
	r := s.do("POST", "/v1/sessions/"+runID+"/tools/call", runToken, map[string]any{"tool_call_id": "p1", "tool_name": "mcp__jira__create_issue", "input": map[string]any{"title": "mine"}})
	if r.body["decision"] != "pending" {
		s.t.Fatalf("create_issue on a personal connection = %d %s, want pending", r.status, r.raw)
	}
	return runID, runToken, r.body["approval_id"].(string)
}

// inbox reads every page of token's GET /v1/approvals (limit per page)
// and returns the approval ids in order.
func (s *ssoStack) inbox(token string, limit int) []string {
	s.t.Helper()
	ids, _ := s.inboxPages(token, limit)
	return ids
}

// inboxPages is inbox, also counting the pages that held nothing but a
// next_cursor.
func (s *ssoStack) inboxPages(token string, limit int) (ids []string, empty int) {
	s.t.Helper()
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	ids = []string{}
	for pages := 0; ; pages++ {
		if pages > 100 {
			s.t.Fatalf("the inbox never ends")
		}
		r := s.do("GET", "/v1/approvals?"+q.Encode(), token, nil)
		if r.status != 200 {
			s.t.Fatalf("GET /v1/approvals = %d %s, want 200", r.status, r.raw)
		}
		noToken(s.t, r, token)
		list := r.body["approvals"].([]any)
		if len(list) > limit {
			s.t.Fatalf("a page of %d for limit %d", len(list), limit)
		}
		for _, a := range list {
			ids = append(ids, a.(map[string]any)["id"].(string))
		}
		next, _ := r.body["next_cursor"].(string)
		if next == "" {
			return ids, empty
		}
		if len(list) == 0 {
			empty++
		}
		q.Set("cursor", next)
	}
}

// TestInboxPersonalApprovals: a personal connection's call is in its
// owner's inbox alone, whatever role the owner's token now carries; the
// owner reads and decides it; another member, an approver, an admin and the
// operator neither list it nor read it (admins excepted: they read any
// approval) nor decide it; a member with nothing to decide gets an empty
// inbox, not a 403; approvers still list the shared calls.
func TestInboxPersonalApprovals(t *testing.T) {
	t.Parallel()
	s := newPersonalStack(t)
	runID, runToken, mine := s.personalRun(s.user("alice", "admin"))
	// A shared call, on a run of the operator's.
	sharedRun, sharedTok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	shared := s.pending(sharedRun, sharedTok, "s1", "make build")

	alice := s.user("alice", "member")
	bob := s.user("bob", "member")
	carol := s.user("carol", "approver")
	ada := s.user("ada", "admin")
	mel := s.user("mel")
	cases := []struct {
		name, token string
		want        []string
	}{
		{"the owner, as a member", alice, []string{mine}},
		{"the owner, as an admin", s.user("alice", "admin"), []string{mine, shared}},
		{"another member", bob, []string{}},
		{"a person with no role", mel, []string{}},
		{"an approver", carol, []string{shared}},
		{"an admin", ada, []string{shared}},
		{"the operator", adminToken, []string{shared}},
	}
	for _, c := range cases {
		got := s.inbox(c.token, 50)
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: inbox = %v, want %v", c.name, got, want)
		}
	}
	// One run's inbox (session_id) filters the same way.
	if r := s.must(200, "GET", "/v1/approvals?session_id="+runID, ada, nil); len(r["approvals"].([]any)) != 0 {
		t.Errorf("an admin's inbox of the owner's run = %v, want empty", r["approvals"])
	}
	if r := s.must(200, "GET", "/v1/approvals?session_id="+runID, alice, nil); len(r["approvals"].([]any)) != 1 {
		t.Errorf("the owner's inbox of their run = %v, want their approval", r["approvals"])
	}

	// Reading it: the owner and admins; nobody else.
	if a := s.must(200, "GET", "/v1/approvals/"+mine, alice, nil); a["status"] != "pending" || a["connection_id"] == nil {
		t.Errorf("the owner reads %s = %v", mine, a)
	}
	s.must(200, "GET", "/v1/approvals/"+mine, ada, nil)
	for _, o := range []struct{ name, token string }{{"another member", bob}, {"an approver", carol}, {"no role", mel}} {
		if r := s.do("GET", "/v1/approvals/"+mine, o.token, nil); r.status != 403 || errCode(r) != "forbidden" {
			t.Errorf("%s reads the owner's approval = %d %s, want 403", o.name, r.status, r.raw)
		}
	}
	// A member reads no shared approval either: it is not theirs to decide.
	if r := s.do("GET", "/v1/approvals/"+shared, bob, nil); r.status != 403 {
		t.Errorf("a member reads a shared approval = %d %s, want 403", r.status, r.raw)
	}
	// A session token stays off the inbox.
	if r := s.do("GET", "/v1/approvals", runToken, nil); r.status != 403 {
		t.Errorf("a session token lists approvals = %d %s, want 403", r.status, r.raw)
	}

	// Deciding it: everyone else is 403 and nothing moves.
	for _, o := range []struct{ name, token string }{{"another member", bob}, {"an approver", carol}, {"an admin", ada}, {"the operator", adminToken}} {
		for _, d := range []string{"approved_once", "denied"} {
			if r := s.decideAs(o.token, mine, d); r.status != 403 || errCode(r) != "forbidden" {
				t.Errorf("%s: %s = %d %s, want 403", o.name, d, r.status, r.raw)
			}
		}
	}
	r := s.decideAs(alice, mine, "approved_once")
	if r.status != 200 || r.body["applied"] != true || r.body["decided_by"] != "alice" {
		t.Fatalf("the owner approves = %d %s, want applied by alice", r.status, r.raw)
	}
	if got := s.inbox(alice, 50); len(got) != 0 {
		t.Errorf("the owner's inbox after deciding = %v, want empty", got)
	}
	r = s.do("POST", "/v1/sessions/"+runID+"/tools/call", runToken, map[string]any{"tool_call_id": "p1", "tool_name": "mcp__jira__create_issue", "input": map[string]any{"title": "mine"}})
	if r.body["decision"] != "allow" || resultText(t, r) != "created mine" {
		t.Fatalf("the approved call = %d %s, want it run", r.status, r.raw)
	}
}

// TestInboxPagesPastOthersApprovals: an inbox page examines a number of
// rows bounded by its size, so a member whose one approval sits behind
// many others' gets empty pages with a next_cursor and reaches it by
// following them; an approver pages through the shared ones without the
// personal one, each exactly once, in request order.
func TestInboxPagesPastOthersApprovals(t *testing.T) {
	t.Parallel()
	s := newPersonalStack(t)
	var shared []string
	pol := s.policy(approvalPolicy)
	for r := 0; r < 3; r++ {
		id, tok := s.gateRun(pol, runOpts{budget: 1})
		for c := 0; c < 12; c++ {
			shared = append(shared, s.pending(id, tok, fmt.Sprintf("c%d", c), fmt.Sprintf("make t%d", c)))
		}
	}
	_, _, mine := s.personalRun(s.user("alice", "admin"))

	got, empty := s.inboxPages(s.user("alice", "member"), 1)
	if !slices.Equal(got, []string{mine}) {
		t.Errorf("the owner's inbox = %v, want [%s]", got, mine)
	}
	// 36 others' rows ahead of it, at most 20 examined for a page of one.
	if empty == 0 {
		t.Errorf("the owner's inbox in pages of 1 had no empty page: one page examined all %d rows ahead of theirs", len(shared))
	}
	if got := s.inbox(s.user("carol", "approver"), 5); !slices.Equal(got, shared) {
		t.Errorf("an approver's inbox, in pages of 5 = %v, want %v in order", got, shared)
	}
}
