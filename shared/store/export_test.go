package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestExportCheckpoint: a run's export checkpoint starts at 0 and moves
// only from the value it is asked to move from, so of racing consumers
// exactly one advances it; it never moves backwards or stays put. The
// exporter's role (template.yaml, ExportFunction) may do all of it.
func TestExportCheckpoint(t *testing.T) {
	t.Parallel()
	st, db := testenv.StoreOn(t, roles.Client)
	roles.Enforce(t, db, st.Table())
	ctx := roles.As(context.Background(), "ExportFunction")
	if n, err := st.ExportedThrough(ctx, "ses_a"); err != nil || n != 0 {
		t.Fatalf("ExportedThrough of a new run = %d, %v; want 0", n, err)
	}
	if err := st.AdvanceExport(ctx, "ses_a", 3, 5, at(0)); !errors.Is(err, store.ErrConditionFailed) {
		t.Errorf("AdvanceExport from 3 of a run at 0 = %v, want ErrConditionFailed", err)
	}
	if err := st.AdvanceExport(ctx, "ses_a", 0, 0, at(0)); !errors.Is(err, store.ErrInvalidRequest) {
		t.Errorf("AdvanceExport from 0 to 0 = %v, want ErrInvalidRequest", err)
	}
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			switch err := st.AdvanceExport(ctx, "ses_a", 0, 4, at(1)); {
			case err == nil:
				won.Add(1)
			case !errors.Is(err, store.ErrConditionFailed):
				t.Errorf("AdvanceExport = %v", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Errorf("%d of 16 racing consumers advanced the checkpoint from 0, want 1", won.Load())
	}
	if err := st.AdvanceExport(ctx, "ses_a", 0, 9, at(2)); !errors.Is(err, store.ErrConditionFailed) {
		t.Errorf("AdvanceExport from 0 of a run at 4 = %v, want ErrConditionFailed", err)
	}
	if err := st.AdvanceExport(ctx, "ses_a", 4, 9, at(2)); err != nil {
		t.Fatal(err)
	}
	if n, err := st.ExportedThrough(ctx, "ses_a"); err != nil || n != 9 {
		t.Errorf("ExportedThrough = %d, %v; want 9", n, err)
	}
	if n, err := st.ExportedThrough(ctx, "ses_b"); err != nil || n != 0 {
		t.Errorf("ExportedThrough of another run = %d, %v; want 0", n, err)
	}
}
