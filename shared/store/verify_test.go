package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestCalls: a run's call records read by tool_call_id, across more than
// one BatchGetItem; ids asked twice are read once, ids without a record
// and another run's records are absent.
func TestCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_a", 0)
	other := newRun(t, st, "ses_b", 0)
	const n = store.MaxPage + 37
	var ids []string
	for i := range n {
		id := fmt.Sprintf("toolu_%03d", i)
		ids = append(ids, id)
		put, err := st.Put(store.CallKey("ses_a", id), store.Call{ToolCallID: id, ToolName: "Bash", InputDigest: "sha256:x", Decision: vocab.Allow, DecidedAt: at(0)})
		must(t, err)
		if h, err = append1(t, st, h, store.HeadChange{}, put); err != nil {
			t.Fatal(err)
		}
	}
	put, err := st.Put(store.CallKey("ses_b", "toolu_other"), store.Call{ToolCallID: "toolu_other", ToolName: "Bash", Decision: vocab.Deny, DecidedAt: at(0)})
	must(t, err)
	if _, err := append1(t, st, other, store.HeadChange{}, put); err != nil {
		t.Fatal(err)
	}
	ask := append(append([]string{}, ids...), ids[0], ids[n-1], "toolu_none", "toolu_other")
	got, err := st.Calls(ctx, "ses_a", ask)
	must(t, err)
	if len(got) != n {
		t.Fatalf("Calls = %d records, want %d", len(got), n)
	}
	for _, id := range ids {
		if c, ok := got[id]; !ok || c.ToolCallID != id || c.Decision != vocab.Allow {
			t.Errorf("Calls[%s] = %+v, %v", id, c, ok)
		}
	}
	if _, ok := got["toolu_other"]; ok {
		t.Error("Calls of ses_a returned a record of ses_b")
	}
	if got, err := st.Calls(ctx, "ses_a", nil); err != nil || len(got) != 0 {
		t.Errorf("Calls of no ids = %v, %v", got, err)
	}
}

// TestCallsUnavailable: a read DynamoDB fails is ErrUnavailable, never a
// map that would read as "never asked".
func TestCallsUnavailable(t *testing.T) {
	t.Parallel()
	st, db := testenv.StoreOn(t, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	newRun(t, st, "ses_a", 0)
	db.Layer.Inject(ddbchaos.Fault{Op: "BatchGetItem", Kind: ddbchaos.Internal})
	got, err := st.Calls(context.Background(), "ses_a", []string{"toolu_1"})
	if !errors.Is(err, store.ErrUnavailable) || got != nil {
		t.Fatalf("Calls under a failure = %v, %v; want nil, ErrUnavailable", got, err)
	}
}

// TestUnverifiedOnce: the record of a finding is written once; a second
// append of it fails with its own sentinel and writes nothing, however
// many try at once.
func TestUnverifiedOnce(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	newRun(t, st, "ses_a", 0)
	errBefore := errors.New("recorded before")
	won := wins(t, 20, errBefore, func(int) error {
		for {
			h, err := st.GetHead(context.Background(), "ses_a")
			if err != nil {
				return err
			}
			op, err := st.PutNew(store.UnverifiedKey("ses_a", "toolu_1"), store.Unverified{ToolCallID: "toolu_1", Reason: "unasked", At: at(0)}, errBefore)
			if err != nil {
				return err
			}
			_, err = append1(t, st, h, store.HeadChange{}, op)
			var moved *store.SeqConflictError
			if !errors.As(err, &moved) {
				return err
			}
		}
	})
	if won != 1 {
		t.Fatalf("%d appends recorded the finding, want 1", won)
	}
	var u store.Unverified
	if err := st.Get(context.Background(), store.UnverifiedKey("ses_a", "toolu_1"), &u); err != nil || u.Reason != "unasked" {
		t.Fatalf("the record = %+v, %v", u, err)
	}
}
