package store_test

import (
	"errors"
	"testing"

	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

var errTaken = errors.New("taken")

// TestRecordedCallFromTheRefusal: a decision's write of a call record
// that exists is refused with that record in the error, so a retry reads
// nothing; a refusal by another op's item (an approval row) never passes
// for the call's record.
func TestRecordedCallFromTheRefusal(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	h := newRun(t, st, "ses_1", 0)
	first := store.Call{ToolCallID: "c1", ToolName: "Bash", InputDigest: "sha256:a", RequestDigest: "sha256:r", Decision: vocab.Allow, DecidedAt: at(0)}
	op, err := st.PutNew(store.CallKey("ses_1", "c1"), first, errTaken)
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, op)
	must(t, err)

	again, err := st.PutNew(store.CallKey("ses_1", "c1"), store.Call{ToolCallID: "c1", ToolName: "Read", Decision: vocab.Deny}, errTaken)
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, again)
	wantErr(t, "a second record", err, errTaken)
	got, ok := store.RecordedCall(err, "ses_1", "c1")
	if !ok || got != first {
		t.Errorf("RecordedCall = %+v, %v; want the first record", got, ok)
	}
	if _, ok := store.RecordedCall(err, "ses_1", "c2"); ok {
		t.Error("the record of c1 passed for c2's")
	}

	row, err := st.PutNew(store.ApprovalKey("ses_1", "c1"), store.Call{ToolCallID: "c1", Decision: vocab.Pending}, errTaken)
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, row)
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, row)
	wantErr(t, "a second approval row", err, errTaken)
	if _, ok := store.RecordedCall(err, "ses_1", "c1"); ok {
		t.Error("an approval row passed for the call's record")
	}
}
