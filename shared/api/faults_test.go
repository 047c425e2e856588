package api_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
)

// recording matches a transaction that records one of a run's events: it
// writes the event unsequenced (Q#...), whatever else it writes. The
// stacks of these tests number events only when they are read, so no
// sequencer's transaction (which deletes such items) runs in between.
func recording(runID string) func(pk, sk string) bool {
	return func(pk, sk string) bool { return pk == "RUN#"+runID && strings.HasPrefix(sk, "Q#") }
}

// TestSingleFaultOnEveryAppend: each kind of append a run makes (a
// decision, an approval asked for and decided, the re-ask it answers, an
// admission, its reconcile, the end) is cancelled once, by DynamoDB's
// TransactionConflict or throttling, exactly where it writes its event.
// Each still answers as it does without the fault, and the ledger and
// budget end exactly as a fault-free twin run's: no lost record, no
// duplicate, no over-charge.
func TestSingleFaultOnEveryAppend(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	testenv.Calm(t, s.db) // each fault is placed by hand
	pol := s.policy(gatePolicy)
	type step struct {
		name string
		do   func(id, tok string, apr *string)
	}
	steps := []step{
		{"decision", func(id, tok string, _ *string) {
			if r := s.ask(id, tok, "c1", "Bash", bash("git status")); r.body["decision"] != "allow" {
				t.Fatalf("allow = %d %s", r.status, r.raw)
			}
		}},
		{"approval requested", func(id, tok string, apr *string) { *apr = s.pending(id, tok, "c2", "rm -rf build") }},
		{"approval decided", func(_, _ string, apr *string) {
			if out := s.decide(*apr, "approved_once"); out["status"] != "approved_once" {
				t.Fatalf("decide = %v", out)
			}
		}},
		{"re-ask", func(id, tok string, _ *string) {
			if r := s.ask(id, tok, "c2", "Bash", bash("rm -rf build")); r.body["decision"] != "allow" {
				t.Fatalf("re-ask = %d %s", r.status, r.raw)
			}
		}},
		{"admission", func(id, tok string, _ *string) {
			s.must(201, "POST", "/v1/sessions/"+id+"/admissions", tok, admissionBody("req-1", 1000, 1000))
		}},
		{"reconcile", func(id, _ string, _ *string) {
			s.must(200, "POST", "/v1/sessions/"+id+"/admissions/req-1/usage", s.runner(id), map[string]any{"input_tokens": 100, "output_tokens": 200})
		}},
		{"end", func(id, _ string, _ *string) { s.must(200, "POST", "/v1/sessions/"+id+"/end", adminToken, nil) }},
	}
	types := func(evs []ledgerEvent) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return out
	}

	// The twin: the same steps without faults.
	twin, twinTok := s.gateRun(pol, runOpts{budget: 1})
	var twinApr string
	var want [][]string
	for _, st := range steps {
		st.do(twin, twinTok, &twinApr)
		want = append(want, types(s.ledger(twin)))
	}

	id, tok := s.gateRun(pol, runOpts{budget: 1})
	var apr string
	kinds := []ddbchaos.Kind{ddbchaos.Conflict, ddbchaos.ThrottleCancel}
	for i, st := range steps {
		before := len(s.ledger(id))
		in := s.db.Layer.Inject(ddbchaos.Fault{Op: "TransactWriteItems", Match: recording(id), Kind: kinds[i%2]})
		st.do(id, tok, &apr)
		got := types(s.ledger(id))
		if !slices.Equal(got, want[i]) {
			t.Errorf("%s under %s: events %v, want %v", st.name, kinds[i%2], got, want[i])
		}
		if appended := len(want[i]) > before; appended && in.Fired() != 1 {
			t.Errorf("%s: the fault on its append fired %d times", st.name, in.Fired())
		}
		s.db.Layer.ClearFaults() // a step that appends nothing leaves its fault armed
	}
	h, w := s.head(id), s.head(twin)
	checkBudgetInvariant(t, h)
	if h.BudgetSpent != w.BudgetSpent || h.BudgetReserved != w.BudgetReserved || h.Status != w.Status || h.PendingApprovals != w.PendingApprovals {
		t.Errorf("head under faults: spent %d reserved %d status %s pending %d; twin: %d %d %s %d",
			h.BudgetSpent, h.BudgetReserved, h.Status, h.PendingApprovals, w.BudgetSpent, w.BudgetReserved, w.Status, w.PendingApprovals)
	}
}

// TestSingleFaultOnBrokeredCall: the brokered call's two appends (the
// decision with the execution's claim, tool.brokered with the outcome)
// each meet one fault (a cancelled transaction); the call runs once,
// answers its result, and the ledger has its tool.brokered. It makes no
// single-item write to the run: a fault armed for one never fires.
func TestSingleFaultOnBrokeredCall(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, canary)
	s := newBrokerStack(t, localSealer(t), 0)
	testenv.Calm(t, s.db)
	pol := s.policy(brokerPolicy)
	con := s.connection("jira", up.url(), "shared", canary)
	s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
	id, tok := s.brokeredRun(pol, con, "")

	// The decision's transaction: a fence check, two events, the call
	// record (claimed); the brokered record's: a fence check, one event,
	// the record's update (the outcome).
	decision := s.db.Layer.Inject(ddbchaos.Fault{Op: "TransactWriteItems", Match: recording(id), Actions: 4, Kind: ddbchaos.Conflict})
	single := s.db.Layer.Inject(ddbchaos.Fault{Op: "UpdateItem", Match: ddbchaos.KeyHas("RUN#" + id), Kind: ddbchaos.ItemConflict})
	brokered := s.db.Layer.Inject(ddbchaos.Fault{Op: "TransactWriteItems", Match: recording(id), Actions: 3, Kind: ddbchaos.ThrottleCancel})
	r := s.toolsCall(id, tok, "b1", "mcp__jira__echo", map[string]any{"text": "hello"})
	if r.status != 200 || r.body["decision"] != "allow" || resultText(t, r) != "hello" {
		t.Fatalf("call = %d %s", r.status, r.raw)
	}
	if decision.Fired() != 1 || brokered.Fired() != 1 || single.Fired() != 0 {
		t.Errorf("faults fired: decision %d, brokered %d, single-item %d; want 1, 1, 0", decision.Fired(), brokered.Fired(), single.Fired())
	}
	s.db.Layer.ClearFaults()
	if got := s.eventTypes(id, 1); !slices.Equal(got, []string{"tool.requested", "tool.decision", "tool.brokered"}) {
		t.Errorf("events = %v", got)
	}
	if n := up.calls.Load(); n != 1 {
		t.Errorf("upstream ran the tool %d times", n)
	}
}
