package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

func envelope(t testing.TB, ev redact.Event) redact.Envelope {
	t.Helper()
	e, err := redact.New(ev)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// decide appends a decision of call id the way the gate does: allow on a
// running head, deny (source session) on an ended one, the call record
// put new. It returns what it recorded.
func decide(t testing.TB, l *ledger.Ledger, st *store.Store, runID, id string) (vocab.Decision, error) {
	var decision vocab.Decision
	_, err := l.Append(context.Background(), runID, func(h store.Head) (store.Batch, error) {
		decision = vocab.Allow
		if h.Status == vocab.Ended {
			decision = vocab.Deny
		}
		rec, err := st.PutNew(store.CallKey(runID, id), store.Call{ToolCallID: id, ToolName: "Bash", Decision: decision}, errors.New("recorded"))
		if err != nil {
			return store.Batch{}, err
		}
		return store.Batch{Events: []redact.Envelope{
			envelope(t, redact.ToolRequested{ToolCallID: id, ToolName: "Bash"}),
			envelope(t, redact.ToolDecision{ToolCallID: id, ToolName: "Bash", Decision: decision}),
		}, Ops: []store.Op{rec}}, nil
	})
	return decision, err
}

func end(t testing.TB, l *ledger.Ledger, runID string) error {
	_, err := l.Append(context.Background(), runID, func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{envelope(t, redact.SessionEnded{EndedBy: "admin"})}, Head: store.HeadChange{Status: vocab.Ended}}, nil
	})
	return err
}

type readEvent struct {
	store.Event
	call, decision string
}

// timeline reads a run's whole ledger (numbering what is pending) and
// fails t on a gap or a duplicate.
func timeline(t *testing.T, l *ledger.Ledger, runID string) []readEvent {
	t.Helper()
	evs, last, err := l.Read(context.Background(), runID, 0, 10000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evs)) != last {
		t.Fatalf("read %d events, last seq %d", len(evs), last)
	}
	out := make([]readEvent, len(evs))
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at position %d: a gap or a duplicate", e.Seq, i)
		}
		var d struct {
			ToolCallID string `json:"tool_call_id"`
			Decision   string `json:"decision"`
		}
		_ = json.Unmarshal([]byte(e.Data), &d)
		out[i] = readEvent{e, d.ToolCallID, d.Decision}
	}
	return out
}

// TestParallelDecisionsFencedByEnd: 32 callers over eight ledgers (as
// eight Lambda instances) decide in one run under DynamoDB's timing model
// (transactions take 20 ms, holding their items for 18), while the run is
// ended midway. No decision fails; the ledger is gapless with each call
// once and its two events adjacent in order; no decision that began
// after the end returned is an allow; and every allow is numbered before
// session.ended, every deny after it.
func TestParallelDecisionsFencedByEnd(t *testing.T) {
	t.Parallel()
	st, db := testenv.StoreOn(t)
	newRun(t, st, "ses_par")
	db.Layer.SetChaos(ddbchaos.Chaos{Latency: 20 * time.Millisecond, Hold: 18 * time.Millisecond})
	ledgers := make([]*ledger.Ledger, 8)
	for i := range ledgers {
		ledgers[i] = ledger.New(st, time.Now)
	}
	const callers, each = 32, 6
	decideAroundEnd(t, st, ledgers, callers, each)
	db.Layer.SetChaos(ddbchaos.Chaos{})

	evs := timeline(t, ledgers[1], "ses_par")
	if want := 1 + 1 + 2*callers*each; len(evs) != want {
		t.Fatalf("%d events, want %d", len(evs), want)
	}
	endAt := checkRequestsPaired(t, evs)
	checkFencedByEnd(t, evs, endAt)
	st2 := db.Layer.Stats()
	t.Logf("%d requests, %d cancelled on held items", st2.Requests, st2.Conflicts)
}

// decideAroundEnd runs callers over ledgers, each deciding each calls of
// ses_par; the end falls in the middle by construction, not by a clock: it
// waits for a callers' worth of answers, and each caller's last decision
// waits for the end (however slow the machine or the chaos). A decision
// begun after the end returned must be a deny.
func decideAroundEnd(t *testing.T, st *store.Store, ledgers []*ledger.Ledger, callers, each int) {
	var ended atomic.Bool
	var answered atomic.Int64
	var wg sync.WaitGroup
	waitFor := func(cond func() bool) {
		for deadline := time.Now().Add(60 * time.Second); !cond() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	for c := range callers {
		wg.Go(func() {
			l := ledgers[c%len(ledgers)]
			for i := range each {
				if i == each-1 {
					waitFor(ended.Load)
				}
				after := ended.Load()
				id := fmt.Sprintf("c%02d-%d", c, i)
				got, err := decide(t, l, st, "ses_par", id)
				if err != nil {
					t.Errorf("decide %s: %v", id, err)
					return
				}
				answered.Add(1)
				if after && got != "deny" {
					t.Errorf("%s began after the end returned and was answered %s", id, got)
				}
			}
		})
	}
	wg.Go(func() {
		waitFor(func() bool { return answered.Load() >= int64(callers) })
		if err := end(t, ledgers[0], "ses_par"); err != nil {
			t.Errorf("end: %v", err)
		}
		ended.Store(true)
	})
	wg.Wait()
}

// checkRequestsPaired: each call is requested once, its decision right
// after; it returns the index of session.ended.
func checkRequestsPaired(t *testing.T, evs []readEvent) int {
	t.Helper()
	endAt := -1
	seen := map[string]bool{}
	for i, e := range evs {
		switch e.Type {
		case "session.ended":
			endAt = i
		case "tool.requested":
			if seen[e.call] {
				t.Errorf("%s requested twice", e.call)
			}
			seen[e.call] = true
			if i+1 >= len(evs) || evs[i+1].Type != "tool.decision" || evs[i+1].call != e.call {
				t.Errorf("%s: its decision does not follow its request", e.call)
			}
		}
	}
	if endAt < 0 {
		t.Fatal("no session.ended")
	}
	return endAt
}

// checkFencedByEnd: every allow is before the end, every deny after it,
// and there are some of each.
func checkFencedByEnd(t *testing.T, evs []readEvent, endAt int) {
	t.Helper()
	allows, denies := 0, 0
	for i, e := range evs {
		if e.Type != "tool.decision" {
			continue
		}
		switch {
		case e.decision == "allow" && i < endAt:
			allows++
		case e.decision == "deny" && i > endAt:
			denies++
		default:
			t.Errorf("%s %s at %d, session.ended at %d", e.call, e.decision, i+1, endAt+1)
		}
	}
	if allows == 0 || denies == 0 {
		t.Errorf("%d allows before the end, %d denies after: the end did not fall in the middle", allows, denies)
	}
}

// TestUnfinishedFenceIsFinished: an end whose writer died after its
// transaction and before raising the fence shards (modelled by the
// store's Append alone) is finished by the next decision that reads the
// head, which is then denied; a process still holding the old head is
// denied too once the fence stands, and the sequencer numbers the end
// after whatever was decided before it was finished.
func TestUnfinishedFenceIsFinished(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	newRun(t, st, "ses_half")
	// stale trusts the head it read for as long as the test takes: the
	// decision it makes after the end must be made on that old head, however
	// slow the machine (with the default second, a loaded one re-read it).
	stale := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead, ledger.TrustHeadFor(time.Hour))
	if got, err := decide(t, stale, st, "ses_half", "before"); err != nil || got != "allow" {
		t.Fatalf("first decision = %s, %v", got, err)
	}
	h, err := st.GetHead(context.Background(), "ses_half")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), h, store.FormatTime(time.Now()), store.Batch{
		Events: []redact.Envelope{envelope(t, redact.SessionEnded{EndedBy: "admin"})},
		Head:   store.HeadChange{Status: vocab.Ended},
	}); err != nil {
		t.Fatal(err)
	}
	// Not finished: the stale process's decision is made on the old
	// generation and still commits, ordered before the end.
	if got, err := decide(t, stale, st, "ses_half", "racing"); err != nil || got != "allow" {
		t.Fatalf("decision before the end is finished = %s, %v; want allow", got, err)
	}
	fresh := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead)
	if got, err := decide(t, fresh, st, "ses_half", "after"); err != nil || got != "deny" {
		t.Fatalf("decision by a process that reads the head = %s, %v; want deny", got, err)
	}
	if h, _ := st.GetHead(context.Background(), "ses_half"); h.FencedGen != h.FenceGen || h.FenceGen != 1 {
		t.Fatalf("fence %d/%d after the next decision, want 1/1", h.FencedGen, h.FenceGen)
	}
	if got, err := decide(t, stale, st, "ses_half", "stale"); err != nil || got != "deny" {
		t.Fatalf("decision on the stale head once the fence stands = %s, %v; want deny", got, err)
	}
	var order []string
	for _, e := range timeline(t, fresh, "ses_half") {
		if e.Type == "tool.decision" || e.Type == "session.ended" {
			order = append(order, e.Type+" "+e.call+" "+e.decision)
		}
	}
	want := []string{"tool.decision before allow", "tool.decision racing allow", "session.ended  ", "tool.decision after deny", "tool.decision stale deny"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("order = %q, want %q", order, want)
	}
}

// TestBackgroundSequencing: without any read, a ledger numbers what it
// appended by itself, shortly after (bounded wait, not a timing claim).
func TestBackgroundSequencing(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	newRun(t, st, "ses_bg")
	l := ledger.New(st, time.Now)
	for i := range 5 {
		if _, err := decide(t, l, st, "ses_bg", fmt.Sprintf("c%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs, err := st.Events(context.Background(), "ses_bg", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 11 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events numbered 5 s after the appends, want 11", len(evs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBackgroundSequencingRetries: a background round that fails (the
// numbering transaction answered 500 through all of the SDK's retries)
// is gone round again later, so the run's last appends are numbered
// though nothing appends or reads after them.
func TestBackgroundSequencingRetries(t *testing.T) {
	t.Parallel()
	st, db := testenv.StoreOn(t)
	newRun(t, st, "ses_bgr")
	numbering := db.Layer.Inject(ddbchaos.Fault{Op: "TransactWriteItems", Match: func(_, sk string) bool { return sk == "HEAD" }, Kind: ddbchaos.Internal, Times: 5})
	l := ledger.New(st, time.Now)
	if _, err := decide(t, l, st, "ses_bgr", "c1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := st.Events(context.Background(), "ses_bgr", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d events numbered 10 s after the append, want 3 (the failed round was not gone again)", len(evs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if numbering.Fired() != 5 {
		t.Errorf("the numbering fault fired %d times, want 5 (one round failed whole)", numbering.Fired())
	}
}

// TestCachedHeadAges: what fences do not cover (a run's count of pending
// approvals, changed by another instance) reaches a decision once the
// head it cached is older than the ledger trusts.
func TestCachedHeadAges(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	newRun(t, st, "ses_age")
	a := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead, ledger.TrustHeadFor(50*time.Millisecond))
	b := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead)
	pendingSeen := func() int64 {
		var n int64
		if _, err := a.Append(context.Background(), "ses_age", func(h store.Head) (store.Batch, error) {
			n = h.PendingApprovals
			return store.Batch{Events: []redact.Envelope{requested(t, "x")}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := pendingSeen(); n != 0 {
		t.Fatalf("pending = %d at first, want 0", n)
	}
	if _, err := b.Append(context.Background(), "ses_age", func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{requested(t, "y")}, Head: store.HeadChange{Pending: 1}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := pendingSeen(); n != 1 {
		t.Errorf("pending = %d after the cached head aged, want 1", n)
	}
}
