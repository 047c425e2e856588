package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/internal/taskserver"
)

var requiredResearch = map[string]string{"research": "required", "maybe": "optional", "plain": "forbidden", "odd": "sometimes"}

func callTask(ctx context.Context, t *testing.T, u *taskserver.Server, name string) (broker.Result, error) {
	t.Helper()
	s, err := broker.Connect(ctx, loopback, u.URL, goodCred)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return s.CallTool(ctx, name, map[string]any{"topic": "tides"})
}

// TestTaskRequiredTool: a tool whose taskSupport is required runs as a
// task (params.task with the broker's ttl), is polled with tasks/get and
// its result read with tasks/result; optional and forbidden tools are
// called plainly; an unknown taskSupport is refused before anything is sent.
func TestTaskRequiredTool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := taskserver.New(t, taskserver.Options{Token: canary, Support: requiredResearch})
	res, err := callTask(ctx, t, u, "research")
	if err != nil {
		t.Fatalf("task call: %v", err)
	}
	if !strings.Contains(string(res.Content), "report on tides") || res.IsError {
		t.Fatalf("result = %s (is_error %t)", res.Content, res.IsError)
	}
	if u.TaskCalls.Load() != 1 || u.Gets.Load() < 1 {
		t.Fatalf("task calls %d, tasks/get %d", u.TaskCalls.Load(), u.Gets.Load())
	}
	if got := u.TTL.Load(); got != broker.TaskTTL.Milliseconds() {
		t.Fatalf("requested ttl = %d ms", got)
	}
	for _, name := range []string{"maybe", "plain"} {
		if _, err := callTask(ctx, t, u, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if u.TaskCalls.Load() != 1 || u.Calls.Load() != 3 {
		t.Fatalf("optional and forbidden tools: task calls %d of %d", u.TaskCalls.Load(), u.Calls.Load())
	}
	_, err = callTask(ctx, t, u, "odd")
	if !errors.Is(err, broker.ErrInvalidResponse) || u.Calls.Load() != 3 {
		t.Fatalf("unknown taskSupport: err %v, calls %d", err, u.Calls.Load())
	}
}

// TestTaskRequiredWithoutCapability: a server that marks a tool required
// but declares no tasks may not be sent a task (MUST NOT), and a plain call
// is one it refuses: the broker refuses before sending.
func TestTaskRequiredWithoutCapability(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := taskserver.New(t, taskserver.Options{Token: canary, Support: requiredResearch, NoCapability: true})
	s, err := broker.Connect(ctx, loopback, u.URL, goodCred)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ListTools(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.TaskSupport("research"); got != broker.TaskRequired {
		t.Fatalf("TaskSupport = %q", got)
	}
	_, err = s.CallTool(ctx, "research", nil)
	if !errors.Is(err, broker.ErrInvalidRequest) || u.Calls.Load() != 0 {
		t.Fatalf("err %v, calls %d", err, u.Calls.Load())
	}
}

// TestTaskHostile: what the upstream says of its task is held to bounds,
// and never shows in an error.
func TestTaskHostile(t *testing.T) {
	long := strings.Repeat("T", broker.MaxTaskIDBytes+1)
	cases := []struct {
		name string
		o    taskserver.Options
		want error
	}{
		{"id too long", taskserver.Options{Token: canary, ID: long}, broker.ErrInvalidResponse},
		{"id with a newline", taskserver.Options{Token: canary, ID: "zq9\nFORGED log line"}, broker.ErrInvalidResponse},
		{"unknown status", taskserver.Options{Token: canary, Status: "paused"}, broker.ErrInvalidResponse},
		{"cancelled", taskserver.Options{Token: canary, Status: "cancelled"}, broker.ErrProtocol},
		{"result of another task", taskserver.Options{Token: canary, Related: "task-other"}, broker.ErrInvalidResponse},
		{"poll interval not a number", taskserver.Options{Token: canary, Poll: "soon"}, broker.ErrInvalidResponse},
		{"never done", taskserver.Options{Token: canary, Forever: true, Poll: 0}, context.DeadlineExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.Support = requiredResearch
			u := taskserver.New(t, c.o)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := callTask(ctx, t, u, "research")
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if c.o.ID != "" && strings.Contains(err.Error(), c.o.ID[:4]) {
				t.Fatalf("error quotes the task id: %v", err)
			}
			// pollInterval 0 is clamped: 2 s of polling is at most 20 polls.
			if n := u.Gets.Load(); n > 21 {
				t.Fatalf("%d tasks/get in 2 s", n)
			}
		})
	}
}

// TestTaskPollClamped: a server asking to be polled every hour is polled
// at most every maxTaskPoll (5 s), and one asking for 0 ms at least 100 ms
// apart.
func TestTaskPollClamped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := taskserver.New(t, taskserver.Options{Token: canary, Support: requiredResearch, Poll: 3_600_000, Work: 50 * time.Millisecond})
	start := time.Now()
	if _, err := callTask(ctx, t, u, "research"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("an hour's pollInterval held the call %s", d)
	}
}

// TestTaskResultEchoesCredential: a task's result is held to the same
// rules as a plain call's: one holding the credential is withheld.
func TestTaskResultEchoesCredential(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := taskserver.New(t, taskserver.Options{Token: canary, Support: requiredResearch, Result: "token " + canary})
	_, err := callTask(ctx, t, u, "research")
	if !errors.Is(err, broker.ErrCredentialEcho) {
		t.Fatalf("err = %v", err)
	}
	assertNoSecret(t, err)
}

// TestTaskResumed: a session told to defer leaves a task still running at
// its call's deadline pending, and does not end the MCP session the task
// belongs to; ResumeTask polls it on that session from a request of its
// own (not done within a zero wait, done within a longer one) and returns
// its result; after EndTask the handle finds nothing. A
// handle naming another session finds nothing either.
func TestTaskResumed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	u := taskserver.New(t, taskserver.Options{Token: canary, Support: requiredResearch, Work: 1500 * time.Millisecond})
	s, err := broker.Connect(ctx, loopback, u.URL, goodCred)
	if err != nil {
		t.Fatal(err)
	}
	s.DeferTasks()
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.CallTool(cctx, "research", map[string]any{"topic": "tides"})
	ccancel()
	h, ok := s.PendingTask()
	if !errors.Is(err, broker.ErrTaskPending) || !ok || h.Session == "" || h.Protocol == "" {
		t.Fatalf("CallTool: %v, pending %t", err, ok)
	}
	if strings.Contains(err.Error(), h.Task) || strings.Contains(err.Error(), h.Session) {
		t.Fatalf("error quotes the handle: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	other := h
	other.Session = "not-the-session"
	if _, _, err := broker.ResumeTask(ctx, loopback, u.URL, goodCred, other, 0); err == nil {
		t.Fatal("a handle naming another session found the task")
	}
	if _, done, err := broker.ResumeTask(ctx, loopback, u.URL, goodCred, h, 0); err != nil || done {
		t.Fatalf("at once: done %t, %v; want still working", done, err)
	}
	res, done, err := broker.ResumeTask(ctx, loopback, u.URL, goodCred, h, 10*time.Second)
	if err != nil || !done || !strings.Contains(string(res.Content), "report on tides") {
		t.Fatalf("resumed: %s, done %t, %v", res.Content, done, err)
	}
	broker.EndTask(ctx, loopback, u.URL, goodCred, h)
	if _, _, err := broker.ResumeTask(ctx, loopback, u.URL, goodCred, h, 0); err == nil {
		t.Fatal("the session outlived EndTask")
	}
	if u.TaskCalls.Load() != 1 {
		t.Fatalf("%d tasks", u.TaskCalls.Load())
	}
}
