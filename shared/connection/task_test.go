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

// TestBrokeredTaskOutlivesTheCall: a task still working when the call's
// timeout ends is a call that may have run: its outcome (an error result)
// and one tool.brokered are recorded, the claim is spent, and a retry
// never runs the tool again.
func TestBrokeredTaskOutlivesTheCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := taskserver.New(t, taskserver.Options{Token: token, Support: map[string]string{"research": "required"}, Forever: true})
	f, _ := newRunOnOpts(t, u.URL, `{"name":"p","default_verdict":"allow","rules":[]}`, connection.Options{CallTimeout: time.Second})
	req := permission.Request{ToolCallID: "t1", ToolName: "mcp__team__research", Input: []byte(`{"topic":"tides"}`)}
	ans, err := f.broker.Call(ctx, f.run.ID, req, 0)
	if err != nil || ans.Decision != vocab.Allow || ans.Result == nil || !ans.Result.IsError || !strings.Contains(string(ans.Result.Content), "may have run") {
		t.Fatalf("Call = %+v (result %s), %v; want an error result saying the tool may have run", ans.Answer, resultText(ans), err)
	}
	if _, err := f.broker.Call(ctx, f.run.ID, req, 0); !errors.Is(err, connection.ErrAlreadyExecuted) {
		t.Fatalf("retry: %v, want ErrAlreadyExecuted", err)
	}
	if n := brokeredEvents(t, f); n != 1 || u.TaskCalls.Load() != 1 {
		t.Fatalf("%d tool.brokered, %d tasks; want 1 and 1", n, u.TaskCalls.Load())
	}
}

// TestBrokeredTaskRacingRetries: two dozen requests of the same
// tool_call_id at once create one task, and one tool.brokered records it.
func TestBrokeredTaskRacingRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := taskserver.New(t, taskserver.Options{Token: token, Support: map[string]string{"research": "required"}})
	f, _ := newRunOn(t, u.URL)
	req := permission.Request{ToolCallID: "t1", ToolName: "mcp__team__research", Input: []byte(`{"topic":"tides"}`)}
	if ans, err := f.broker.Call(ctx, f.run.ID, permission.Request{ToolCallID: "t0", ToolName: req.ToolName, Input: req.Input}, 0); err != nil || ans.Decision != vocab.Allow {
		t.Fatalf("warm-up call = %+v, %v", ans.Answer, err)
	}
	const n = 24
	var wg sync.WaitGroup
	var results, executed atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ans, err := f.broker.Call(ctx, f.run.ID, req, 0)
			switch {
			case err == nil && ans.Decision == vocab.Allow && ans.Result != nil && strings.Contains(string(ans.Result.Content), "report on tides"):
				results.Add(1)
			case errors.Is(err, connection.ErrAlreadyExecuted):
				executed.Add(1)
			case err == nil:
				t.Errorf("Call = %+v (result %s)", ans.Answer, resultText(ans))
			}
		}()
	}
	wg.Wait()
	if results.Load() != 1 || u.TaskCalls.Load() != 2 || brokeredEvents(t, f) != 2 {
		t.Fatalf("%d results, %d already executed, %d tasks, %d tool.brokered; want 1 result, 2 tasks and 2 tool.brokered in all (with the warm-up)",
			results.Load(), executed.Load(), u.TaskCalls.Load(), brokeredEvents(t, f))
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
