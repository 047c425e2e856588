package connection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// A brokered tool its upstream runs as a task (broker: taskSupport
// required) is waited for within the call's timeout. A task still running
// then is not abandoned:
//
//  1. The call stays executing (its one claim is spent), and the task's
//     handle (the upstream's MCP session and task ids, which the upstream
//     chose) goes on the call's record (store.ParkTask), never into the
//     ledger, a log line or the answer. The runner is answered pending
//     (source task_running) and asks again with the same tool_call_id, as
//     for an approval: the handle is bound to the run and the call.
//  2. A retry polls the task through fluidbox (broker.ResumeTask on the
//     upstream's session, with the connection's credential), up to
//     wait_seconds within the request's deadline: still running, pending
//     again; ended, its result is the call's, its outcome stored and
//     tool.brokered appended once, and the session ended.
//  3. A task that failed, was cancelled, asked for input, or runs past
//     TaskBound from the claim is a call that may have run: an error
//     result, recorded like any.
//
// A broker that stops between creating the task and storing its handle
// leaves the call claimed with no handle and no outcome: a retry finds it
// executed with its outcome unknown (ErrAlreadyExecuted), and the tool is
// never run again; the orphaned task ends at the server with its ttl
// (broker.TaskTTL). Two retries polling at once may both read the result;
// the outcome is stored once (the executing -> executed condition), and
// the later one answers from the record.

// TaskBound is how long after its claim a call's task is waited for.
const TaskBound = broker.TaskTTL

// parkTask keeps the pending task of the call claimed at claimedAt on its
// record and answers pending. If the write fails the call stays claimed
// with no handle: it counts as executed with its outcome unknown.
func (b *Broker) parkTask(ctx context.Context, runID string, req permission.Request, h broker.TaskHandle, claimedAt time.Time) (CallAnswer, error) {
	t := store.Task{Session: h.Session, Protocol: h.Protocol, ID: h.Task, Until: store.FormatTime(claimedAt.Add(TaskBound))}
	rctx, cancel := recordContext(ctx)
	defer cancel()
	err := retry(rctx, func() error { return b.svc.st.ParkTask(rctx, runID, req.ToolCallID, store.FormatTime(claimedAt), t) })
	if err != nil {
		b.log.ErrorContext(ctx, "upstream task not parked; the call's claim stays", "run", runID, "call", req.ToolCallID, "err", err)
		return CallAnswer{}, fmt.Errorf("%w: park task: %w", ErrNotRecorded, err)
	}
	b.log.InfoContext(ctx, "brokered call runs as an upstream task", "run", runID, "call", req.ToolCallID)
	return taskPending(req), nil
}

// taskPending is the runner's answer while the call's task runs.
func taskPending(req permission.Request) CallAnswer {
	return CallAnswer{Answer: permission.Answer{Decision: vocab.Pending, Source: string(gate.SourceTaskRunning),
		Reason: fmt.Sprintf("the upstream runs %s as a task that is still working; ask again with the same tool_call_id", req.ToolName)}}
}

// awaitTask polls the parked task of an executing call (rec) for up to
// wait, and answers pending, or the call's result once recorded.
func (b *Broker) awaitTask(ctx context.Context, runID string, req permission.Request, bt permission.BrokeredTool, rec store.Call, wait time.Duration) (CallAnswer, error) {
	claimed, err := time.Parse(store.TimeLayout, rec.ExecutedAt)
	if err != nil {
		return CallAnswer{}, fmt.Errorf("connection: call %s of %s: claim time: %w", req.ToolCallID, runID, err)
	}
	until, err := time.Parse(store.TimeLayout, rec.Task.Until)
	if err != nil {
		return CallAnswer{}, fmt.Errorf("connection: call %s of %s: task bound: %w", req.ToolCallID, runID, err)
	}
	h := broker.TaskHandle{Session: rec.Task.Session, Protocol: rec.Task.Protocol, Task: rec.Task.ID}
	_, conn, err := permission.LiveConnection(ctx, b.svc.st, bt.ConnectionID)
	if err != nil {
		return CallAnswer{}, err
	}
	var res broker.Result
	done := false
	end := func() {}
	if b.svc.opts.Now().After(until) {
		err = errTaskOutlived
	} else {
		if b.svc.sealer == nil {
			return CallAnswer{}, ErrNoSealer
		}
		cred, cerr := b.svc.credential(ctx, conn, bt.Binding.Generation, false)
		if cerr != nil {
			return CallAnswer{}, cerr
		}
		// The poll leaves the request time for tasks/result and the record.
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl)-b.svc.opts.CallTimeout-recordMargin)
		}
		pctx, cancel := context.WithTimeout(ctx, max(wait, 0)+b.svc.opts.CallTimeout)
		res, done, err = broker.ResumeTask(pctx, b.svc.opts.Egress, conn.URL, cred, h, max(wait, 0))
		cancel()
		end = func() { broker.EndTask(context.WithoutCancel(ctx), b.svc.opts.Egress, conn.URL, cred, h) }
	}
	if err != nil {
		if cur, gerr := b.svc.st.GetCall(ctx, runID, req.ToolCallID); gerr == nil && cur.ResultDigest != "" {
			// Another retry read the result, recorded it and ended the
			// session.
			return CallAnswer{}, b.ranAlready(ctx, runID, req, bt, cur)
		}
		if errors.Is(err, broker.ErrTransport) || errors.Is(err, context.DeadlineExceeded) {
			// Not the task's end: asked again, until TaskBound.
			done, err = false, nil
		}
	}
	if err == nil && !done {
		return taskPending(req), nil
	}
	// The task ended, or will not be waited for: its session ends once
	// the outcome is recorded (until then a concurrent poll reads it too).
	defer end()
	if err != nil {
		b.log.WarnContext(ctx, "upstream task failed", "run", runID, "call", req.ToolCallID, "err", err)
		res = errorResult("the upstream's task failed, was cancelled, asked for input, or could not be read, and the tool may have run: " + err.Error())
	}
	latency := b.svc.opts.Now().Sub(claimed).Milliseconds()
	body, err := json.Marshal(res)
	if err != nil {
		return CallAnswer{}, fmt.Errorf("%w: encode result: %w", ErrNotRecorded, err)
	}
	out := outcome{ResultDigest: redact.DigestBytes(body), LatencyMS: latency, IsError: res.IsError}
	if err := b.record(ctx, runID, req, bt, out, false, nil); errors.Is(err, call.ErrNotExecuting) {
		cur, gerr := b.svc.st.GetCall(ctx, runID, req.ToolCallID)
		if gerr != nil {
			return CallAnswer{}, gerr
		}
		return CallAnswer{}, b.ranAlready(ctx, runID, req, bt, cur)
	} else if err != nil {
		b.log.ErrorContext(ctx, "brokered task ended but not recorded; result withheld", "run", runID, "call", req.ToolCallID, "err", err)
		return CallAnswer{}, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	return CallAnswer{Answer: permission.Answer{Decision: rec.Decision, Source: rec.Source, Reason: rec.Reason, RuleID: rec.RuleID}, Result: &res, LatencyMS: &latency}, nil
}

// errTaskOutlived: the task ran past TaskBound.
var errTaskOutlived = errors.New("the task outlived the time fluidbox waits for it")

// errorResult is an error result with msg, which holds no upstream text.
func errorResult(msg string) broker.Result {
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": msg}})
	return broker.Result{Content: content, IsError: true}
}
