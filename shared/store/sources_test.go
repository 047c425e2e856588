package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fluidbox/fluidbox/shared/store"
)

// TestSourcePending: the count of a source's pending approvals never
// passes its limit, and a settlement never takes it below zero; a refused
// op refuses its whole append.
func TestSourcePending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_s", 0)
	k := store.SourceKey("github:acme/app#author:42")
	full, empty := errors.New("full"), errors.New("empty")
	var err error
	for range 2 {
		h, err = append1(t, st, h, store.HeadChange{}, st.SourcePendingOp(k, 1, 2, full))
		must(t, err)
	}
	_, err = append1(t, st, h, store.HeadChange{}, st.SourcePendingOp(k, 1, 2, full))
	wantErr(t, "a third pending approval of two", err, full)
	var got store.SourcePending
	if err := st.Get(ctx, k, &got); err != nil || got.Pending != 2 {
		t.Fatalf("count = %+v, %v; want 2", got, err)
	}
	if h, err = st.GetHead(ctx, "ses_s"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		h, err = append1(t, st, h, store.HeadChange{}, st.SourcePendingOp(k, -1, 0, empty))
		must(t, err)
	}
	_, err = append1(t, st, h, store.HeadChange{}, st.SourcePendingOp(k, -1, 0, empty))
	wantErr(t, "settling below zero", err, empty)
	if k == store.SourceKey("github:acme/app#author:43") {
		t.Errorf("two sources share a key")
	}
}
