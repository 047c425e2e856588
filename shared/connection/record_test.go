package connection_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

type brokerFixture struct {
	st        *store.Store
	db        *devstack.DynamoDB // set when a test writes the table raw
	broker    *connection.Broker
	approvals *approval.Service
	runID     string
	calls     *atomic.Int64
}

func newBrokerFixture(t *testing.T, faults *calltest.Conflicts, callTimeout time.Duration) brokerFixture {
	t.Helper()
	return newBrokerFixtureWith(t, faults, callTimeout, `{"name":"p","default_verdict":"allow","rules":[]}`)
}

func newBrokerFixtureWith(t *testing.T, faults *calltest.Conflicts, callTimeout time.Duration, policyDoc string) brokerFixture {
	t.Helper()
	return newBrokerFixtureOn(t, testenv.Store(t, faults.Option), connection.Options{CallTimeout: callTimeout}, policyDoc)
}

// newBrokerFixtureOn is the fixture over st, its broker's options opts
// (Egress set here), its ledger's ledOpts.
func newBrokerFixtureOn(t *testing.T, st *store.Store, opts connection.Options, policyDoc string, ledOpts ...ledger.Option) brokerFixture {
	t.Helper()
	ctx := context.Background()
	led := ledger.New(st, time.Now, ledOpts...)
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	calls := &atomic.Int64{}
	server := mcp.NewServer(&mcp.Implementation{Name: "team", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "search", Description: "Searches."},
		func(context.Context, *mcp.CallToolRequest, struct {
			Q string `json:"q"`
		}) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)

	opts.Egress = testenv.Loopback
	svc := connection.NewService(st, sealer, opts)
	v, err := svc.Create(ctx, admin, connection.CreateRequest{Name: "team", URL: srv.URL, Kind: "shared", Credential: &seal.Credential{Type: seal.TypeBearer, Token: token}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Refresh(ctx, admin, v.ID); err != nil {
		t.Fatal(err)
	}
	limit := 1.0
	req := run.CreateRequest{PolicyID: mustPolicyDoc(t, st, policyDoc), Capabilities: []string{"claude-code"}, Connections: []string{"team"}}
	req.Budget = &struct {
		LimitUSD *float64 `json:"limit_usd"`
	}{LimitUSD: &limit}
	r, err := run.NewService(led, time.Now).Create(ctx, admin, req)
	if err != nil {
		t.Fatal(err)
	}
	approvals := approval.NewService(led, time.Now)
	perm := permission.NewService(led, approvals, approval.Lazy{}, nil, time.Now)
	return brokerFixture{st: st, broker: connection.NewBroker(svc, perm, slog.New(slog.DiscardHandler)), approvals: approvals, runID: r.ID, calls: calls}
}

func (f brokerFixture) call(ctx context.Context, id string) (connection.CallAnswer, error) {
	return f.broker.Call(ctx, f.runID, permission.Request{ToolCallID: id, ToolName: "mcp__team__search", Input: []byte(`{"q":"x"}`)}, 0)
}

func (f brokerFixture) brokeredEvents(t *testing.T) int {
	t.Helper()
	evs, _, err := ledger.New(f.st, time.Now).Read(context.Background(), f.runID, 0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == "tool.brokered" {
			n++
		}
	}
	return n
}

// TestBrokeredRecordSurvivesAConflict: a conflict on the tool.brokered
// append is retried; the caller gets its result and the ledger one
// tool.brokered.
func TestBrokeredRecordSurvivesAConflict(t *testing.T) {
	t.Parallel()
	faults := &calltest.Conflicts{Attr: "brokered"}
	f := newBrokerFixture(t, faults, 0)
	faults.Left.Store(2)
	ans, err := f.call(context.Background(), "c1")
	if err != nil || ans.Result == nil || ans.Decision != vocab.Allow {
		t.Fatalf("call = %+v, %v", ans, err)
	}
	// At least the two injected conflicts and the try that lands: under
	// make test-chaos a random conflict may add a try; never a second
	// record or a second upstream call.
	if faults.Seen.Load() < 3 || f.brokeredEvents(t) != 1 || f.calls.Load() != 1 {
		t.Errorf("%d tries, %d tool.brokered, %d upstream calls; want at least 3, 1, 1", faults.Seen.Load(), f.brokeredEvents(t), f.calls.Load())
	}
}

// lapseClock is a broker's clock the test moves past a claim's lapse.
type lapseClock struct{ skew atomic.Int64 }

func (c *lapseClock) now() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }

// unrecordedCall runs c1 with every write of its outcome refused, as when
// the broker's store is gone until the request's deadline: the result is
// withheld and the record keeps the claim without an outcome.
func unrecordedCall(t *testing.T, faults *calltest.Conflicts, clock *lapseClock) brokerFixture {
	t.Helper()
	st, db := testenv.StoreOn(t, faults.Option)
	f := newBrokerFixtureOn(t, st, connection.Options{CallTimeout: 500 * time.Millisecond, Now: clock.now}, `{"name":"p","default_verdict":"allow","rules":[]}`)
	f.db = db
	faults.Left.Store(-1)
	// The claim needs the call's timeout plus the margin for recording
	// (2.5 s); the rest is for the decision and the look, which under -race
	// on a loaded machine take most of a second.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if _, err := f.call(ctx, "c1"); !errors.Is(err, connection.ErrNotRecorded) {
		t.Fatalf("call with its outcome refused = %v, want ErrNotRecorded", err)
	}
	rec, err := f.st.GetCall(context.Background(), f.runID, "c1")
	if err != nil || rec.ExecutedAt == "" || rec.ResultDigest != "" || rec.Brokered {
		t.Fatalf("record = %+v, %v; want claimed, without an outcome", rec, err)
	}
	if f.brokeredEvents(t) != 0 || faults.Seen.Load() < 2 || f.calls.Load() != 1 {
		t.Fatalf("%d tool.brokered after %d tries, %d upstream calls", f.brokeredEvents(t), faults.Seen.Load(), f.calls.Load())
	}
	faults.Left.Store(0)
	return f
}

// TestBrokeredClaimLapsesToFailed: when the outcome with tool.brokered
// cannot land within the request's deadline, the result is withheld and
// the record keeps its claim; a retry is answered "executed, outcome
// unknown" without running the tool again, and once the claim has lapsed
// a retry records the call as failed (tool.brokered, is_error) and answers
// with that outcome, once.
func TestBrokeredClaimLapsesToFailed(t *testing.T) {
	t.Parallel()
	clock := &lapseClock{}
	f := unrecordedCall(t, &calltest.Conflicts{Attr: "brokered"}, clock)

	_, err := f.call(context.Background(), "c1")
	var ran *connection.ExecutedError
	if !errors.As(err, &ran) || ran.Known || f.brokeredEvents(t) != 0 {
		t.Fatalf("retry within the claim = %v with %d tool.brokered, want ErrAlreadyExecuted, outcome unknown, nothing recorded", err, f.brokeredEvents(t))
	}
	claimed, err := f.st.GetCall(context.Background(), f.runID, "c1")
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(store.TimeLayout, claimed.ExecutedAt)
	if err != nil {
		t.Fatal(err)
	}
	// The lapse: 500 ms call, 2 s margin, 10 s a deadline-less record may
	// take. The clock is set a second short of it, then past it.
	lapse := at.Add(12*time.Second + 500*time.Millisecond)
	clock.skew.Store(int64(time.Until(lapse) - time.Second))
	if _, err := f.call(context.Background(), "c1"); !errors.As(err, &ran) || ran.Known {
		t.Fatalf("retry just before the lapse = %v, want the outcome unknown", err)
	}
	clock.skew.Store(int64(time.Until(lapse)))
	_, err = f.call(context.Background(), "c1")
	if !errors.As(err, &ran) || !ran.Known || !ran.Outcome.IsError {
		t.Fatalf("retry after the lapse = %v, want ErrAlreadyExecuted with a failed outcome", err)
	}
	f.recordedFailed(t, ran)
	if _, err := f.call(context.Background(), "c1"); !errors.As(err, &ran) || !ran.Known || f.brokeredEvents(t) != 1 || f.calls.Load() != 1 {
		t.Errorf("third ask = %v with %d tool.brokered, %d upstream calls; want the same outcome, 1, 1", err, f.brokeredEvents(t), f.calls.Load())
	}
}

// recordedFailed checks that c1's record and its last event hold ran's
// failed outcome.
func (f brokerFixture) recordedFailed(t *testing.T, ran *connection.ExecutedError) {
	t.Helper()
	rec, err := f.st.GetCall(context.Background(), f.runID, "c1")
	if err != nil || rec.ResultDigest != ran.Outcome.ResultDigest.String() || !rec.IsError || !rec.Brokered {
		t.Errorf("record = %+v, %v; want the failed outcome, brokered", rec, err)
	}
	evs, _, _ := ledger.New(f.st, time.Now).Read(context.Background(), f.runID, 0, 1000, 0)
	if last := evs[len(evs)-1]; last.Type != "tool.brokered" || !strings.Contains(last.Data, rec.ResultDigest) || !strings.Contains(last.Data, `"is_error":true`) {
		t.Errorf("last event = %s %s", last.Type, last.Data)
	}
}

// TestBrokeredRecordCompletedByTheRetry: an outcome stored on its own,
// without tool.brokered (as a broker before the outcome and its event
// were one write left it), is completed by the retry, which appends
// tool.brokered from it and answers with the recorded outcome, without
// running the tool again.
func TestBrokeredRecordCompletedByTheRetry(t *testing.T) {
	t.Parallel()
	f := unrecordedCall(t, &calltest.Conflicts{Attr: "brokered"}, &lapseClock{})
	const digest = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
	_, err := devstack.DynamoClient(f.db.URL).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(f.st.Table()),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "RUN#" + f.runID},
			"sk": &types.AttributeValueMemberS{Value: "CALL#c1"}},
		UpdateExpression: aws.String("SET result_digest = :d, latency_ms = :l"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": &types.AttributeValueMemberS{Value: digest},
			":l": &types.AttributeValueMemberN{Value: "42"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.call(context.Background(), "c1")
	var ran *connection.ExecutedError
	if !errors.As(err, &ran) || !errors.Is(err, connection.ErrAlreadyExecuted) || !ran.Known {
		t.Fatalf("retry = %v, want ErrAlreadyExecuted with the outcome", err)
	}
	if ran.Outcome.ResultDigest.String() != digest || ran.Outcome.LatencyMS != 42 {
		t.Errorf("outcome = %+v, want %s, 42 ms", ran.Outcome, digest)
	}
	if f.brokeredEvents(t) != 1 || f.calls.Load() != 1 {
		t.Errorf("%d tool.brokered, %d upstream calls; want 1, 1", f.brokeredEvents(t), f.calls.Load())
	}
	evs, _, _ := ledger.New(f.st, time.Now).Read(context.Background(), f.runID, 0, 1000, 0)
	last := evs[len(evs)-1]
	if last.Type != "tool.brokered" || !strings.Contains(last.Data, digest) {
		t.Errorf("last event = %s %s", last.Type, last.Data)
	}
	// A third ask changes nothing.
	if _, err := f.call(context.Background(), "c1"); !errors.Is(err, connection.ErrAlreadyExecuted) || f.brokeredEvents(t) != 1 {
		t.Errorf("third ask = %v with %d tool.brokered", err, f.brokeredEvents(t))
	}
}

// TestNoExecutionWithoutTime: a request whose deadline does not cover the
// call's timeout never claims the call nor reaches the upstream; the call
// stays allowed and runs once there is time.
func TestNoExecutionWithoutTime(t *testing.T) {
	t.Parallel()
	f := newBrokerFixture(t, &calltest.Conflicts{Attr: "brokered"}, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := f.call(ctx, "c1")
	if !errors.Is(err, connection.ErrNoTime) {
		t.Fatalf("call = %v, want ErrNoTime", err)
	}
	if rec, _ := f.st.GetCall(context.Background(), f.runID, "c1"); rec.Decision != vocab.Allow || rec.ExecutedAt != "" || f.calls.Load() != 0 {
		t.Fatalf("record = %+v, upstream calls %d; want allowed, unclaimed, not called", rec, f.calls.Load())
	}
	ans, err := f.call(context.Background(), "c1")
	if err != nil || ans.Result == nil || f.calls.Load() != 1 {
		t.Errorf("with time: %+v, %v, %d upstream calls", ans, err, f.calls.Load())
	}
	if evs, _, _ := ledger.New(f.st, time.Now).Read(context.Background(), f.runID, 0, 100, 0); len(evs) == 0 || evs[len(evs)-1].Type != string(redact.TypeToolBrokered) {
		t.Errorf("events end with %v", evs)
	}
}

// TestWaitLeavesTimeToRun: a wait for a human is cut short so that the
// look, the tool's whole timeout and the record still fit before the
// request's deadline. Here nothing is left to wait (8 s look + 2 s call +
// 2 s record in an 11 s request), so the call answers pending at once and
// a human approving while it would otherwise still wait does not make it
// run: the tool runs only on the next ask, which has the time.
func TestWaitLeavesTimeToRun(t *testing.T) {
	t.Parallel()
	f := newBrokerFixtureWith(t, &calltest.Conflicts{Attr: "brokered"}, 2*time.Second, `{"name":"p","default_verdict":"require_approval","rules":[]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 11*time.Second)
	defer cancel()
	req := permission.Request{ToolCallID: "c1", ToolName: "mcp__team__search", Input: []byte(`{"q":"x"}`)}
	// Approve as soon as the approval exists, while an unshortened wait
	// would still be waiting.
	approved := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			page, err := f.approvals.Inbox(ctx, admin, f.runID, "", 10)
			if err == nil && len(page.Approvals) == 1 {
				_, _, err = f.approvals.Decide(ctx, admin, page.Approvals[0].ID, "approved_once")
				approved <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		approved <- ctx.Err()
	}()
	ans, err := f.broker.Call(ctx, f.runID, req, 10*time.Second)
	if err != nil || ans.Decision != vocab.Pending || ans.Result != nil {
		t.Fatalf("call with no time to wait = %+v, %v; want pending at once", ans, err)
	}
	if err := <-approved; err != nil {
		t.Fatalf("approve: %v", err)
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("the tool ran %d times in a request without time for it", n)
	}
	ans, err = f.broker.Call(context.Background(), f.runID, req, 0)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || f.calls.Load() != 1 {
		t.Errorf("the next ask = %+v, %v with %d upstream calls; want allow, run once", ans, err, f.calls.Load())
	}
}

// TestDuplicatesRunOnce: dozens of requests with one tool_call_id at once,
// each deciding it fresh: only the one whose own write recorded the
// decision holds the claim it carries; the others are answered from that
// record and find the call executed. The tool runs once and tool.brokered
// is appended once.
func TestDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	f := newBrokerFixture(t, &calltest.Conflicts{}, 0)
	const racers = 24
	errs := make(chan error, racers)
	var results atomic.Int32
	for range racers {
		go func() {
			ans, err := f.call(context.Background(), "dup")
			if err == nil && ans.Result != nil {
				results.Add(1)
			}
			errs <- err
		}()
	}
	for range racers {
		if err := <-errs; err != nil && !errors.Is(err, connection.ErrAlreadyExecuted) && !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("duplicate: %v", err)
		}
	}
	if f.calls.Load() != 1 || results.Load() != 1 || f.brokeredEvents(t) != 1 {
		t.Errorf("%d upstream calls, %d results, %d tool.brokered; want 1, 1, 1", f.calls.Load(), results.Load(), f.brokeredEvents(t))
	}
}

// TestAllowedCallDoesNotOutliveItsRun: a call allowed and recorded but not
// yet run (here, no time was left to run it) does not run once its run
// has ended: the next ask is denied as the gate denies any call of an
// ended run, the upstream is never called, and the ledger records it.
func TestAllowedCallDoesNotOutliveItsRun(t *testing.T) {
	t.Parallel()
	f := newBrokerFixture(t, &calltest.Conflicts{Attr: "brokered"}, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := f.call(ctx, "c1"); !errors.Is(err, connection.ErrNoTime) {
		t.Fatalf("call = %v, want ErrNoTime", err)
	}
	if rec, _ := f.st.GetCall(context.Background(), f.runID, "c1"); rec.Decision != vocab.Allow || rec.ExecutedAt != "" {
		t.Fatalf("record = %+v; want allowed, unclaimed", rec)
	}
	if err := run.NewService(ledger.New(f.st, time.Now), time.Now).End(context.Background(), admin, f.runID); err != nil {
		t.Fatal(err)
	}
	ans, err := f.call(context.Background(), "c1")
	if err != nil || ans.Decision != vocab.Deny || ans.Source != "session" || ans.Result != nil {
		t.Errorf("after the run ended: %+v, %v; want denied by session", ans, err)
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("the upstream was called %d times for a run that had ended", n)
	}
	if rec, _ := f.st.GetCall(context.Background(), f.runID, "c1"); rec.ExecutedAt != "" {
		t.Errorf("record = %+v; want unclaimed", rec)
	}
}
