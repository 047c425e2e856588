package connection_test

import (
	"context"
	"errors"
	"strings"
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
