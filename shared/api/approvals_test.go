package api_test

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/truora/minidyn/server"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/ledger"
)

const approvalPolicy = `{"name":"approvals","default_verdict":"require_approval","rules":[
 {"id":"git-read","tool":"Bash","match":{"command_prefix":["git status"]},"verdict":"allow"},
 {"id":"git-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"require_approval","scope":"session"},
 {"id":"rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval","ttl_seconds":1}]}`

// pending asks for a call that needs a human and returns the approval id.
func (s *stack) pending(id, tok, call, cmd string) string {
	s.t.Helper()
	r := s.ask(id, tok, call, "Bash", bash(cmd))
	if r.body["decision"] != "pending" || str(r.body["approval_id"]) == "" {
		s.t.Fatalf("ask %q = %s, want pending with an approval_id", cmd, r.raw)
	}
	return r.body["approval_id"].(string)
}

func (s *stack) decide(apr, decision string) map[string]any {
	s.t.Helper()
	return s.must(200, "POST", "/v1/approvals/"+apr+"/decision", adminToken, map[string]any{"decision": decision})
}

func TestApprovalLifecycle(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	apr := s.pending(id, tok, "c1", "git push origin main")

	if got := s.must(200, "GET", "/v1/sessions/"+id, tok, nil)["status"]; got != "awaiting_approval" {
		t.Fatalf("run status = %v, want awaiting_approval", got)
	}
	list := s.must(200, "GET", "/v1/approvals", adminToken, nil)["approvals"].([]any)
	if len(list) != 1 {
		t.Fatalf("pending approvals = %d, want 1", len(list))
	}
	a := list[0].(map[string]any)
	if a["id"] != apr || a["rule_id"] != "git-push" || a["scope_key"] != "Bash:git push" || a["default_scope"] != "session" ||
		a["input"].(map[string]any)["command"] != "git push origin main" {
		t.Fatalf("pending approval = %v", a)
	}
	// The same call asked again re-attaches to the same approval.
	if again := s.ask(id, tok, "c1", "Bash", bash("git push origin main")); again.body["approval_id"] != apr {
		t.Fatalf("re-ask = %s, want the same approval", again.raw)
	}

	got := s.decide(apr, "approved_once")
	if got["applied"] != true || got["status"] != "approved_once" || got["decided_by"] != "admin" {
		t.Fatalf("decision = %v", got)
	}
	if again := s.decide(apr, "denied"); again["applied"] != false || again["status"] != "approved_once" {
		t.Fatalf("second decision = %v, want applied false and the settled state", again)
	}
	if r := s.ask(id, tok, "c1", "Bash", bash("git push origin main")); r.body["decision"] != "allow" {
		t.Fatalf("re-ask after approval = %s, want allow", r.raw)
	}
	if got := fmt.Sprint(s.eventTypes(id, 1)); got != "[tool.requested approval.requested approval.decided tool.decision]" {
		t.Fatalf("events = %s", got)
	}
	if got := s.must(200, "GET", "/v1/sessions/"+id, tok, nil)["status"]; got != "running" {
		t.Fatalf("run status = %v, want running", got)
	}
	if list := s.must(200, "GET", "/v1/approvals", adminToken, nil)["approvals"].([]any); len(list) != 0 {
		t.Fatalf("pending after decision = %v", list)
	}
	if runs := s.must(200, "GET", "/v1/sessions/"+id+"/approvals", tok, nil)["approvals"].([]any); len(runs) != 1 {
		t.Fatalf("run approvals = %v", runs)
	}
}

func TestDeniedApprovalDenies(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	apr := s.pending(id, tok, "c1", "git push")
	s.decide(apr, "denied")
	r := s.ask(id, tok, "c1", "Bash", bash("git push"))
	if r.body["decision"] != "deny" || r.body["source"] != "approval" {
		t.Fatalf("after denial = %s, want deny source approval", r.raw)
	}
	if r := s.do("POST", "/v1/approvals/"+apr+"/decision", adminToken, map[string]any{"decision": "maybe"}); r.status != 400 {
		t.Fatalf("unknown decision = %d %s, want 400", r.status, r.raw)
	}
	if r := s.do("POST", "/v1/approvals/"+apr+"/decision", tok, map[string]any{"decision": "approved_once"}); r.status != 403 && r.status != 401 {
		t.Fatalf("the runner deciding its own approval = %d, want refused", r.status)
	}
}

// TestSessionGrantScope: approving `git push` for the run covers later
// pushes with any arguments in that run, and nothing else.
func TestSessionGrantScope(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(approvalPolicy)
	id, tok := s.gateRun(pol, runOpts{budget: 1})
	other, otherTok := s.gateRun(pol, runOpts{budget: 1})
	apr := s.pending(id, tok, "c1", "git push")
	if got := s.decide(apr, "approved"); got["status"] != "approved_session" {
		t.Fatalf("approved with the rule's default scope = %v, want approved_session", got["status"])
	}
	grants := s.must(200, "GET", "/v1/sessions/"+id+"/grants", tok, nil)["grants"].([]any)
	if len(grants) != 1 || grants[0].(map[string]any)["scope_key"] != "Bash:git push" {
		t.Fatalf("grants = %v", grants)
	}
	cases := []struct {
		run, tok, cmd, want string
	}{
		{id, tok, "git push --force origin main", "allow"},
		{id, tok, "git pull", "pending"},
		{id, tok, "git push && rm -rf x", "pending"},
		{id, tok, "GIT_SSH_COMMAND=x git push", "pending"},
		{other, otherTok, "git push", "pending"},
	}
	for i, c := range cases {
		r := s.ask(c.run, c.tok, fmt.Sprintf("g%d", i), "Bash", bash(c.cmd))
		if r.body["decision"] != c.want {
			t.Errorf("%q = %s, want %s", c.cmd, r.raw, c.want)
		}
	}
	s.must(200, "DELETE", "/v1/sessions/"+id+"/grants/"+url.PathEscape("Bash:git push"), adminToken, nil)
	if r := s.ask(id, tok, "after-revoke", "Bash", bash("git push")); r.body["decision"] != "pending" {
		t.Fatalf("after revoke = %s, want pending", r.raw)
	}
	s.must(404, "DELETE", "/v1/sessions/"+id+"/grants/"+url.PathEscape("Bash:git push"), adminToken, nil)
}

// TestWaitingRunnerGetsTheDecision: a runner long-polling with the same
// tool_call_id gets the answer as soon as a human decides; a runner (or
// control plane) restarted mid-pause re-attaches to the same approval.
func TestWaitingRunnerGetsTheDecision(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	apr := s.pending(id, tok, "c1", "git push")

	// A second control plane over the same table, as after a restart.
	restarted := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: ledger.New(s.st, time.Now)})))
	defer restarted.Close()
	s2 := &stack{t: t, url: restarted.URL, st: s.st, db: s.db}

	done := make(chan response, 1)
	go func() {
		done <- s2.do("POST", "/v1/sessions/"+id+"/permission?wait_seconds=20", tok, map[string]any{"tool_call_id": "c1", "tool_name": "Bash", "input": bash("git push")})
	}()
	time.Sleep(300 * time.Millisecond)
	s.decide(apr, "approved_once")
	select {
	case r := <-done:
		if r.body["decision"] != "allow" || r.body["approval_id"] != apr {
			t.Fatalf("waiting runner got %s, want allow for %s", r.raw, apr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting runner did not get the decision")
	}
	if got := fmt.Sprint(s.eventTypes(id, 1)); got != "[tool.requested approval.requested approval.decided tool.decision]" {
		t.Fatalf("events = %s, want no duplicate", got)
	}
	if n := len(s.must(200, "GET", "/v1/sessions/"+id+"/approvals", adminToken, nil)["approvals"].([]any)); n != 1 {
		t.Fatalf("approvals = %d, want 1", n)
	}
}

// TestExpiryDenies: an approval nobody decides expires to deny, by the
// in-process timer without any read, and a decision afterwards is refused.
func TestExpiryDenies(t *testing.T) {
	t.Parallel()
	st, db := roleStore(t)
	led := ledger.New(st, time.Now)
	timers := approval.NewTimers(approval.NewService(led, time.Now), nil)
	defer timers.Stop()
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, Scheduler: timers})))
	defer srv.Close()
	s := &stack{t: t, url: srv.URL, st: st, db: db, led: led}
	id, tok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	apr := s.pending(id, tok, "c1", "rm build.log") // ttl 1 s

	deadline := time.Now().Add(10 * time.Second)
	for fmt.Sprint(s.eventTypes(id, 3)) != "[approval.decided tool.decision]" {
		if time.Now().After(deadline) {
			t.Fatalf("no expiry after 10 s; events %v", s.eventTypes(id, 0))
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := s.ask(id, tok, "c1", "Bash", bash("rm build.log"))
	if r.body["decision"] != "deny" || r.body["source"] != "approval_expired" {
		t.Fatalf("after expiry = %s, want deny approval_expired", r.raw)
	}
	if got := s.decide(apr, "approved_once"); got["applied"] != false || got["status"] != "expired" {
		t.Fatalf("decision after expiry = %v, want applied false, expired", got)
	}
}

// TestLazyExpiry: with no timer at all, reading an overdue approval
// expires it (and so does re-asking).
func TestLazyExpiry(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	apr := s.pending(id, tok, "c1", "rm x")
	time.Sleep(1200 * time.Millisecond)
	if got := s.must(200, "GET", "/v1/approvals/"+apr, adminToken, nil); got["status"] != "expired" || got["decided_by"] != approval.ExpiredBy {
		t.Fatalf("overdue approval read = %v, want expired", got)
	}
	if r := s.ask(id, tok, "c1", "Bash", bash("rm x")); r.body["source"] != "approval_expired" {
		t.Fatalf("re-ask = %s", r.raw)
	}
	if got := fmt.Sprint(s.eventTypes(id, 1)); got != "[tool.requested approval.requested approval.decided tool.decision]" {
		t.Fatalf("events = %s", got)
	}
}

// TestFailedDecisionDecidesNothing: a decision whose transaction fails
// leaves the approval pending and the ledger untouched; a retry succeeds.
func TestFailedDecisionDecidesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	apr := s.pending(id, tok, "c1", "git push")
	before := s.eventTypes(id, 0)
	s.db.Server.EmulateFailureForTable(s.st.Table(), server.FailureConditionInternalServerError)
	r := s.do("POST", "/v1/approvals/"+apr+"/decision", adminToken, map[string]any{"decision": "approved_once"})
	s.db.Server.EmulateFailureForTable(s.st.Table(), server.FailureConditionNone)
	if r.status < 500 {
		t.Fatalf("decision with DynamoDB failing = %d %s, want 5xx", r.status, r.raw)
	}
	if got := s.must(200, "GET", "/v1/approvals/"+apr, adminToken, nil)["status"]; got != "pending" {
		t.Fatalf("after failed decision status = %v, want pending", got)
	}
	if after := s.eventTypes(id, 0); len(after) != len(before) {
		t.Fatalf("events after failed decision = %v, want %v", after, before)
	}
	if got := s.decide(apr, "approved_once"); got["applied"] != true {
		t.Fatalf("retry = %v, want applied", got)
	}
}

type decideOutput struct {
	applied bool
	status  string
}

// approvalModel is a pending approval as a one-shot register: the first
// decision settles it, every later one observes the settled status.
var approvalModel = porcupine.Model{
	Init: func() any { return "pending" },
	Step: func(state, input, output any) (bool, any) {
		st, to, out := state.(string), input.(string), output.(decideOutput)
		if st == "pending" {
			return out.applied && out.status == to, to
		}
		return !out.applied && out.status == st, st
	},
}

// TestConcurrentDecisions: 50 reviewers deciding one approval at once:
// exactly one wins and emits, everyone sees the settled state, and the
// recorded history is linearizable.
func TestConcurrentDecisions(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	apr := s.pending(id, tok, "c1", "git push")
	decisions := []string{"approved_once", "approved_session", "denied"}
	start := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := decisions[i%len(decisions)]
			call := time.Since(start).Nanoseconds()
			r := s.do("POST", "/v1/approvals/"+apr+"/decision", adminToken, map[string]any{"decision": d})
			ret := time.Since(start).Nanoseconds()
			out := decideOutput{applied: r.body["applied"] == true, status: str(r.body["status"])}
			mu.Lock()
			history = append(history, porcupine.Operation{ClientId: i, Input: d, Call: call, Output: out, Return: ret})
			mu.Unlock()
		}()
	}
	wg.Wait()
	applied := 0
	for _, op := range history {
		if op.Output.(decideOutput).applied {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("applied decisions = %d, want exactly 1", applied)
	}
	if !porcupine.CheckOperations(approvalModel, history) {
		t.Fatal("the decision history is not linearizable")
	}
	evs := s.must(200, "GET", "/v1/sessions/"+id+"/events", adminToken, nil)["events"].([]any)
	counts := map[string]int{}
	for i, e := range evs {
		m := e.(map[string]any)
		if m["seq"] != float64(i+1) {
			t.Fatalf("seq gap at %d: %v", i, m["seq"])
		}
		counts[m["type"].(string)]++
	}
	if counts["approval.decided"] != 1 || counts["tool.decision"] != 1 {
		t.Fatalf("event counts = %v, want one approval.decided and one tool.decision", counts)
	}
}

// TestDenyReasonIsKept: a deny's reason is recorded on the approval, shown
// by GET, and given to the runner with its answer; the ledger, which holds
// no free text, does not carry it.
func TestDenyReasonIsKept(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(approvalPolicy), runOpts{budget: 1})
	apr := s.pending(id, tok, "c1", "git push origin main")
	const why = "pushes to main need a review first CANARY-REASON-7"
	got := s.must(200, "POST", "/v1/approvals/"+apr+"/decision", adminToken, map[string]any{"decision": "denied", "reason": why})
	if got["applied"] != true || got["reason"] != why {
		t.Fatalf("decision = %v, want applied with the reason", got)
	}
	if a := s.must(200, "GET", "/v1/approvals/"+apr, adminToken, nil); a["reason"] != why || a["status"] != "denied" {
		t.Fatalf("GET approval = %v, want the reason kept", a)
	}
	r := s.ask(id, tok, "c1", "Bash", bash("git push origin main"))
	if r.body["decision"] != "deny" || r.body["reason"] != "a human denied this call: "+why {
		t.Fatalf("re-ask after deny = %s, want the reviewer's reason", r.raw)
	}
	events := 0
	for _, it := range s.items() {
		// A ledger event, numbered or not yet (Q#).
		if strings.Contains(it["sk"], `"EV#`) || strings.Contains(it["sk"], `"Q#`) {
			events++
			if strings.Contains(fmt.Sprint(it), "CANARY-REASON-7") {
				t.Errorf("ledger event %v carries the reviewer's reason", it)
			}
		}
	}
	if events < 4 {
		t.Errorf("found %d ledger events, want the run's (at least 4)", events)
	}
	long := strings.Repeat("x", approval.MaxReason+1)
	apr2 := s.pending(id, tok, "c2", "git push origin dev")
	if r := s.do("POST", "/v1/approvals/"+apr2+"/decision", adminToken, map[string]any{"decision": "denied", "reason": long}); r.status != 400 {
		t.Errorf("deny with a %d-character reason = %d %s, want 400", len(long), r.status, r.raw)
	}
}
