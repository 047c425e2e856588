package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
)

var errInputSettled = errors.New("test: input request settled")

// fileInput appends a pending input request of run h for call toolCallID,
// requested at t0+d and due at t0+1h.
func fileInput(t *testing.T, st *store.Store, h store.Head, id, toolCallID string, d time.Duration) store.InputRequest {
	t.Helper()
	r := store.InputRequest{ID: id, RunID: h.RunID, ToolCallID: toolCallID, ToolName: "mcp__team__deploy", ConnectionID: "con_1",
		Server: "team", Mode: "url", Link: "https://auth.example.com/consent", Status: string(elicitation.Pending), RequestedAt: at(d), ExpiresAt: at(time.Hour)}
	ops, err := st.NewInputRequestOps(r, store.ErrExists)
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, ops...)
	must(t, err)
	return r
}

func inputIDs(rs []store.InputRequest) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// settleBatch is one settlement of r, alone in its batch (a decision's
// batch: no head change, so racing batches meet only on r's condition).
func settleBatch(t *testing.T, st *store.Store, r store.InputRequest, m store.InputSettlement) store.Batch {
	t.Helper()
	op, err := st.SettleInputRequestOp(r, m, errInputSettled)
	must(t, err)
	return store.Batch{Events: []redact.Envelope{envelope(t, redact.SessionEnded{EndedBy: "admin"})}, Ops: []store.Op{op}}
}

// TestInputRequests covers the reads and writes of input requests: one by
// its id and by its call, a run's, the pending index in request order
// across pages, a second filing of the same id refused, and settling
// taking a row out of the pending index.
func TestInputRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	a, b := newRun(t, st, "ses_a", 0), newRun(t, st, "ses_b", 0)
	filed := []store.InputRequest{
		fileInput(t, st, a, "inp_1", "z1", 0),
		fileInput(t, st, b, "inp_2", "c2", time.Second),
		fileInput(t, st, a, "inp_3", "a3", 2*time.Second),
		fileInput(t, st, a, "inp_4", "a3", 3*time.Second),
		fileInput(t, st, b, "inp_5", "b4", 4*time.Second),
	}
	got, err := st.GetInputRequestByID(ctx, "inp_3")
	must(t, err)
	if diff := cmp.Diff(filed[2], got); diff != "" {
		t.Errorf("GetInputRequestByID(inp_3) (-want +got):\n%s", diff)
	}
	_, err = st.GetInputRequestByID(ctx, "inp_none")
	wantErr(t, "GetInputRequestByID(inp_none)", err, store.ErrNotFound)

	ops, err := st.NewInputRequestOps(filed[0], store.ErrExists)
	must(t, err)
	_, err = append1(t, st, a, store.HeadChange{}, ops...)
	wantErr(t, "filing inp_1 again", err, store.ErrExists)

	call, err := st.CallInputRequests(ctx, "ses_a", "a3")
	must(t, err)
	if diff := cmp.Diff([]string{"inp_3", "inp_4"}, inputIDs(call)); diff != "" {
		t.Errorf("CallInputRequests(ses_a, a3) (-want +got):\n%s", diff)
	}
	run, err := st.RunInputRequests(ctx, "ses_a")
	must(t, err)
	if diff := cmp.Diff([]string{"inp_1", "inp_3", "inp_4"}, inputIDs(run)); diff != "" {
		t.Errorf("RunInputRequests(ses_a) (-want +got):\n%s", diff)
	}

	// Settle inp_2: it leaves the pending index.
	_, err = st.Append(ctx, b, at(time.Minute), settleBatch(t, st, filed[1], store.InputSettlement{From: "pending", To: "completed", By: "admin", At: at(time.Minute)}))
	must(t, err)
	var visited []store.InputRequest
	must(t, st.EachPendingInputRequest(ctx, func(r store.InputRequest) error { visited = append(visited, r); return nil }))
	if diff := cmp.Diff([]string{"inp_1", "inp_3", "inp_4", "inp_5"}, inputIDs(visited)); diff != "" {
		t.Errorf("EachPendingInputRequest (-want +got):\n%s", diff)
	}
	page, err := st.PendingInputRequestsAfter(ctx, store.InputRequestPosition(filed[2]), 0)
	must(t, err)
	if diff := cmp.Diff([]string{"inp_4", "inp_5"}, inputIDs(page)); diff != "" {
		t.Errorf("PendingInputRequestsAfter(inp_3) (-want +got):\n%s", diff)
	}
	got, err = st.GetInputRequestByID(ctx, "inp_2")
	must(t, err)
	if got.Status != "completed" || got.DecidedBy != "admin" {
		t.Errorf("inp_2 after settling = %+v, want completed by admin", got)
	}
}

// TestSettleInputRequestOnce: dozens of settlements of one request race,
// decisions and expiries alike; exactly one lands. A decision past the
// request's time and an expiry before it never land.
func TestSettleInputRequestOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_a", 0)
	early := fileInput(t, st, h, "inp_early", "e1", 0)
	late := fileInput(t, st, h, "inp_late", "l1", 0)

	// Within its time: an expiry does not hold; past it, a decision does not.
	_, err := st.Append(ctx, h, at(time.Minute), settleBatch(t, st, early, store.InputSettlement{From: "pending", To: "expired", By: "system:expiry", At: at(time.Minute), Expiry: true}))
	wantErr(t, "expiry before the time", err, errInputSettled)
	_, err = st.Append(ctx, h, at(2*time.Hour), settleBatch(t, st, late, store.InputSettlement{From: "pending", To: "completed", By: "admin", At: at(2 * time.Hour)}))
	wantErr(t, "decision past the time", err, errInputSettled)

	for _, r := range []store.InputRequest{early, late} {
		const n = 36
		won := wins(t, n, errInputSettled, func(i int) error {
			m := store.InputSettlement{From: "pending", By: fmt.Sprintf("user:%d", i), At: at(time.Minute)}
			switch i % 3 {
			case 0:
				m.To = "completed"
			case 1:
				m.To = "declined"
			default:
				m.To, m.Expiry, m.At = "expired", true, at(2*time.Hour)
			}
			_, err := st.Append(ctx, h, at(time.Minute), settleBatch(t, st, r, m))
			return err
		})
		if won != 1 {
			t.Errorf("%s: %d settlements landed, want exactly 1", r.ID, won)
		}
		got, err := st.GetInputRequestByID(ctx, r.ID)
		must(t, err)
		if got.Status == string(elicitation.Pending) || got.DecidedBy == "" {
			t.Errorf("%s after the race = %+v, want settled", r.ID, got)
		}
	}
}
