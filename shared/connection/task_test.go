package connection_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/internal/taskserver"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestBrokeredTaskCall: a brokered tool its upstream must run as a task
// (taskSupport required, 2025-11-25) is called as one within the call: the
// execution is claimed once, the task polled to its end, the result given
// to the runner and recorded by one tool.brokered; a retry never runs it
// again. Nothing the upstream said of the task reaches the ledger.
func TestBrokeredTaskCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := taskserver.New(t, taskserver.Options{Token: token, Support: map[string]string{"research": "required"}, ID: "TASK-ID-CANARY-81"})
	f, _ := newRunOn(t, u.URL)
	req := permission.Request{ToolCallID: "t1", ToolName: "mcp__team__research", Input: []byte(`{"topic":"tides"}`)}
	ans, err := f.broker.Call(ctx, f.run.ID, req, 0)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || ans.Result.IsError || !strings.Contains(string(ans.Result.Content), "report on tides") {
		t.Fatalf("Call = %+v, %v", ans, err)
	}
	if _, err := f.broker.Call(ctx, f.run.ID, req, 0); !errors.Is(err, connection.ErrAlreadyExecuted) {
		t.Fatalf("retry: %v, want ErrAlreadyExecuted", err)
	}
	if u.TaskCalls.Load() != 1 || u.Calls.Load() != 1 || u.Gets.Load() < 1 {
		t.Fatalf("upstream saw %d calls, %d as tasks, %d tasks/get", u.Calls.Load(), u.TaskCalls.Load(), u.Gets.Load())
	}
	evs, _, err := ledger.New(f.st, time.Now).Read(ctx, f.run.ID, 0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	brokered := 0
	for _, e := range evs {
		if e.Type == "tool.brokered" {
			brokered++
		}
		if strings.Contains(string(e.Data), "TASK-ID-CANARY") || strings.Contains(string(e.Data), "report on tides") {
			t.Errorf("ledger event %s holds the upstream's words: %s", e.Type, e.Data)
		}
	}
	if brokered != 1 {
		t.Fatalf("%d tool.brokered, want 1", brokered)
	}
}

// TestBrokeredTaskPending: a task still working at the call's timeout
// is left running: the runner is answered pending (task_running) and polls
// it through fluidbox with the same tool_call_id; the retry after it ended
// gets its result, recorded by one tool.brokered, and the tool runs once.
// Neither the upstream's task id nor its session id reaches the ledger or
// the answer.
func TestBrokeredTaskPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := taskserver.New(t, taskserver.Options{Token: token, Support: map[string]string{"research": "required"}, ID: "TASK-ID-CANARY-82", Work: 2500 * time.Millisecond})
	f, _ := newRunOnOpts(t, u.URL, `{"name":"p","default_verdict":"allow","rules":[]}`, connection.Options{CallTimeout: time.Second})
	req := permission.Request{ToolCallID: "t1", ToolName: "mcp__team__research", Input: []byte(`{"topic":"tides"}`)}
	for i, wait := range []time.Duration{0, 0} {
		ans, err := f.broker.Call(ctx, f.run.ID, req, wait)
		if err != nil || ans.Decision != vocab.Pending || ans.Source != "task_running" || ans.Result != nil {
			t.Fatalf("call %d = %+v, %v; want pending on the task", i, ans.Answer, err)
		}
		if b, _ := json.Marshal(ans); strings.Contains(string(b), "TASK-ID-CANARY") || strings.Contains(string(b), "session") {
			t.Fatalf("the answer holds the upstream's handle: %s", b)
		}
	}
	if n := brokeredEvents(t, f); n != 0 {
		t.Fatalf("%d tool.brokered while the task runs", n)
	}
	tctx, cancel := context.WithTimeout(ctx, 25*time.Second)
	defer cancel()
	ans, err := f.broker.Call(tctx, f.run.ID, req, 10*time.Second)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || ans.Result.IsError || !strings.Contains(string(ans.Result.Content), "report on tides") {
		t.Fatalf("after the task = %+v (result %s), %v", ans.Answer, resultText(ans), err)
	}
	if _, err := f.broker.Call(ctx, f.run.ID, req, 0); !errors.Is(err, connection.ErrAlreadyExecuted) {
		t.Fatalf("retry after the result: %v, want ErrAlreadyExecuted", err)
	}
	if n := brokeredEvents(t, f); n != 1 || u.TaskCalls.Load() != 1 || u.Calls.Load() != 1 {
		t.Fatalf("%d tool.brokered, %d calls, %d tasks; want 1, 1, 1", n, u.Calls.Load(), u.TaskCalls.Load())
	}
	assertLedgerClean(t, f, "TASK-ID-CANARY", "report on tides")
}

// TestBrokeredTaskOutlivesItsBound: a task still working TaskBound after
// the claim is a call that may have run: an error result, one
// tool.brokered, and the tool never runs again.
func TestBrokeredTaskOutlivesItsBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &skewed{}
	u := taskserver.New(t, taskserver.Options{Token: token, Support: map[string]string{"research": "required"}, Forever: true})
	f, _ := newRunOnOpts(t, u.URL, `{"name":"p","default_verdict":"allow","rules":[]}`, connection.Options{CallTimeout: time.Second, Now: clock.Now})
	req := permission.Request{ToolCallID: "t1", ToolName: "mcp__team__research", Input: []byte(`{"topic":"tides"}`)}
	if ans, err := f.broker.Call(ctx, f.run.ID, req, 0); err != nil || ans.Decision != vocab.Pending {
		t.Fatalf("Call = %+v, %v; want pending", ans.Answer, err)
	}
	clock.Advance(connection.TaskBound + time.Minute)
	ans, err := f.broker.Call(ctx, f.run.ID, req, 0)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || !ans.Result.IsError || !strings.Contains(string(ans.Result.Content), "may have run") {
		t.Fatalf("past the bound = %+v (result %s), %v; want an error result", ans.Answer, resultText(ans), err)
	}
	if _, err := f.broker.Call(ctx, f.run.ID, req, 0); !errors.Is(err, connection.ErrAlreadyExecuted) {
		t.Fatalf("retry: %v, want ErrAlreadyExecuted", err)
	}
	if n := brokeredEvents(t, f); n != 1 || u.TaskCalls.Load() != 1 {
		t.Fatalf("%d tool.brokered, %d tasks; want 1 and 1", n, u.TaskCalls.Load())
	}
}

// TestBrokeredTaskRacingRetries: two dozen requests of the same
// tool_call_id at once create one task, and one tool.brokered records it;
// then two dozen retries polling one parked task at once record it once.
func TestBrokeredTaskRacingRetries(t *testing.T) {
	t.Parallel()
	req := permission.Request{ToolCallID: "t1", ToolName: "mcp__team__research", Input: []byte(`{"topic":"tides"}`)}
	t.Run("one task for a new call", func(t *testing.T) { racingNewCall(t, req) })
	t.Run("one record of a parked task", func(t *testing.T) { racingPolls(t, req) })
}

// racingTimes is how many requests race in TestBrokeredTaskRacingRetries.
const racingTimes = 24

func racingNewCall(t *testing.T, req permission.Request) {
	ctx := context.Background()
	u := taskserver.New(t, taskserver.Options{Token: token, Support: map[string]string{"research": "required"}})
	f, _ := newRunOn(t, u.URL)
	if ans, err := f.broker.Call(ctx, f.run.ID, permission.Request{ToolCallID: "t0", ToolName: req.ToolName, Input: req.Input}, 0); err != nil || ans.Decision != vocab.Allow {
		t.Fatalf("warm-up call = %+v, %v", ans.Answer, err)
	}
	var wg sync.WaitGroup
	var results, executed atomic.Int32
	for range racingTimes {
		wg.Go(func() {
			ans, err := f.broker.Call(ctx, f.run.ID, req, 0)
			switch {
			case err == nil && ans.Decision == vocab.Allow && ans.Result != nil && strings.Contains(string(ans.Result.Content), "report on tides"):
				results.Add(1)
			case errors.Is(err, connection.ErrAlreadyExecuted):
				executed.Add(1)
			case err == nil:
				t.Errorf("Call = %+v (result %s)", ans.Answer, resultText(ans))
			}
		})
	}
	wg.Wait()
	if results.Load() != 1 || u.TaskCalls.Load() != 2 || brokeredEvents(t, f) != 2 {
		t.Fatalf("%d results, %d already executed, %d tasks, %d tool.brokered; want 1 result, 2 tasks and 2 tool.brokered in all (with the warm-up)",
			results.Load(), executed.Load(), u.TaskCalls.Load(), brokeredEvents(t, f))
	}
}

func racingPolls(t *testing.T, req permission.Request) {
	ctx := context.Background()
	slow := taskserver.New(t, taskserver.Options{Token: token, Support: map[string]string{"research": "required"}, Work: 1500 * time.Millisecond})
	g, _ := newRunOnOpts(t, slow.URL, `{"name":"p","default_verdict":"allow","rules":[]}`, connection.Options{CallTimeout: 500 * time.Millisecond})
	if ans, err := g.broker.Call(ctx, g.run.ID, req, 0); err != nil || ans.Decision != vocab.Pending {
		t.Fatalf("Call = %+v, %v; want pending", ans.Answer, err)
	}
	var wg sync.WaitGroup
	var results, pending atomic.Int32
	for range racingTimes {
		wg.Go(func() {
			tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			ans, err := g.broker.Call(tctx, g.run.ID, req, 5*time.Second)
			switch {
			case err == nil && ans.Decision == vocab.Allow && ans.Result != nil && strings.Contains(string(ans.Result.Content), "report on tides"):
				results.Add(1)
			case err == nil && ans.Decision == vocab.Pending:
				pending.Add(1)
			case errors.Is(err, connection.ErrAlreadyExecuted):
			default:
				t.Errorf("poll = %+v (result %s), %v", ans.Answer, resultText(ans), err)
			}
		})
	}
	wg.Wait()
	if results.Load() < 1 || brokeredEvents(t, g) != 1 || slow.TaskCalls.Load() != 1 {
		t.Fatalf("%d results, %d pending, %d tool.brokered, %d tasks; want at least 1 result, 1 tool.brokered, 1 task",
			results.Load(), pending.Load(), brokeredEvents(t, g), slow.TaskCalls.Load())
	}
}

// assertLedgerClean fails if any event of f's run holds one of words.
func assertLedgerClean(t *testing.T, f runOn, words ...string) {
	t.Helper()
	evs, _, err := ledger.New(f.st, time.Now).Read(context.Background(), f.run.ID, 0, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		for _, w := range words {
			if strings.Contains(string(e.Data), w) {
				t.Errorf("ledger event %s holds %q: %s", e.Type, w, e.Data)
			}
		}
	}
}

func brokeredEvents(t *testing.T, f runOn) int {
	t.Helper()
	evs, _, err := ledger.New(f.st, time.Now).Read(context.Background(), f.run.ID, 0, 1000, 0)
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

// resultText is a call's result as JSON, for a failure's message.
func resultText(a connection.CallAnswer) string {
	b, _ := json.Marshal(a.Result)
	return string(b)
}
