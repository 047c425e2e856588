package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/notify"
	"github.com/fluidbox/fluidbox/shared/notify/eventbus"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const bus = "fluidbox-approvals"

func approvalIn(status vocab.ApprovalStatus) store.Approval {
	a := store.Approval{
		ID: "apr_1", RunID: "ses_1", ToolCallID: "c1", ToolName: "Bash", Input: `{"command":"rm -rf /","token":"sekrit"}`,
		InputDigest: "sha256:x", RuleID: "rm", ScopeKey: "Bash:rm", DefaultScope: "once", Status: status,
		RequestedAt: "2030-01-01T00:00:00.000000000Z", ExpiresAt: "2030-01-01T00:15:00.000000000Z",
	}
	if status != vocab.ApprovalPending {
		a.DecidedBy, a.DecidedAt = "admin", "2030-01-01T00:01:00.000000000Z"
	}
	return a
}

func TestEntries(t *testing.T) {
	t.Parallel()
	var none store.Approval
	cases := []struct {
		name          string
		before, after store.Approval
		want          []notify.Type
	}{
		{"new pending", none, approvalIn("pending"), []notify.Type{notify.Requested}},
		{"approved once", approvalIn("pending"), approvalIn("approved_once"), []notify.Type{notify.Decided}},
		{"approved for the session", approvalIn("pending"), approvalIn("approved_session"), []notify.Type{notify.Decided}},
		{"denied", approvalIn("pending"), approvalIn("denied"), []notify.Type{notify.Decided}},
		{"expired", approvalIn("pending"), approvalIn("expired"), []notify.Type{notify.Decided}},
		{"pending rewritten", approvalIn("pending"), approvalIn("pending"), nil},
		{"settled rewritten", approvalIn("denied"), approvalIn("denied"), nil},
		{"settled to another state", approvalIn("denied"), approvalIn("approved_once"), nil},
		{"created settled", none, approvalIn("denied"), nil},
		{"removed", approvalIn("pending"), none, nil},
		{"pending to unknown status", approvalIn("pending"), approvalIn("weird"), nil},
	}
	for _, c := range cases {
		var got []notify.Type
		for _, e := range notify.Entries(c.before, c.after) {
			got = append(got, e.Type)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Entries(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDetailIsTheContract: the detail has exactly docs/api.md's fields, and
// nothing of the call's input.
func TestDetailIsTheContract(t *testing.T) {
	t.Parallel()
	for _, after := range []store.Approval{approvalIn("pending"), approvalIn("approved_session")} {
		before := store.Approval{}
		if after.Status != vocab.ApprovalPending {
			before = approvalIn("pending")
		}
		es := notify.Entries(before, after)
		if len(es) != 1 {
			t.Fatalf("Entries(%s) = %d entries, want 1", after.Status, len(es))
		}
		raw, _ := json.Marshal(es[0].Detail)
		var got map[string]any
		_ = json.Unmarshal(raw, &got)
		want := map[string]any{
			"approval_id": "apr_1", "session_id": "ses_1", "tool_call_id": "c1", "tool_name": "Bash", "rule_id": "rm",
			"status": string(after.Status), "expires_at": "2030-01-01T00:15:00.000000000Z",
		}
		if after.DecidedBy != "" {
			want["decided_by"] = "admin"
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("detail of %s (-want +got):\n%s", after.Status, diff)
		}
		if bytes.Contains(raw, []byte("sekrit")) || bytes.Contains(raw, []byte("rm -rf")) {
			t.Errorf("detail %s carries the call's input", raw)
		}
	}
}

// fakeEventBridge answers PutEvents like EventBridge (AWS JSON 1.1) and
// records every request. There is no local EventBridge server in this
// stack, so this is the real SDK client over HTTP to a loopback server
// that speaks the one operation we use. failAt makes the entry with that
// overall index fail, the way EventBridge reports a throttled entry.
type fakeEventBridge struct {
	mu       sync.Mutex
	targets  []string
	requests [][]putEntry
	seen     int
	failAt   int
}

type putEntry struct {
	Source, DetailType, Detail, EventBusName string
}

func (f *fakeEventBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var in struct{ Entries []putEntry }
	if err := json.Unmarshal(raw, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets = append(f.targets, r.Header.Get("X-Amz-Target"))
	f.requests = append(f.requests, in.Entries)
	type result struct {
		EventId      string `json:",omitempty"`
		ErrorCode    string `json:",omitempty"`
		ErrorMessage string `json:",omitempty"`
	}
	out := struct {
		FailedEntryCount int
		Entries          []result
	}{}
	for range in.Entries {
		if f.seen == f.failAt {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, result{ErrorCode: "ThrottlingException", ErrorMessage: "Rate exceeded"})
		} else {
			out.Entries = append(out.Entries, result{EventId: fmt.Sprintf("ev-%d", f.seen)})
		}
		f.seen++
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fakeEventBridge) published() []putEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []putEntry
	for _, r := range f.requests {
		all = append(all, r...)
	}
	return all
}

func newEventBridge(t *testing.T, failAt int) (*eventbus.Publisher, *fakeEventBridge) {
	t.Helper()
	f := &fakeEventBridge{failAt: failAt}
	srv := httptest.NewServer(f) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	client := eventbridge.New(eventbridge.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint:     aws.String(srv.URL),
		RetryMaxAttempts: 1,
	})
	return eventbus.New(client, bus), f
}

func TestEventBridgePublish(t *testing.T) {
	t.Parallel()
	pub, f := newEventBridge(t, -1)
	var entries []notify.Entry
	for i := range 12 {
		a := approvalIn("pending")
		a.ID = fmt.Sprintf("apr_%d", i)
		entries = append(entries, notify.Entries(store.Approval{}, a)...)
	}
	if err := pub.Publish(context.Background(), entries); err != nil {
		t.Fatalf("Publish = %v", err)
	}
	if got := []int{len(f.requests[0]), len(f.requests[1])}; len(f.requests) != 2 || !slices.Equal(got, []int{10, 2}) {
		t.Fatalf("PutEvents requests = %d, want 2 of 10 and 2", len(f.requests))
	}
	for _, tgt := range f.targets {
		if tgt != "AWSEvents.PutEvents" {
			t.Errorf("X-Amz-Target = %q, want AWSEvents.PutEvents", tgt)
		}
	}
	for i, e := range f.published() {
		want := putEntry{Source: "fluidbox", DetailType: "approval.requested", EventBusName: bus,
			Detail: fmt.Sprintf(`{"approval_id":"apr_%d","session_id":"ses_1","tool_call_id":"c1","tool_name":"Bash","rule_id":"rm","status":"pending","expires_at":"2030-01-01T00:15:00.000000000Z"}`, i)}
		if e != want {
			t.Errorf("entry %d = %+v, want %+v", i, e, want)
		}
	}
}

func TestEventBridgeFailedEntry(t *testing.T) {
	t.Parallel()
	pub, f := newEventBridge(t, 13)
	var entries []notify.Entry
	for range 25 {
		entries = append(entries, notify.Entries(store.Approval{}, approvalIn("pending"))...)
	}
	err := pub.Publish(context.Background(), entries)
	pe, ok := err.(*notify.PublishError)
	if !ok || pe.First != 13 || !strings.Contains(err.Error(), "ThrottlingException") {
		t.Fatalf("Publish = %v, want *PublishError from entry 13 naming ThrottlingException", err)
	}
	if len(f.requests) != 2 {
		t.Errorf("requests = %d, want 2: publishing stops at the failed request", len(f.requests))
	}
}

// streamEvent decodes a sample stream batch from events/notify, the same
// file `make invoke FN=notify` posts.
func streamEvent(t *testing.T, name string) events.DynamoDBEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../events/notify", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

func TestStreamSampleEvents(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../events/notify/*.json")
	want := map[string][]string{
		"insert-pending.json":       {`approval.requested {"approval_id":"apr_fixturepending","session_id":"ses_fixture","tool_call_id":"toolu_01","tool_name":"Bash","rule_id":"git-push","status":"pending","expires_at":"2030-01-01T00:15:00.000000000Z"}`},
		"modify-approved-once.json": {`approval.decided {"approval_id":"apr_fixturepending","session_id":"ses_fixture","tool_call_id":"toolu_01","tool_name":"Bash","rule_id":"git-push","status":"approved_once","expires_at":"2030-01-01T00:15:00.000000000Z","decided_by":"admin"}`},
		"modify-expired.json":       {`approval.decided {"approval_id":"apr_fixturepending","session_id":"ses_fixture","tool_call_id":"toolu_01","tool_name":"Bash","rule_id":"git-push","status":"expired","expires_at":"2030-01-01T00:15:00.000000000Z","decided_by":"system:expiry"}`},
		"unrelated-event-row.json":  nil,
		"insert-halted.json":        {`run.halted {"session_id":"ses_fixture","tool_call_id":"toolu_01","reason":"unasked","halted_at":"2030-01-01T00:05:00.000000000Z"}`},
		// Numbered, not published (TestStreamSequencesRuns).
		"insert-unsequenced-event.json": nil,
		"insert-triggered-run.json":     {`session.created {"session_id":"ses_fixturetriggered","trigger":"github","trigger_id":"trg_fixture","trust_tier":"read_only","autonomous":true,"repository":"octo-org/app","head_repository":"someone/app","pull_request":42,"head_sha":"ec26c3e57ca3a959ca5aad62de7213c562f8c821","fork":true,"created_at":"2030-01-01T00:00:00.000000000Z"}`},
	}
	if len(files) != len(want) {
		t.Fatalf("events/notify has %d files, the test knows %d: add the new ones here", len(files), len(want))
	}
	for _, path := range files {
		name := filepath.Base(path)
		pub, f := newEventBridge(t, -1)
		h := notify.NewHandler(pub, nil, slog.New(slog.DiscardHandler))
		resp, err := h.Stream(context.Background(), streamEvent(t, name))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Errorf("Stream(%s) = %+v, %v; want no failures", name, resp, err)
			continue
		}
		var got []string
		for _, e := range f.published() {
			if e.Source != "fluidbox" || e.EventBusName != bus {
				t.Errorf("%s: entry %+v: wrong source or bus", name, e)
			}
			got = append(got, e.DetailType+" "+e.Detail)
			if strings.Contains(e.Detail, "ghp_") || strings.Contains(e.Detail, "git push origin") || strings.Contains(e.Detail, "sha256:0000") {
				t.Errorf("%s: detail carries the call's input: %s", name, e.Detail)
			}
		}
		if diff := cmp.Diff(want[name], got); diff != "" {
			t.Errorf("Stream(%s) published (-want +got):\n%s", name, diff)
		}
	}
}

func TestFromStreamRecord(t *testing.T) {
	t.Parallel()
	ev := streamEvent(t, "modify-expired.json")
	before, after, ok, err := notify.FromStreamRecord(ev.Records[0])
	if err != nil || !ok {
		t.Fatalf("FromStreamRecord = ok %v, %v", ok, err)
	}
	if before.Status != vocab.ApprovalPending || after.Status != vocab.ApprovalExpired || after.ID != "apr_fixturepending" || after.RunID != "ses_fixture" {
		t.Errorf("FromStreamRecord = %+v -> %+v", before, after)
	}
	// A run's head is a notification only when inserted, and only for a
	// triggered run.
	run := streamEvent(t, "insert-triggered-run.json").Records[0]
	if h, ok, err := notify.RunFromStreamRecord(run); !ok || err != nil || len(notify.RunEntries(h)) != 1 {
		t.Errorf("RunFromStreamRecord(triggered insert) = %+v, %v, %v", h, ok, err)
	}
	modified := run
	modified.EventName = "MODIFY"
	if _, ok, _ := notify.RunFromStreamRecord(modified); ok {
		t.Error("a head's MODIFY was taken for a creation")
	}
	manual := run
	manual.Change.NewImage = maps.Clone(run.Change.NewImage)
	manual.Change.NewImage["trigger"] = events.NewStringAttribute("manual")
	if h, ok, err := notify.RunFromStreamRecord(manual); !ok || err != nil || len(notify.RunEntries(h)) != 0 {
		t.Errorf("a manual run's insert = %v entries, want none", len(notify.RunEntries(h)))
	}
	// A halt is its item's insert, and nothing else.
	halt := streamEvent(t, "insert-halted.json").Records[0]
	if h, ok, err := notify.HaltFromStreamRecord(halt); !ok || err != nil || h.RunID != "ses_fixture" || h.Reason != "unasked" {
		t.Errorf("HaltFromStreamRecord(insert) = %+v, %v, %v", h, ok, err)
	}
	rewritten := halt
	rewritten.EventName = "MODIFY"
	if _, ok, _ := notify.HaltFromStreamRecord(rewritten); ok {
		t.Error("a halt item's MODIFY was taken for a halt")
	}
	if _, ok, _ := notify.HaltFromStreamRecord(run); ok {
		t.Error("a run's head was taken for a halt")
	}
	if _, _, ok, err := notify.FromStreamRecord(streamEvent(t, "unrelated-event-row.json").Records[0]); ok || err != nil {
		t.Errorf("FromStreamRecord(EV# row) = ok %v, %v; want not ok", ok, err)
	}
	// An approval row whose image does not decode is an error, not silence.
	bad := streamEvent(t, "insert-pending.json").Records[0]
	bad.Change.NewImage["status"] = events.NewNumberAttribute("7")
	bad.Change.NewImage["expires_at"] = events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewBooleanAttribute(true)})
	if _, _, _, err := notify.FromStreamRecord(bad); err == nil {
		t.Error("FromStreamRecord(undecodable approval) = nil error")
	}
}

// TestStreamRetriesFromFailedRecord: when EventBridge refuses an entry, the
// batch answer names that entry's record, so Lambda retries from it.
func TestStreamRetriesFromFailedRecord(t *testing.T) {
	t.Parallel()
	pub, _ := newEventBridge(t, 1)
	batch := events.DynamoDBEvent{}
	for _, name := range []string{"insert-pending.json", "unrelated-event-row.json", "modify-approved-once.json", "modify-expired.json"} {
		batch.Records = append(batch.Records, streamEvent(t, name).Records...)
	}
	h := notify.NewHandler(pub, nil, slog.New(slog.DiscardHandler))
	resp, err := h.Stream(context.Background(), batch)
	if err != nil {
		t.Fatalf("Stream = %v", err)
	}
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: batch.Records[2].Change.SequenceNumber}}
	if diff := cmp.Diff(want, resp.BatchItemFailures); diff != "" {
		t.Errorf("BatchItemFailures (-want +got):\n%s", diff)
	}
}

// timerLog is an approval.Scheduler that records the timers it is asked to
// start and answers fail.
type timerLog struct {
	mu   sync.Mutex
	fail error
	got  []string
}

func (l *timerLog) Schedule(_ context.Context, approvalID string, at time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, approvalID+" "+at.Format(time.RFC3339Nano))
	return l.fail
}

// TestStreamStartsExpiryTimers: a new pending approval on the stream gets
// its expiry timer, at its expires_at; a decision, an expiry, a run's head
// or another row starts none. A timer that cannot start fails nothing:
// every notification is still published and no record is retried, since
// lazy expiry and the sweep expire an approval without a timer.
func TestStreamStartsExpiryTimers(t *testing.T) {
	t.Parallel()
	batch := events.DynamoDBEvent{}
	for _, name := range []string{"insert-pending.json", "unrelated-event-row.json", "modify-approved-once.json", "modify-expired.json", "insert-triggered-run.json"} {
		batch.Records = append(batch.Records, streamEvent(t, name).Records...)
	}
	for _, fail := range []error{nil, errors.New("StartExecution: throttled")} {
		pub, f := newEventBridge(t, -1)
		timers := &timerLog{fail: fail}
		h := notify.NewHandler(pub, timers, slog.New(slog.DiscardHandler))
		resp, err := h.Stream(context.Background(), batch)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Errorf("Stream (timer error %v) = %+v, %v; want no failures", fail, resp, err)
		}
		if diff := cmp.Diff([]string{"apr_fixturepending 2030-01-01T00:15:00Z"}, timers.got); diff != "" {
			t.Errorf("timers started (timer error %v) (-want +got):\n%s", fail, diff)
		}
		if n := len(f.published()); n != 4 {
			t.Errorf("published %d notifications (timer error %v), want 4", n, fail)
		}
	}
}

func TestPrinter(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	h := notify.NewHandler(notify.NewPrinter(&out), nil, slog.New(slog.DiscardHandler))
	h.Observer()(context.Background(), store.Approval{}, approvalIn("pending"))
	h.Observer()(context.Background(), approvalIn("pending"), approvalIn("denied"))
	h.Observer()(context.Background(), approvalIn("denied"), approvalIn("denied"))
	want := `notification approval.requested {"approval_id":"apr_1","session_id":"ses_1","tool_call_id":"c1","tool_name":"Bash","rule_id":"rm","status":"pending","expires_at":"2030-01-01T00:15:00.000000000Z"}
notification approval.decided {"approval_id":"apr_1","session_id":"ses_1","tool_call_id":"c1","tool_name":"Bash","rule_id":"rm","status":"denied","expires_at":"2030-01-01T00:15:00.000000000Z","decided_by":"admin"}
`
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

// sequencerFunc adapts a function to notify.Sequencer.
type sequencerFunc func(ctx context.Context, runID string) error

func (f sequencerFunc) Sequence(ctx context.Context, runID string) error { return f(ctx, runID) }

// TestStreamSequencesRuns: a batch inserting unsequenced events numbers
// each of their runs once, whatever else the batch holds, and publishes
// as before; a run whose numbering fails is retried from its first
// record, the notifications still published. Without a sequencer the
// records are skipped.
func TestStreamSequencesRuns(t *testing.T) {
	t.Parallel()
	batch := events.DynamoDBEvent{}
	for _, name := range []string{"insert-pending.json", "insert-unsequenced-event.json", "unrelated-event-row.json", "insert-unsequenced-event.json"} {
		batch.Records = append(batch.Records, streamEvent(t, name).Records...)
	}
	for _, fail := range []error{nil, errors.New("TransactWriteItems: throttled")} {
		pub, f := newEventBridge(t, -1)
		var mu sync.Mutex
		var sequenced []string
		h := notify.NewHandler(pub, nil, slog.New(slog.DiscardHandler))
		h.Sequence(sequencerFunc(func(_ context.Context, runID string) error {
			mu.Lock()
			defer mu.Unlock()
			sequenced = append(sequenced, runID)
			return fail
		}))
		resp, err := h.Stream(context.Background(), batch)
		if err != nil {
			t.Fatalf("Stream = %v", err)
		}
		if diff := cmp.Diff([]string{"ses_fixture"}, sequenced); diff != "" {
			t.Errorf("runs sequenced (error %v) (-want +got):\n%s", fail, diff)
		}
		var want []events.DynamoDBBatchItemFailure
		if fail != nil {
			want = []events.DynamoDBBatchItemFailure{{ItemIdentifier: batch.Records[1].Change.SequenceNumber}}
		}
		if diff := cmp.Diff(want, resp.BatchItemFailures, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("BatchItemFailures (error %v) (-want +got):\n%s", fail, diff)
		}
		if n := len(f.published()); n != 1 {
			t.Errorf("published %d notifications (error %v), want 1", n, fail)
		}
	}
	pub, _ := newEventBridge(t, -1)
	if resp, err := notify.NewHandler(pub, nil, slog.New(slog.DiscardHandler)).Stream(context.Background(), batch); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("Stream without a sequencer = %+v, %v", resp, err)
	}
}

// TestStreamNumbersWithTheLedger: the handler as the notify function
// wires it, with a real ledger over minidyn: a decision recorded by an
// instance that does not number (a Lambda function) is numbered when its
// insert comes down the stream.
func TestStreamNumbersWithTheLedger(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	ctx := context.Background()
	env := func(ev redact.Event) redact.Envelope {
		e, err := redact.New(ev)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if err := st.CreateRun(ctx, store.NewRun{
		Head:    store.Head{RunID: "ses_fixture", Status: vocab.Running, CreatedAt: "2030-01-01T00:00:00.000000000Z"},
		Policy:  store.PolicySnapshot{PolicyID: "pol_x", Version: 1, Document: "{}"},
		Created: env(redact.SessionCreated{SessionID: "ses_fixture"}),
	}); err != nil {
		t.Fatal(err)
	}
	gate := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead)
	if _, err := gate.Append(ctx, "ses_fixture", func(store.Head) (store.Batch, error) {
		return store.Batch{Events: []redact.Envelope{env(redact.ToolRequested{ToolCallID: "c1", ToolName: "Bash"}), env(redact.ToolDecision{ToolCallID: "c1", ToolName: "Bash", Decision: vocab.Allow})}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if evs, _ := st.Events(ctx, "ses_fixture", 0, 10); len(evs) != 1 {
		t.Fatalf("%d events numbered before the stream, want 1", len(evs))
	}
	pub, _ := newEventBridge(t, -1)
	h := notify.NewHandler(pub, nil, slog.New(slog.DiscardHandler))
	h.Sequence(ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead))
	if resp, err := h.Stream(ctx, streamEvent(t, "insert-unsequenced-event.json")); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Stream = %+v, %v", resp, err)
	}
	evs, err := st.Events(ctx, "ses_fixture", 0, 10)
	if err != nil || len(evs) != 3 || evs[1].Type != "tool.requested" || evs[2].Type != "tool.decision" {
		t.Errorf("after the stream: %+v, %v; want session.created, tool.requested, tool.decision", evs, err)
	}
}

func inputIn(status string) store.InputRequest {
	r := store.InputRequest{
		ID: "inp_1", RunID: "ses_1", ToolCallID: "c1", ToolName: "mcp__docs__connect", ConnectionID: "con_1", Server: "docs",
		Mode: "url", Link: "https://auth.example.test/consent", URL: "https://auth.example.test/consent?state=sekrit", Status: status,
		RequestedAt: "2030-01-01T00:00:00.000000000Z", ExpiresAt: "2030-01-01T00:15:00.000000000Z",
	}
	if status != "pending" {
		r.DecidedBy, r.DecidedAt = "admin", "2030-01-01T00:01:00.000000000Z"
	}
	return r
}

// TestInputEntries: a new pending input request is input.requested, its
// settlement input.settled, anything else none; the detail is docs/api.md's
// fields and never the link.
func TestInputEntries(t *testing.T) {
	t.Parallel()
	var none store.InputRequest
	cases := []struct {
		name          string
		before, after store.InputRequest
		want          []notify.Type
	}{
		{"new pending", none, inputIn("pending"), []notify.Type{notify.InputRequested}},
		{"completed", inputIn("pending"), inputIn("completed"), []notify.Type{notify.InputSettled}},
		{"declined", inputIn("pending"), inputIn("declined"), []notify.Type{notify.InputSettled}},
		{"expired", inputIn("pending"), inputIn("expired"), []notify.Type{notify.InputSettled}},
		{"pending rewritten", inputIn("pending"), inputIn("pending"), nil},
		{"settled rewritten", inputIn("declined"), inputIn("declined"), nil},
		{"created settled", none, inputIn("completed"), nil},
		{"removed", inputIn("pending"), none, nil},
	}
	for _, c := range cases {
		var got []notify.Type
		for _, e := range notify.InputEntries(c.before, c.after) {
			got = append(got, e.Type)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("InputEntries(%s) = %v, want %v", c.name, got, c.want)
		}
	}
	es := notify.InputEntries(inputIn("pending"), inputIn("completed"))
	raw, _ := json.Marshal(es[0].Detail)
	var got map[string]any
	_ = json.Unmarshal(raw, &got)
	want := map[string]any{
		"input_request_id": "inp_1", "session_id": "ses_1", "tool_call_id": "c1", "tool_name": "mcp__docs__connect",
		"connection_id": "con_1", "server": "docs", "status": "completed", "expires_at": "2030-01-01T00:15:00.000000000Z", "decided_by": "admin",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("input.settled detail (-want +got):\n%s", diff)
	}
	if bytes.Contains(raw, []byte("auth.example.test")) {
		t.Errorf("detail %s carries the link", raw)
	}
}

// TestInputFromStreamRecord: an input request row's record decodes to the
// request before and after; any other row is not one, and an undecodable
// one is an error.
func TestInputFromStreamRecord(t *testing.T) {
	t.Parallel()
	img := func(r store.InputRequest) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{
			"id": events.NewStringAttribute(r.ID), "run_id": events.NewStringAttribute(r.RunID), "status": events.NewStringAttribute(r.Status),
		}
	}
	rec := events.DynamoDBEventRecord{EventName: "MODIFY", Change: events.DynamoDBStreamRecord{
		Keys:     map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("RUN#ses_1"), "sk": events.NewStringAttribute("INP#c1#inp_1")},
		OldImage: img(inputIn("pending")), NewImage: img(inputIn("declined")),
	}}
	before, after, ok, err := notify.InputFromStreamRecord(rec)
	if err != nil || !ok || before.Status != string(elicitation.Pending) || after.Status != string(elicitation.Declined) || after.ID != "inp_1" {
		t.Errorf("InputFromStreamRecord = %+v -> %+v, %v, %v", before, after, ok, err)
	}
	if _, _, ok, err := notify.InputFromStreamRecord(streamEvent(t, "modify-expired.json").Records[0]); ok || err != nil {
		t.Errorf("InputFromStreamRecord(APR# row) = ok %v, %v; want not ok", ok, err)
	}
	rec.Change.NewImage["status"] = events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewBooleanAttribute(true)})
	if _, _, _, err := notify.InputFromStreamRecord(rec); err == nil {
		t.Error("InputFromStreamRecord(undecodable) = nil error")
	}
}
