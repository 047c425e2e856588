package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestParkTask: a call's upstream task is kept on its record only while
// the call is executing under the claim that made the task (no outcome
// stored, the claim's own time); from every other state, or with another
// claim's time, it is refused with call.ErrNotExecuting and nothing is
// written.
func TestParkTask(t *testing.T) {
	t.Parallel()
	st := newMoveStore(t)
	ctx := context.Background()
	task := store.Task{Session: "sess", Protocol: "2025-11-25", ID: "task-1", Until: nowAt}
	for i, s := range standing(callRecord) {
		f := &moveFixture{st: st, run: fmt.Sprintf("ses_p%d", i), id: "c1"}
		stand(t, f, s, false)
		claimed := f.claimedAt
		if claimed == "" {
			claimed = nowAt
		}
		err := st.ParkTask(ctx, f.run, f.id, claimed, task)
		if want := s == call.Executing; (err == nil) != want || (err != nil && !errors.Is(err, call.ErrNotExecuting)) {
			t.Errorf("ParkTask at %s = %v, want success %t", s, err, want)
		}
		rec, err := st.GetCall(ctx, f.run, f.id)
		if err != nil && s != call.Requested {
			t.Fatal(err)
		}
		if got := rec.Task != nil; got != (s == call.Executing) {
			t.Errorf("at %s the record holds a task: %t", s, got)
		}
		if s == call.Executing {
			if err := st.ParkTask(ctx, f.run, f.id, at(0), task); !errors.Is(err, call.ErrNotExecuting) {
				t.Errorf("ParkTask with another claim's time = %v", err)
			}
		}
	}
}
