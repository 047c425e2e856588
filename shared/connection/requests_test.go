package connection_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
)

// TestRequestsPerBrokeredCall counts the DynamoDB requests of one warm
// brokered call the gate allows, through a counting client, so that none
// can regress: three reads (the call's record, for a retry; the
// connection as it is now; the run's head) and two writes. The decision's
// transaction puts the call record already claimed, and the outcome goes
// on the record in tool.brokered's transaction: before, the claim and the
// outcome were writes of their own (four in all). Numbering the events is
// not the call's (readers and the stream do it), so it is left out.
func TestRequestsPerBrokeredCall(t *testing.T) {
	t.Parallel()
	var requests testenv.Requests
	st, db := testenv.StoreOn(t, requests.Option)
	testenv.Calm(t, db) // it counts requests: a retried one counts twice
	f := newBrokerFixtureOn(t, st, connection.Options{}, `{"name":"p","default_verdict":"allow","rules":[]}`, ledger.SequenceOnlyWhenRead)
	if _, err := f.call(context.Background(), "warm"); err != nil {
		t.Fatal(err)
	}
	requests.Take()
	if ans, err := f.call(context.Background(), "c1"); err != nil || ans.Result == nil {
		t.Fatalf("call = %+v, %v", ans, err)
	}
	got := requests.Take()
	if want := map[string]int{"GetItem": 3, "TransactWriteItems": 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DynamoDB requests of a brokered call = %v, want %v", got, want)
	}

	// The two writes hold the whole record: claimed, its outcome, and
	// tool.brokered once, after the decision.
	rec, err := st.GetCall(context.Background(), f.runID, "c1")
	if err != nil || rec.ExecutedAt == "" || rec.ResultDigest == "" || !rec.Brokered || f.calls.Load() != 2 {
		t.Errorf("record = %+v, %v, %d upstream calls; want claimed, its outcome, brokered, 2", rec, err, f.calls.Load())
	}
	evs, _, err := ledger.New(st, time.Now).Read(context.Background(), f.runID, 0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		if strings.Contains(e.Data, `"tool_call_id":"c1"`) {
			types = append(types, e.Type)
		}
	}
	if want := []string{"tool.requested", "tool.decision", "tool.brokered"}; !slices.Equal(types, want) {
		t.Errorf("events of c1 = %v, want %v", types, want)
	}
}
