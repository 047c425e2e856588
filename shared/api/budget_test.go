package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/store"
)

// haiku is priced at $1 input / $5 output / $0.10 cache read / $1.25 cache
// write per million tokens: 10,000 output tokens reserve exactly $0.05.
const haiku = "claude-haiku-4-5"

func admissionBody(reqID string, maxOut, inBound int64) map[string]any {
	return map[string]any{"request_id": reqID, "model": haiku, "max_output_tokens": maxOut, "input_tokens_upper_bound": inBound}
}

// ledgerEvent is one event as GET .../events shows it.
type ledgerEvent struct {
	Seq  int64           `json:"seq"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

func (s *stack) ledger(id string) []ledgerEvent {
	s.t.Helper()
	r := s.do("GET", "/v1/sessions/"+id+"/events?after=0&limit=1000", adminToken, nil)
	if r.status != 200 {
		s.t.Fatalf("events of %s = %d %s", id, r.status, r.raw)
	}
	var out struct{ Events []ledgerEvent }
	if err := json.Unmarshal(r.raw, &out); err != nil {
		s.t.Fatal(err)
	}
	for i, e := range out.Events {
		if e.Seq != int64(i+1) {
			s.t.Fatalf("events of %s: seq %d at position %d: the ledger has a gap", id, e.Seq, i)
		}
	}
	return out.Events
}

func (s *stack) head(id string) store.Head {
	s.t.Helper()
	h, err := s.st.GetHead(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return h
}

func checkBudgetInvariant(t *testing.T, h store.Head) {
	t.Helper()
	if h.BudgetLimit-h.BudgetReserved-h.BudgetSpent != h.BudgetAvailable {
		t.Errorf("head budget: limit %d - reserved %d - spent %d != available %d", h.BudgetLimit, h.BudgetReserved, h.BudgetSpent, h.BudgetAvailable)
	}
}

func reconciled(t *testing.T, e ledgerEvent) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAdmissionsConcurrent: 100 concurrent admissions of $0.05 on a $1.00
// run admit exactly 20; the rest get 402 and write nothing.
func TestAdmissionsConcurrent(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(basicPolicy), runOpts{budget: 1})

	const n = 100
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			statuses[i] = s.do("POST", "/v1/sessions/"+id+"/admissions", tok, admissionBody(fmt.Sprintf("req-%03d", i), 10_000, 0)).status
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, st := range statuses {
		count[st]++
	}
	if count[201] != 20 || count[402] != 80 {
		t.Fatalf("statuses = %v, want 20 x 201 and 80 x 402", count)
	}

	h := s.head(id)
	checkBudgetInvariant(t, h)
	if h.BudgetAvailable != 0 || h.BudgetReserved != 1_000_000 || h.BudgetSpent != 0 {
		t.Errorf("head: available %d reserved %d spent %d, want 0 / 1000000 / 0", h.BudgetAvailable, h.BudgetReserved, h.BudgetSpent)
	}
	res, err := s.st.RunReservations(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, r := range res {
		if r.Amount != 50_000 || r.Status != store.ReservationOpen {
			t.Errorf("reservation %s: amount %d status %s, want 50000 open", r.RequestID, r.Amount, r.Status)
		}
		sum += r.Amount
	}
	if len(res) != 20 || sum != h.BudgetLimit {
		t.Errorf("%d reservations summing to %d, want 20 summing to the limit %d", len(res), sum, h.BudgetLimit)
	}
	// Replay the ledger: available never went below zero from admissions.
	avail := h.BudgetLimit
	reserved := 0
	for _, e := range s.ledger(id) {
		if e.Type != "budget.reserved" {
			continue
		}
		reserved++
		var ev struct {
			ReservedMicros int64 `json:"reserved_micros"`
		}
		_ = json.Unmarshal(e.Data, &ev)
		if avail -= ev.ReservedMicros; avail < 0 {
			t.Errorf("seq %d: available %d after admission", e.Seq, avail)
		}
	}
	if reserved != 20 {
		t.Errorf("%d budget.reserved events, want 20", reserved)
	}
	// The gate now denies: available is 0.
	if r := s.ask(id, tok, "after-exhaustion", "Bash", bash("git status")); r.body["source"] != "budget" {
		t.Errorf("permission after exhaustion = %s, want deny source budget", r.raw)
	}
}

func TestAdmissionIdempotentAndValidated(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(basicPolicy), runOpts{budget: 1})
	path := "/v1/sessions/" + id + "/admissions"

	first := s.must(201, "POST", path, tok, admissionBody("req-a", 1000, 2000))
	// 1000 x $5 + 2000 x max($1, $1.25, $2 for 1-hour writes) per MTok = 5000 + 4000 micros.
	if first["reserved_usd"] != 0.009 || first["reservation_id"] == nil {
		t.Fatalf("admission = %v, want reserved_usd 0.009 and an id", first)
	}
	again := s.must(200, "POST", path, tok, admissionBody("req-a", 1000, 2000))
	if again["reservation_id"] != first["reservation_id"] || again["reserved_usd"] != first["reserved_usd"] {
		t.Errorf("replay = %v, want the same reservation as %v", again, first)
	}
	if r := s.do("POST", path, tok, admissionBody("req-a", 1001, 2000)); r.status != 409 {
		t.Errorf("same request_id, other bounds = %d %s, want 409", r.status, r.raw)
	}
	if got := s.ledger(id); len(got) != 2 || got[1].Type != "budget.reserved" {
		t.Errorf("ledger = %v, want session.created + one budget.reserved", got)
	}
	if h := s.head(id); h.BudgetReserved != 9000 {
		t.Errorf("reserved = %d, want 9000 (booked once)", h.BudgetReserved)
	}

	for _, c := range []struct {
		name string
		body any
		want int
		code string
	}{
		{"unknown model", map[string]any{"request_id": "r1", "model": "claude-imaginary-9", "max_output_tokens": 1, "input_tokens_upper_bound": 1}, 400, "invalid_request"},
		{"negative", admissionBody("r2", -1, 0), 400, "invalid_request"},
		{"unknown field", `{"request_id":"r3","model":"claude-haiku-4-5","max_output_tokens":1,"input_tokens_upper_bound":1,"x":1}`, 400, "invalid_request"},
		{"empty request id", admissionBody("", 1, 1), 400, "invalid_request"},
		{"does not fit", admissionBody("r4", 1_000_000, 0), 402, "budget_exhausted"},
	} {
		r := s.do("POST", path, tok, c.body)
		if r.status != c.want || r.body["error"].(map[string]any)["code"] != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.raw, c.want, c.code)
		}
	}
	// Another run's token may not admit here.
	_, other := s.gateRun(s.policy(basicPolicy), runOpts{budget: 1})
	if r := s.do("POST", path, other, admissionBody("r5", 1, 1)); r.status != 403 {
		t.Errorf("other run's token = %d, want 403", r.status)
	}
	if got := s.ledger(id); len(got) != 2 {
		t.Errorf("refused admissions appended %d events", len(got)-2)
	}
}

// TestUsageBookedOnce: usage posted three times books the cost once; a cost
// above the reservation is booked anyway, taking available below zero.
func TestUsageBookedOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(basicPolicy), runOpts{budget: 0.01})
	s.must(201, "POST", "/v1/sessions/"+id+"/admissions", tok, admissionBody("req-1", 100, 100))
	usage := map[string]any{"input_tokens": 1000, "output_tokens": 2000, "cache_read_input_tokens": 5000, "cache_creation_input_tokens": 400}
	// 1000 x 1 + 2000 x 5 + 5000 x 0.1 + 400 x 1.25 = 12,000 micros: over the $0.01 limit.
	const cost = 12_000
	for i := range 3 {
		out := s.must(200, "POST", "/v1/sessions/"+id+"/admissions/req-1/usage", s.runner(id), usage)
		if out["cost_usd"] != 0.012 || out["reconciled"] != true {
			t.Errorf("usage #%d = %v, want cost_usd 0.012 reconciled true", i+1, out)
		}
	}
	h := s.head(id)
	checkBudgetInvariant(t, h)
	if h.BudgetSpent != cost || h.BudgetReserved != 0 || h.BudgetAvailable != 10_000-cost {
		t.Errorf("head: spent %d reserved %d available %d, want %d / 0 / %d", h.BudgetSpent, h.BudgetReserved, h.BudgetAvailable, cost, 10_000-cost)
	}
	evs := s.ledger(id)
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if fmt.Sprint(types) != "[session.created budget.reserved budget.reconciled]" {
		t.Fatalf("ledger = %v", types)
	}
	got := reconciled(t, evs[2])
	want := map[string]any{"input_tokens": 1000.0, "output_tokens": 2000.0, "cache_read_input_tokens": 5000.0,
		"cache_creation_input_tokens": 400.0, "cost_micros": float64(cost), "settlement": "usage"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("budget.reconciled %s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != 8 { // the two ids, four counts, cost and settlement: nothing else
		t.Errorf("budget.reconciled carries %v", got)
	}
	if r := s.do("POST", "/v1/sessions/"+id+"/admissions/nope/usage", s.runner(id), usage); r.status != 404 {
		t.Errorf("usage of an unknown request = %d, want 404", r.status)
	}
	if r := s.do("POST", "/v1/sessions/"+id+"/admissions/req-1/usage", s.runner(id), map[string]any{"input_tokens": 1}); r.status != 400 {
		t.Errorf("usage without output_tokens = %d, want 400", r.status)
	}
	// available < 0: the gate denies, and a further admission is refused.
	if r := s.do("POST", "/v1/sessions/"+id+"/admissions", tok, admissionBody("req-2", 0, 0)); r.status != 402 {
		t.Errorf("admission on an overdrawn run = %d, want 402", r.status)
	}
}

// TestBudgetExhaustedStopsTheGate: once the budget is gone the next
// permission request is denied by stage 1, and its ledger entries show that
// no other stage ran: no approval was requested, no other source decided.
func TestBudgetExhaustedStopsTheGate(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	// basicPolicy would ask a human for this call (default require_approval).
	id, tok := s.gateRun(s.policy(basicPolicy), runOpts{budget: 0.05})
	s.must(201, "POST", "/v1/sessions/"+id+"/admissions", tok, admissionBody("req-1", 10_000, 0))
	before := len(s.ledger(id))
	r := s.ask(id, tok, "call-1", "Write", map[string]any{"file_path": "/tmp/x", "content": "hi"})
	if r.status != 200 || r.body["decision"] != "deny" || r.body["source"] != "budget" {
		t.Fatalf("permission = %d %s, want deny source budget", r.status, r.raw)
	}
	evs := s.ledger(id)[before:]
	if len(evs) != 2 || evs[0].Type != "tool.requested" || evs[1].Type != "tool.decision" {
		t.Fatalf("call's ledger entries = %v, want tool.requested + tool.decision only", evs)
	}
	d := reconciled(t, evs[1])
	if d["source"] != "budget" || d["decision"] != "deny" || d["rule_id"] != nil || d["approval_id"] != nil || d["verdict"] != nil {
		t.Errorf("tool.decision = %v, want deny source budget and nothing from a later stage", d)
	}
	for _, it := range s.items() {
		if sk := it["sk"]; len(sk) > 6 && sk[:6] == `{"S":"` && (sk[6:10] == "APR#" || sk[6:12] == "GRANT#") {
			t.Errorf("stored %s: a later stage ran", sk)
		}
	}
}

// TestSweepSettlesStaleReservations: the sweep settles open reservations
// older than its horizon at their full amount, once, with an event; a late
// usage report then changes nothing.
func TestSweepSettlesStaleReservations(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	id, tok := s.gateRun(s.policy(basicPolicy), runOpts{budget: 1})
	s.must(201, "POST", "/v1/sessions/"+id+"/admissions", tok, admissionBody("stale", 10_000, 0))
	s.must(201, "POST", "/v1/sessions/"+id+"/admissions", tok, admissionBody("settled", 10_000, 0))
	s.must(200, "POST", "/v1/sessions/"+id+"/admissions/settled/usage", s.runner(id), map[string]any{"input_tokens": 10, "output_tokens": 10})

	svc := admission.New(s.led, nil, time.Now)
	if n, err := svc.SweepReservations(context.Background(), time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep of reservations older than an hour = %d, %v; want 0", n, err)
	}
	n, err := svc.SweepReservations(context.Background(), time.Now().Add(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want 1", n, err)
	}
	if n, err := svc.SweepReservations(context.Background(), time.Now().Add(time.Second)); err != nil || n != 0 {
		t.Fatalf("second sweep = %d, %v; want 0", n, err)
	}
	evs := s.ledger(id)
	last := evs[len(evs)-1]
	got := reconciled(t, last)
	if last.Type != "budget.reconciled" || got["request_id"] != "stale" || got["settlement"] != "swept" || got["cost_micros"] != 50_000.0 {
		t.Errorf("last event = %s %v, want budget.reconciled of stale, swept, 50000", last.Type, got)
	}
	out := s.must(200, "POST", "/v1/sessions/"+id+"/admissions/stale/usage", s.runner(id), map[string]any{"input_tokens": 1, "output_tokens": 1})
	if out["cost_usd"] != 0.05 || out["settlement"] != "swept" {
		t.Errorf("late usage = %v, want the swept cost 0.05", out)
	}
	if len(s.ledger(id)) != len(evs) {
		t.Error("late usage appended an event")
	}
	h := s.head(id)
	checkBudgetInvariant(t, h)
	wantSpent, _ := budget.Cost(budget.Price{InputPerMTok: 1_000_000, OutputPerMTok: 5_000_000}, budget.Usage{InputTokens: 10, OutputTokens: 10})
	if h.BudgetReserved != 0 || h.BudgetSpent != 50_000+int64(wantSpent) {
		t.Errorf("head: reserved %d spent %d, want 0 and %d", h.BudgetReserved, h.BudgetSpent, 50_000+int64(wantSpent))
	}
}
