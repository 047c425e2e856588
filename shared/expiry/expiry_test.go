package expiry_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/expiry"
)

const stateMachine = "arn:aws:states:us-east-1:123456789012:stateMachine:approval-expiry"

// fakeSFN answers StartExecution the way Step Functions does, and records
// each request as the SDK sent it. There is no local Step Functions server
// in this stack (Step Functions Local is a Java/Docker image we do not
// run), so this is the real SDK client talking AWS JSON 1.0 over HTTP to a
// loopback server that speaks the one operation we use.
type fakeSFN struct {
	mu       sync.Mutex
	requests []recorded
	// executions by name: the input each was started with.
	executions map[string]string
	closed     map[string]bool
}

type recorded struct {
	Target string
	Body   map[string]string
}

func (f *fakeSFN) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]string
	if err := json.Unmarshal(raw, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, recorded{Target: r.Header.Get("X-Amz-Target"), Body: body})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	name, input := body["name"], body["input"]
	arn := "arn:aws:states:us-east-1:123456789012:execution:approval-expiry:" + name
	// Step Functions: same name and input while open succeeds; a different
	// input, or any input once the execution closed, is ExecutionAlreadyExists.
	if prev, ok := f.executions[name]; ok && (prev != input || f.closed[name]) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.swf.service.v2.model#ExecutionAlreadyExists","message":"Execution Already Exists: '`+arn+`'"}`)
		return
	}
	if body["stateMachineArn"] != stateMachine {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.swf.service.v2.model#StateMachineDoesNotExist","message":"State Machine Does Not Exist"}`)
		return
	}
	f.executions[name] = input
	_, _ = io.WriteString(w, `{"executionArn":"`+arn+`","startDate":1.7e9}`)
}

func newScheduler(t *testing.T, arn string) (*expiry.StepFunctions, *fakeSFN) {
	t.Helper()
	f := &fakeSFN{executions: map[string]string{}, closed: map[string]bool{}}
	srv := httptest.NewServer(f) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	client := sfn.New(sfn.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint:     aws.String(srv.URL),
		RetryMaxAttempts: 1,
	})
	return expiry.NewStepFunctions(client, arn), f
}

func TestScheduleStartsNamedExecution(t *testing.T) {
	t.Parallel()
	s, f := newScheduler(t, stateMachine)
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)
	if err := s.Schedule(context.Background(), "apr_abc123", at); err != nil {
		t.Fatalf("Schedule = %v", err)
	}
	want := []recorded{{
		Target: "AWSStepFunctions.StartExecution",
		Body: map[string]string{
			"stateMachineArn": stateMachine,
			"name":            "apr_abc123",
			// Rounded up to the second: the Wait never ends before the approval is overdue.
			"input": `{"approval_id":"apr_abc123","expires_at":"2031-05-06T07:08:10Z"}`,
		},
	}}
	if diff := cmp.Diff(want, f.requests); diff != "" {
		t.Errorf("StartExecution requests (-want +got):\n%s", diff)
	}
}

func TestScheduleTwiceIsHarmless(t *testing.T) {
	t.Parallel()
	s, f := newScheduler(t, stateMachine)
	ctx := context.Background()
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	for i := range 2 {
		if err := s.Schedule(ctx, "apr_twice", at); err != nil {
			t.Fatalf("Schedule #%d (open execution, same input) = %v, want nil", i+1, err)
		}
	}
	// Once the execution has closed, Step Functions answers
	// ExecutionAlreadyExists whatever the input: still the same timer.
	f.mu.Lock()
	f.closed["apr_twice"] = true
	f.mu.Unlock()
	if err := s.Schedule(ctx, "apr_twice", at); err != nil {
		t.Fatalf("Schedule after close = %v, want nil (ExecutionAlreadyExists is success)", err)
	}
	if err := s.Schedule(ctx, "apr_twice", at.Add(time.Hour)); err != nil {
		t.Fatalf("Schedule with another input = %v, want nil", err)
	}
	if len(f.requests) != 4 {
		t.Errorf("requests = %d, want 4", len(f.requests))
	}
}

func TestScheduleReportsOtherErrors(t *testing.T) {
	t.Parallel()
	s, _ := newScheduler(t, "arn:aws:states:us-east-1:123456789012:stateMachine:gone")
	err := s.Schedule(context.Background(), "apr_x", time.Now())
	if err == nil {
		t.Fatal("Schedule on a missing state machine = nil, want an error")
	}
}

func TestWaitUntil(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), "2030-01-02T03:04:05Z"},
		{time.Date(2030, 1, 2, 3, 4, 5, 1, time.UTC), "2030-01-02T03:04:06Z"},
		{time.Date(2030, 12, 31, 23, 59, 59, 999999999, time.UTC), "2031-01-01T00:00:00Z"},
		{time.Date(2030, 1, 2, 5, 4, 5, 0, time.FixedZone("x", 2*3600)), "2030-01-02T03:04:05Z"},
	}
	for _, c := range cases {
		if got := expiry.WaitUntil(c.in); got != c.want {
			t.Errorf("WaitUntil(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
