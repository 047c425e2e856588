package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/truora/minidyn/server"

	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

func TestCreateTableTwice(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	if err := st.CreateTable(context.Background()); err != nil {
		t.Errorf("second CreateTable = %v, want nil", err)
	}
	if st.Table() == "" {
		t.Error("no table name")
	}
}

func TestCreateRunAndRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_1", 3)
	if h.LastSeq != 1 || h.Status != vocab.Running || h.BudgetAvailable != 1000 {
		t.Errorf("head = %+v", h)
	}
	f, err := st.GetFrozen(ctx, "ses_1")
	if err != nil || len(f.Tools) != 3 || f.Policy.Digest != "sha256:p" || f.Tools[2].Name != "tool_0002" {
		t.Errorf("frozen = %+v, %v", f, err)
	}
	evs, err := st.Events(ctx, "ses_1", 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Seq != 1 || evs[0].Type != "session.created" {
		t.Errorf("events = %+v, %v", evs, err)
	}
	_, err = st.GetHead(ctx, "ses_none")
	wantErr(t, "head of a missing run", err, store.ErrNotFound)
	_, err = st.GetFrozen(ctx, "ses_none")
	wantErr(t, "frozen of a missing run", err, store.ErrNotFound)

	if err := st.CreateRun(ctx, store.NewRun{Head: store.Head{RunID: "ses_2"}}); err == nil {
		t.Error("a run without its session.created envelope was created")
	}
}

// TestCreateRunChunks: a run larger than one transaction is written in
// chunks, head last, and read back whole through pages; a creation that
// fails at its head deletes the chunks it wrote.
func TestCreateRunChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	newRun(t, st, "ses_big", 250)
	f, err := st.GetFrozen(ctx, "ses_big")
	if err != nil || len(f.Tools) != 250 {
		t.Fatalf("frozen tools = %d, %v; want 250", len(f.Tools), err)
	}
	for i, tool := range f.Tools {
		if tool.Name != fmt.Sprintf("tool_%04d", i) {
			t.Fatalf("tool %d = %s: out of order", i, tool.Name)
		}
	}

	// The same run id again, with other tools: the tool chunks land, the
	// head does not (it exists), and what landed is deleted again.
	r := store.NewRun{
		Head:    store.Head{RunID: "ses_big", Status: vocab.Running, CreatedAt: at(0)},
		Created: envelope(t, redact.SessionCreated{SessionID: "ses_big"}),
	}
	for i := range 250 {
		r.Tools = append(r.Tools, store.Tool{Name: fmt.Sprintf("zz_%04d", i)})
	}
	wantErr(t, "second creation", st.CreateRun(ctx, r), store.ErrExists)
	f, err = st.GetFrozen(ctx, "ses_big")
	if err != nil || len(f.Tools) != 250 || f.Tools[249].Name != "tool_0249" {
		t.Errorf("after the failed creation: %d tools (last %q), %v", len(f.Tools), f.Tools[len(f.Tools)-1].Name, err)
	}
}

// numberAll numbers every pending event of a run, as the sequencer does.
func numberAll(t *testing.T, st *store.Store, runID string) store.Head {
	t.Helper()
	ctx := context.Background()
	h, err := st.GetHead(ctx, runID)
	must(t, err)
	for {
		batch, _, err := st.Unsequenced(ctx, runID, store.MaxNumbered)
		must(t, err)
		if len(batch) == 0 {
			return h
		}
		h, err = st.Number(ctx, h, batch)
		must(t, err)
	}
}

func TestAppend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_1", 0)

	if _, err := st.Append(ctx, h, at(0), store.Batch{}); err == nil {
		t.Error("an append without events was written")
	}
	if _, err := st.Append(ctx, h, at(0), store.Batch{Events: []redact.Envelope{{}}}); err == nil {
		t.Error("an envelope not built by redact was written")
	}

	// A head change: written on the head's version; its event waits for
	// the sequencer.
	h2, err := append1(t, st, h, store.HeadChange{Status: vocab.AwaitingApproval, Reserved: 100, Spent: 50, Pending: 2})
	must(t, err)
	got, _ := st.GetHead(ctx, "ses_1")
	for _, hd := range []store.Head{h2, got} {
		if hd.Ver != 1 || hd.LastSeq != 1 || hd.Status != vocab.AwaitingApproval || hd.BudgetReserved != 100 || hd.BudgetSpent != 50 || hd.BudgetAvailable != 850 || hd.PendingApprovals != 2 {
			t.Errorf("head = %+v, want version 1, seq 1 (not numbered yet), the changes applied", hd)
		}
	}

	// An append on a stale head: the version moved; the current head
	// comes back with the conflict.
	_, err = append1(t, st, h, store.HeadChange{Pending: 1})
	var conflict *store.SeqConflictError
	if !errors.As(err, &conflict) || conflict.Current.Ver != 1 {
		t.Errorf("stale append = %v, want SeqConflictError at version 1", err)
	}

	// Head conditions.
	_, err = append1(t, st, h2, store.HeadChange{WantStatus: vocab.Ended})
	wantErr(t, "WantStatus that does not hold", err, store.ErrConditionFailed)
	floor := int64(851)
	_, err = append1(t, st, h2, store.HeadChange{MinAvailable: &floor})
	wantErr(t, "MinAvailable above the budget", err, store.ErrConditionFailed)
	floor = 850
	h3, err := append1(t, st, h2, store.HeadChange{MinAvailable: &floor, WantStatus: vocab.AwaitingApproval, Pending: -1})
	must(t, err)

	// An op's condition: its own sentinel, and nothing of the batch lands
	// (a decision: no head change; then a head change).
	errMine := errors.New("mine")
	op, err := st.PutNew(store.Key{PK: "RUN#ses_1", SK: "X#1"}, map[string]string{"v": "a"}, errMine)
	must(t, err)
	h4, err := append1(t, st, h3, store.HeadChange{}, op)
	must(t, err)
	op, _ = st.PutNew(store.Key{PK: "RUN#ses_1", SK: "X#1"}, map[string]string{"v": "b"}, errMine)
	_, err = append1(t, st, h4, store.HeadChange{}, op)
	wantErr(t, "second PutNew, as a decision", err, errMine)
	_, err = append1(t, st, h4, store.HeadChange{Status: vocab.Ended}, op)
	wantErr(t, "second PutNew, with a head change", err, errMine)
	if cur, _ := st.GetHead(ctx, "ses_1"); cur.Ver != 2 || cur.Status != vocab.AwaitingApproval || cur.FenceGen != 0 {
		t.Errorf("a failed append changed the head: %+v", cur)
	}

	_, err = append1(t, st, store.Head{RunID: "ses_none"}, store.HeadChange{Pending: 1})
	wantErr(t, "append to a missing run", err, store.ErrNotFound)

	// Numbered: session.created at 1, then the three appends in order.
	if evs, _ := st.Events(ctx, "ses_1", 1, 10); len(evs) != 0 {
		t.Errorf("events numbered before the sequencer ran: %+v", evs)
	}
	if hd := numberAll(t, st, "ses_1"); hd.LastSeq != 4 {
		t.Errorf("after numbering, last seq = %d, want 4", hd.LastSeq)
	}
	evs, err := st.Events(ctx, "ses_1", 1, 2)
	if err != nil || len(evs) != 2 || evs[0].Seq != 2 || evs[1].Seq != 3 {
		t.Errorf("events after 1, 2 of them = %+v, %v", evs, err)
	}
	if evs, _ := st.Events(ctx, "ses_1", 4, 10); len(evs) != 0 {
		t.Errorf("events after the last = %+v", evs)
	}
}

// TestFences: a change that fences decisions (the run's end, the budget
// crossing zero, a grant deleted) raises the head's fence generation;
// once RaiseFence has finished it, a decision made on the older
// generation fails with ErrFenced and writes nothing, and one made on the
// new generation passes. A change that fences nothing leaves it.
func TestFences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_f", 0)

	h, err := append1(t, st, h, store.HeadChange{Reserved: 400})
	must(t, err)
	if h.FenceGen != 0 {
		t.Fatalf("a reservation that leaves money raised the fence: %+v", h)
	}
	spent, err := append1(t, st, h, store.HeadChange{Reserved: 600})
	must(t, err)
	if spent.FenceGen != 1 || spent.FencedGen != 0 {
		t.Fatalf("the budget crossing zero: fence %d/%d, want 1 not finished", spent.FenceGen, spent.FencedGen)
	}
	// Not finished: a decision on the old generation still passes (it is
	// ordered before the change).
	if _, err := append1(t, st, h, store.HeadChange{}); err != nil {
		t.Fatalf("a decision before the fence is finished: %v", err)
	}
	must(t, st.RaiseFence(ctx, "ses_f", 1))
	must(t, st.RaiseFence(ctx, "ses_f", 1)) // anyone may finish it again
	if cur, _ := st.GetHead(ctx, "ses_f"); cur.FencedGen != 1 {
		t.Fatalf("fenced_gen = %d after RaiseFence, want 1", cur.FencedGen)
	}
	// Every shard is raised: a stale decision fails whichever it checks.
	before := numberAll(t, st, "ses_f").LastSeq
	for range 3 * store.FenceShards {
		if _, err := append1(t, st, h, store.HeadChange{}); !errors.Is(err, store.ErrFenced) {
			t.Fatalf("a decision on the old generation = %v, want ErrFenced", err)
		}
	}
	if after := numberAll(t, st, "ses_f").LastSeq; after != before {
		t.Errorf("fenced decisions wrote %d events", after-before)
	}
	cur, _ := st.GetHead(ctx, "ses_f")
	if _, err := append1(t, st, cur, store.HeadChange{}); err != nil {
		t.Errorf("a decision on the current head = %v", err)
	}

	// A grant deleted fences too; the run's end too.
	grant, err := st.Put(store.GrantKey("ses_f", "ask-push", "Bash:git push"), map[string]string{"scope_key": "Bash:git push"})
	must(t, err)
	cur, err = append1(t, st, cur, store.HeadChange{Pending: 1}, grant)
	must(t, err)
	if cur.FenceGen != 1 {
		t.Errorf("a grant put raised the fence to %d", cur.FenceGen)
	}
	cur, err = append1(t, st, cur, store.HeadChange{}, st.DeleteExisting(store.GrantKey("ses_f", "ask-push", "Bash:git push"), store.ErrNotFound))
	must(t, err)
	if cur.FenceGen != 2 || cur.Ver != 4 {
		t.Errorf("a grant deleted: fence %d, version %d; want 2, 4", cur.FenceGen, cur.Ver)
	}
	must(t, st.RaiseFence(ctx, "ses_f", 2))
	cur.FencedGen = 2
	cur, err = append1(t, st, cur, store.HeadChange{Status: vocab.Ended})
	must(t, err)
	if cur.FenceGen != 3 {
		t.Errorf("the run's end: fence %d, want 3", cur.FenceGen)
	}
}

// TestNumberRaces: decisions recorded from many goroutines, numbered by
// several sequencers racing: every event is numbered exactly once, seqs
// are gapless, and the two events of one decision stay in order.
func TestNumberRaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_n", 0)
	const decisions = 60
	var wg sync.WaitGroup
	for i := range decisions {
		wg.Go(func() {
			_, err := st.Append(ctx, h, at(0), store.Batch{Events: []redact.Envelope{
				envelope(t, redact.ToolRequested{ToolCallID: fmt.Sprintf("c%02d", i), ToolName: "Bash"}),
				envelope(t, redact.ToolDecision{ToolCallID: fmt.Sprintf("c%02d", i), ToolName: "Bash", Decision: vocab.Allow}),
			}})
			if err != nil {
				t.Error(err)
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for {
				cur, err := st.GetHead(ctx, "ses_n")
				if err != nil {
					t.Error(err)
					return
				}
				batch, _, err := st.Unsequenced(ctx, "ses_n", store.MaxNumbered)
				if err != nil {
					t.Error(err)
					return
				}
				if len(batch) == 0 {
					if cur.LastSeq == 1+2*decisions {
						return
					}
					continue
				}
				var conflict *store.SeqConflictError
				if _, err := st.Number(ctx, cur, batch); err != nil && !errors.As(err, &conflict) {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	evs, err := st.Events(ctx, "ses_n", 0, 1000)
	must(t, err)
	if len(evs) != 1+2*decisions {
		t.Fatalf("%d events numbered, want %d", len(evs), 1+2*decisions)
	}
	requested := map[string]int64{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at position %d: a gap or a duplicate", e.Seq, i)
		}
		var d struct {
			ToolCallID string `json:"tool_call_id"`
		}
		_ = json.Unmarshal([]byte(e.Data), &d)
		switch e.Type {
		case "tool.requested":
			if _, dup := requested[d.ToolCallID]; dup {
				t.Errorf("%s requested twice", d.ToolCallID)
			}
			requested[d.ToolCallID] = e.Seq
		case "tool.decision":
			if r, ok := requested[d.ToolCallID]; !ok || r != e.Seq-1 {
				t.Errorf("%s: decision at %d, requested at %d: want right after", d.ToolCallID, e.Seq, r)
			}
		}
	}
	if _, err := st.Number(ctx, h, nil); err == nil {
		t.Error("numbering nothing succeeded")
	}
}

// TestGenericWrites covers the primitives shared/call builds its moves
// from.
func TestGenericWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_1", 0)
	k := store.Key{PK: "RUN#ses_1", SK: "ITEM#1"}
	type thing struct {
		State  string `dynamodbav:"state"`
		Source string `dynamodbav:"source,omitempty"` // a reserved word
		N      int64  `dynamodbav:"n"`
	}
	errCond := errors.New("cond")

	put, err := st.Put(k, thing{State: "a", N: 1})
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{}, put)
	must(t, err)
	put, _ = st.Put(k, thing{State: "b", N: 2}) // Put replaces
	h, err = append1(t, st, h, store.HeadChange{}, put)
	must(t, err)
	var got thing
	if err := st.Get(ctx, k, &got); err != nil || got.State != "b" || got.N != 2 {
		t.Errorf("after Put = %+v, %v", got, err)
	}

	up, err := st.UpdateOp(k, store.Update{
		Set:  map[string]any{"state": "c", "source": "policy"},
		Cond: "#s = :want", Names: map[string]string{"#s": "state"}, Values: map[string]any{":want": "b"},
	}, errCond)
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{}, up)
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, up) // state is c now
	wantErr(t, "UpdateOp whose condition fails", err, errCond)
	if err := st.Get(ctx, k, &got); err != nil || got.State != "c" || got.Source != "policy" {
		t.Errorf("after UpdateOp = %+v, %v", got, err)
	}
	if _, err := st.UpdateOp(k, store.Update{}, errCond); err == nil {
		t.Error("an update that changes nothing was built")
	}

	// UpdateItem on its own, and the item as it was when its condition fails.
	var old thing
	err = st.UpdateItem(ctx, "test", k, store.Update{Set: map[string]any{"n": int64(3)}, Cond: "n = :one", Values: map[string]any{":one": 1}}, &old)
	wantErr(t, "UpdateItem whose condition fails", err, store.ErrConditionFailed)
	if old.State != "c" {
		t.Errorf("the item as it was = %+v", old)
	}
	must(t, st.UpdateItem(ctx, "test", k, store.Update{Set: map[string]any{"n": int64(3)}}, nil))

	del := st.DeleteExisting(k, errCond)
	h, err = append1(t, st, h, store.HeadChange{}, del)
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, del)
	wantErr(t, "DeleteExisting of nothing", err, errCond)
	wantErr(t, "Get of a deleted item", st.Get(ctx, k, &got), store.ErrNotFound)
}

// TestCallAndApprovalReads covers the reads of the items shared/call
// writes: by key, by id, a run's listings and the pending index, oldest
// first and paged.
func TestCallAndApprovalReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_1", 0)
	_, err := st.GetCall(ctx, "ses_1", "nope")
	wantErr(t, "missing call", err, store.ErrNotFound)
	_, err = st.GetApprovalByID(ctx, "apr_nope")
	wantErr(t, "missing approval", err, store.ErrNotFound)

	for i := range 5 {
		a := store.Approval{ID: fmt.Sprintf("apr_%d", i), RunID: "ses_1", ToolCallID: fmt.Sprintf("c%d", i), Status: vocab.ApprovalPending,
			RequestedAt: at(time.Duration(5-i) * time.Second), ExpiresAt: at(time.Hour)}
		row, err := st.PutNew(store.ApprovalKey("ses_1", a.ToolCallID), store.PendingApproval{Approval: a, GSI1PK: store.PendingIndex, GSI1SK: a.RequestedAt + "#" + a.ID}, store.ErrExists)
		must(t, err)
		ref, err := st.PutNew(store.ApprovalRefKey(a.ID), store.ApprovalRef{RunID: a.RunID, ToolCallID: a.ToolCallID}, store.ErrExists)
		must(t, err)
		c, err := st.PutNew(store.CallKey("ses_1", a.ToolCallID), store.Call{ToolCallID: a.ToolCallID, Decision: vocab.Pending, ApprovalID: a.ID}, store.ErrExists)
		must(t, err)
		g, err := st.Put(store.GrantKey("ses_1", "r", fmt.Sprintf("Bash:cmd %d", i)), store.Grant{RuleID: "r", ScopeKey: fmt.Sprintf("Bash:cmd %d", i), ApprovalID: a.ID})
		must(t, err)
		h, err = append1(t, st, h, store.HeadChange{}, row, ref, c, g)
		must(t, err)
	}
	a, err := st.GetApprovalByID(ctx, "apr_3")
	if err != nil || a.ToolCallID != "c3" {
		t.Errorf("by id = %+v, %v", a, err)
	}
	if c, err := st.GetCall(ctx, "ses_1", "c3"); err != nil || c.ApprovalID != "apr_3" {
		t.Errorf("call = %+v, %v", c, err)
	}
	all, err := st.RunApprovals(ctx, "ses_1")
	if err != nil || len(all) != 5 {
		t.Errorf("run approvals = %d, %v; want 5 across pages of %d", len(all), err, pageSize)
	}
	grants, err := st.Grants(ctx, "ses_1")
	if err != nil || len(grants) != 5 {
		t.Errorf("grants = %d, %v", len(grants), err)
	}
	pend, err := st.PendingApprovals(ctx, 3)
	if err != nil || len(pend) != 3 || pend[0].ID != "apr_4" || pend[2].ID != "apr_2" {
		t.Errorf("oldest 3 pending = %+v, %v", pend, err)
	}
	if pend, _ := st.PendingApprovals(ctx, 0); len(pend) != 5 {
		t.Errorf("all pending = %d, want 5", len(pend))
	}
}

func TestReservations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	heads := map[string]store.Head{}
	for i := range 4 {
		id := fmt.Sprintf("ses_%d", i)
		h := newRun(t, st, id, 0)
		for j := range 2 {
			op, err := st.PutReservation(store.Reservation{ID: fmt.Sprintf("res_%d_%d", i, j), RunID: id, RequestID: fmt.Sprintf("req%d", j), Amount: 10, CreatedAt: at(time.Duration(i*2+j) * time.Second)})
			must(t, err)
			var err2 error
			h, err2 = append1(t, st, h, store.HeadChange{Reserved: 10}, op)
			must(t, err2)
		}
		heads[id] = h
	}
	op, _ := st.PutReservation(store.Reservation{ID: "res_dup", RunID: "ses_0", RequestID: "req0", CreatedAt: at(0)})
	_, err := append1(t, st, heads["ses_0"], store.HeadChange{}, op)
	wantErr(t, "second reservation of a request", err, store.ErrReservationExists)

	r, err := st.GetReservation(ctx, "ses_0", "req1")
	if err != nil || r.Status != store.ReservationOpen || r.ID != "res_0_1" {
		t.Errorf("reservation = %+v, %v", r, err)
	}
	if rs, err := st.RunReservations(ctx, "ses_0"); err != nil || len(rs) != 2 {
		t.Errorf("run reservations = %d, %v", len(rs), err)
	}
	open, err := st.OpenReservations(ctx, at(time.Hour), 0)
	if err != nil || len(open) != 8 {
		t.Errorf("open reservations = %d, %v; want 8 across shards and pages", len(open), err)
	}
	if open, _ := st.OpenReservations(ctx, at(time.Hour), 3); len(open) != 3 {
		t.Errorf("at most 3 = %d", len(open))
	}
	if open, _ := st.OpenReservations(ctx, at(3*time.Second), 0); len(open) != 3 {
		t.Errorf("created before 3 s = %d, want 3", len(open))
	}
	if open, _ := st.OpenReservations(ctx, "", 0); open != nil {
		t.Errorf("before \"\" = %+v, want none", open)
	}

	h := heads["ses_0"]
	closeOp := st.CloseReservation("ses_0", "req0", store.ReservationReconciled, 7, "exact", at(time.Minute))
	use, err := st.PutUsage("ses_0", store.Usage{ReservationID: "res_0_0", RequestID: "req0", Cost: 7, Settlement: "exact", At: at(time.Minute)})
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{Reserved: -10, Spent: 7}, closeOp, use)
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, closeOp)
	wantErr(t, "second close", err, store.ErrReservationClosed)
	use, _ = st.PutUsage("ses_0", store.Usage{RequestID: "req0"})
	_, err = append1(t, st, h, store.HeadChange{}, use)
	wantErr(t, "second usage", err, store.ErrUsageExists)
	if r, _ := st.GetReservation(ctx, "ses_0", "req0"); r.Status != store.ReservationReconciled || r.Cost != 7 || r.ClosedAt != at(time.Minute) {
		t.Errorf("closed reservation = %+v", r)
	}
	if u, err := st.GetUsage(ctx, "ses_0", "req0"); err != nil || u.Cost != 7 {
		t.Errorf("usage = %+v, %v", u, err)
	}
	_, err = st.GetUsage(ctx, "ses_0", "req1")
	wantErr(t, "missing usage", err, store.ErrNotFound)
}

// TestUnavailable: anything DynamoDB answers other than a condition (here
// a 500 on every request) is ErrUnavailable, never a value.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, db := testenv.StoreOn(t, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	h := newRun(t, st, "ses_1", 0)
	db.Server.EmulateFailureForTable(st.Table(), server.FailureConditionInternalServerError)
	defer db.Server.EmulateFailureForTable(st.Table(), server.FailureConditionNone)
	_, err := st.GetHead(ctx, "ses_1")
	wantErr(t, "read", err, store.ErrUnavailable)
	_, err = append1(t, st, h, store.HeadChange{})
	wantErr(t, "append", err, store.ErrUnavailable)
	_, err = st.PendingApprovals(ctx, 10)
	wantErr(t, "query", err, store.ErrUnavailable)
	err = st.UpdateItem(ctx, "test", store.CallKey("ses_1", "c"), store.Update{Set: map[string]any{"x": 1}}, nil)
	wantErr(t, "update", err, store.ErrUnavailable)
}

// TestWaitingStatus: a run awaits a person while an approval or an input
// request of its is pending, whichever settles first; an ended run keeps
// its status.
func TestWaitingStatus(t *testing.T) {
	for _, tc := range []struct {
		h                 store.Head
		approvals, inputs int64
		want              vocab.RunStatus
	}{
		{store.Head{Status: vocab.Running}, 1, 0, vocab.AwaitingApproval},
		{store.Head{Status: vocab.Running}, 0, 1, vocab.AwaitingApproval},
		{store.Head{Status: vocab.AwaitingApproval, PendingApprovals: 1}, -1, 0, vocab.Running},
		{store.Head{Status: vocab.AwaitingApproval, PendingApprovals: 1, PendingInputs: 1}, -1, 0, vocab.AwaitingApproval},
		{store.Head{Status: vocab.AwaitingApproval, PendingApprovals: 1, PendingInputs: 1}, 0, -1, vocab.AwaitingApproval},
		{store.Head{Status: vocab.AwaitingApproval, PendingInputs: 2}, 0, -1, vocab.AwaitingApproval},
		{store.Head{Status: vocab.AwaitingApproval, PendingInputs: 1}, 0, -1, vocab.Running},
		{store.Head{Status: vocab.Ended, PendingInputs: 1}, 0, 1, ""},
	} {
		if got := store.WaitingStatus(tc.h, tc.approvals, tc.inputs); got != tc.want {
			t.Errorf("WaitingStatus(%+v, %d, %d) = %q, want %q", tc.h, tc.approvals, tc.inputs, got, tc.want)
		}
	}
}
