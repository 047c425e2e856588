package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fluidbox/fluidbox/shared/store"
)

func TestLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	k := store.OpenKey("ses_l")
	if got, err := st.Leases(ctx, k); err != nil || got != nil {
		t.Fatalf("Leases(nothing held) = %v, %v", got, err)
	}
	for i := range 3 {
		must(t, st.HoldLease(ctx, k, fmt.Sprintf("l%d", i), 3, 100))
	}
	wantErr(t, "a fourth lease of three", st.HoldLease(ctx, k, "l3", 3, 100), store.ErrConditionFailed)
	got, err := st.Leases(ctx, k)
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"l0", "l1", "l2"}) {
		t.Fatalf("Leases = %v, %v", got, err)
	}
	// Only leases still held are counted off: one already gone refuses
	// the whole drop.
	wantErr(t, "drop a lease not held", st.DropLeases(ctx, k, []string{"l1", "gone"}), store.ErrConditionFailed)
	wantErr(t, "a fourth lease of three after a refused drop", st.HoldLease(ctx, k, "l3", 3, 100), store.ErrConditionFailed)
	must(t, st.DropLeases(ctx, k, []string{"l1"}))
	wantErr(t, "drop a lease twice", st.DropLeases(ctx, k, []string{"l1"}), store.ErrConditionFailed)
	must(t, st.HoldLease(ctx, k, "l3", 3, 100))
	wantErr(t, "a fourth lease of three after one drop", st.HoldLease(ctx, k, "l5", 3, 100), store.ErrConditionFailed)
	must(t, st.DropLeases(ctx, k, []string{"l0", "l2", "l3"}))
	if got, err := st.Leases(ctx, k); err != nil || len(got) != 0 {
		t.Fatalf("Leases after dropping all = %v, %v", got, err)
	}
	// The emptied set leaves nothing behind that breaks other reads of
	// the table (minidyn keeps a typeless value for an emptied set).
	if _, err := st.Grants(ctx, "ses_l"); err != nil {
		t.Fatalf("a query after the set emptied: %v", err)
	}
	must(t, st.HoldLease(ctx, k, "l4", 1, 100))
	wantErr(t, "a second lease of one", st.HoldLease(ctx, k, "l5", 1, 100), store.ErrConditionFailed)
}

// TestLeasesRace: of 48 concurrent holds on a set of 16, exactly 16 win.
func TestLeasesRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	k := store.OpenKey("ses_r")
	var won, lost atomic.Int32
	var wg sync.WaitGroup
	for i := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := st.HoldLease(ctx, k, fmt.Sprintf("l%02d", i), 16, 100); {
			case err == nil:
				won.Add(1)
			case errors.Is(err, store.ErrConditionFailed):
				lost.Add(1)
			default:
				t.Errorf("HoldLease: %v", err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 16 || lost.Load() != 32 {
		t.Errorf("won %d, lost %d; want 16 and 32", won.Load(), lost.Load())
	}
	if got, err := st.Leases(ctx, k); err != nil || len(got) != 16 {
		t.Errorf("Leases = %d, %v; want 16", len(got), err)
	}
}
