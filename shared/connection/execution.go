package connection

import (
	"context"
	"fmt"
	"time"

	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// A brokered call's moves after the gate allowed it (shared/call's
// machine): the execution's claim, its outcome and tool.brokered, or a
// refusal. The store writes each under the machine's condition; these
// build the events that go with them.

// claim is allow | approved_* -> executing: the call's one execution,
// claimed on its record at claimedAt before the upstream is called, only
// when the context's deadline leaves at least need (the call's timeout),
// so a call is never started that its caller cannot wait for (ErrNoTime:
// the tool did not run). decided is the call's recorded answer. On
// call.ErrExecuted the record is returned, with the outcome if it was
// stored. The cost is at-most-once: a broker that dies after the claim
// leaves the call unexecuted, and the runner must use a new tool_call_id.
func claim(ctx context.Context, st *store.Store, runID, toolCallID string, decided vocab.Decision, claimedAt time.Time, need time.Duration) (store.Call, error) {
	// The deadline is the request's, on the wall clock it was set with.
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < need {
		return store.Call{}, fmt.Errorf("%w: %s left, the call may take %s", ErrNoTime, time.Until(dl).Round(time.Millisecond), need)
	}
	return st.ClaimCall(ctx, runID, toolCallID, call.State(decided), store.FormatTime(claimedAt))
}

// outcome is what an executed call's record keeps: digests and numbers,
// never the result.
type outcome struct {
	ResultDigest redact.Digest
	LatencyMS    int64
	IsError      bool
}

// executed is executing -> executed: tool.brokered for the outcome of
// the call the broker claimed, with the outcome stored on its record in
// the same append (store.ExecutedOp), so the two land together, once: a
// second Append, or one after the claim was released, fails with
// call.ErrNotExecuting.
func executed(st *store.Store, runID string, ev redact.ToolBrokered) (store.Batch, error) {
	env, err := redact.New(ev)
	if err != nil {
		return store.Batch{}, err
	}
	op, err := st.ExecutedOp(runID, ev.ToolCallID, call.Executing, store.Outcome{ResultDigest: ev.ResultDigest.String(), LatencyMS: ev.LatencyMS, IsError: ev.IsError})
	if err != nil {
		return store.Batch{}, err
	}
	return store.Batch{Events: []redact.Envelope{env}, Ops: []store.Op{op}}, nil
}

// outcomeOf is the outcome a call record holds; ok is false until one was
// stored.
func outcomeOf(c store.Call) (outcome, bool) {
	// A stored digest that is not one (never written by us) is left zero;
	// the outcome still counts as stored, so the call is not run again.
	d, _ := redact.ParseDigest(c.ResultDigest)
	return outcome{ResultDigest: d, LatencyMS: c.LatencyMS, IsError: c.IsError}, c.ResultDigest != ""
}

// brokered completes executing -> executed for a record whose outcome was
// stored without tool.brokered (by a broker before executed): tool.brokered
// for the stored outcome, marking the record so it is appended once (a
// second Append fails with call.ErrBrokeredRecorded).
func brokered(st *store.Store, runID string, ev redact.ToolBrokered) (store.Batch, error) {
	env, err := redact.New(ev)
	if err != nil {
		return store.Batch{}, err
	}
	op, err := st.BrokeredOp(runID, ev.ToolCallID)
	if err != nil {
		return store.Batch{}, err
	}
	return store.Batch{Events: []redact.Envelope{env}, Ops: []store.Op{op}}, nil
}

// refusal is allow | approved_* -> refused: a tool.decision deny for an
// allowed call that re-verification (the gate's tool-set stage, or the
// upstream's definition of the tool) stopped before it ran. It writes no
// item: the call record keeps its allow, and a retry re-verifies.
func refusal(toolCallID, toolName string, src gate.Source) (store.Batch, error) {
	env, err := redact.New(redact.ToolDecision{ToolCallID: toolCallID, ToolName: toolName, Decision: vocab.Deny, Source: string(src)})
	if err != nil {
		return store.Batch{}, err
	}
	return store.Batch{Events: []redact.Envelope{env}}, nil
}

// unclaim is executing -> refused: the upstream refused the claimed call
// before the tool ran (it wants scopes the grant lacks), so the claim
// made at claimedAt is released (store.ReleaseClaimOp) in the same append
// as the tool.decision deny. A retry of the call then re-verifies and, if
// it is still allowed, claims it again; at most one execution still
// happens, since the release holds only for this claim and only while no
// outcome is stored.
func unclaim(st *store.Store, runID, toolCallID, toolName string, src gate.Source, claimedAt time.Time) (store.Batch, error) {
	env, err := redact.New(redact.ToolDecision{ToolCallID: toolCallID, ToolName: toolName, Decision: vocab.Deny, Source: string(src)})
	if err != nil {
		return store.Batch{}, err
	}
	op, err := st.ReleaseClaimOp(runID, toolCallID, call.Executing, store.FormatTime(claimedAt))
	if err != nil {
		return store.Batch{}, err
	}
	return store.Batch{Events: []redact.Envelope{env}, Ops: []store.Op{op}}, nil
}
