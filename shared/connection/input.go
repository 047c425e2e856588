package connection

import (
	"context"
	"fmt"
	"time"

	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// A brokered call whose upstream asks a person to open a link (URL-mode
// elicitation) waits for them without holding the HTTP request, which API
// Gateway cuts at 29 s:
//
//  1. The upstream is answered cancel (nobody is there within the call),
//     and the call's answer is discarded, never given to the runner. In
//     one append the execution claim is released (unclaim: tool.decision
//     deny, source input_required) and an input request is filed
//     (elicitation: input.requested, the link without its query). The
//     runner is answered pending with the request's id, as for an approval,
//     and asks again with the same tool_call_id.
//  2. The request shows in the approvals inbox (page, API) of whoever may
//     decide the call. They open the link and say done, or decline; nobody
//     answering expires it.
//  3. A retry finds the request: still pending, it waits (wait_seconds)
//     and answers pending again; declined or expired, it answers deny
//     (input_declined, input_expired) and the tool is not called again;
//     completed, the call is verified and claimed again, and the upstream
//     asking for that link again is answered accept (broker.Session.Completed).
//     Its answer is the call's result and tool.brokered records it.
//
// The cost: the upstream runs the tool twice, once to ask and once to
// finish; the first run was told the person dismissed the request. A call
// meets at most MaxInputRounds requests; past them the upstream's answer
// stands as the call's result.

// MaxInputRounds bounds the input requests one call waits on.
const MaxInputRounds = 3

// inputWait is how often a wait for a person re-reads the request.
const inputWait = 250 * time.Millisecond

// inputAnswer is where a call stands on its input requests before it may
// execute: stop with answer (pending, or deny), or go on with the links a
// person finished and the number of requests the call has met.
type inputAnswer struct {
	stop   bool
	answer CallAnswer
	done   []string
	rounds int
	waited bool
}

// awaitInput reads the call's input requests and, while the last is
// pending, waits up to wait for a person to settle it.
func (b *Broker) awaitInput(ctx context.Context, runID string, req permission.Request, wait time.Duration) (inputAnswer, error) {
	rs, err := b.inputs.ForCall(ctx, runID, req.ToolCallID)
	if err != nil || len(rs) == 0 {
		return inputAnswer{}, err
	}
	out := inputAnswer{rounds: len(rs)}
	last := rs[len(rs)-1]
	if elicitation.State(last.Status) == elicitation.Pending && wait > 0 {
		out.waited = true
		deadline := time.Now().Add(wait)
		for elicitation.State(last.Status) == elicitation.Pending && time.Until(deadline) > 0 {
			t := time.NewTimer(min(inputWait, time.Until(deadline)))
			select {
			case <-ctx.Done():
				t.Stop()
				return inputAnswer{}, ctx.Err()
			case <-t.C:
			}
			if last, err = b.inputs.Get(ctx, last.ID); err != nil {
				return inputAnswer{}, err
			}
		}
	}
	switch elicitation.State(last.Status) {
	case elicitation.Pending:
		out.stop, out.answer = true, inputPending(last)
	case elicitation.Declined:
		out.stop, out.answer = true, CallAnswer{Answer: permission.Answer{Decision: vocab.Deny, Source: string(gate.SourceInputDeclined),
			Reason: fmt.Sprintf("a person declined to open the link connection %s's upstream asked for (input request %s), so the tool was not run", last.ConnectionID, last.ID)}}
	case elicitation.Expired:
		out.stop, out.answer = true, CallAnswer{Answer: permission.Answer{Decision: vocab.Deny, Source: string(gate.SourceInputExpired),
			Reason: fmt.Sprintf("nobody opened the link connection %s's upstream asked for in time (input request %s), so the tool was not run", last.ConnectionID, last.ID)}}
	case elicitation.Completed:
		for _, r := range rs {
			if elicitation.State(r.Status) == elicitation.Completed {
				out.done = append(out.done, r.Link)
			}
		}
	default:
		return inputAnswer{}, fmt.Errorf("connection: input request %s has unknown status %q", last.ID, last.Status)
	}
	return out, nil
}

// inputPending is the runner's answer while a call waits on r.
func inputPending(r store.InputRequest) CallAnswer {
	return CallAnswer{
		Answer: permission.Answer{Decision: vocab.Pending, Source: string(gate.SourceInputRequired),
			Reason: fmt.Sprintf("connection %s's upstream asks a person to open a link before it finishes this call; it waits in the approvals inbox (input request %s); ask again with the same tool_call_id", r.ConnectionID, r.ID)},
		InputRequestID: r.ID,
	}
}

// waitingLink is the first link of the call's input requests that went
// unanswered and that a person may be shown.
func waitingLink(in []broker.InputRequest) (broker.InputRequest, bool) {
	for _, r := range in {
		if r.Mode == broker.InputURL && r.Outcome == broker.InputUnanswered && r.Link != "" && r.URL != "" {
			return r, true
		}
	}
	return broker.InputRequest{}, false
}

// park files an input request for link (the ledger gets its Link, the
// request row also its URL for the person) and releases the call's claim
// made at claimedAt, in one append, and answers pending. If the append
// fails the claim stays: the call counts as executed with its outcome
// unknown, and is never run again (fail closed).
func (b *Broker) park(ctx context.Context, runID string, req permission.Request, bt permission.BrokeredTool, conn store.Connection, claimedAt time.Time, link broker.InputRequest) (CallAnswer, error) {
	now := b.svc.opts.Now()
	r := store.InputRequest{ID: ids.New("inp_"), RunID: runID, ToolCallID: req.ToolCallID, ToolName: req.ToolName,
		ConnectionID: bt.ConnectionID, Server: conn.Name, Mode: broker.InputURL, Link: link.Link, URL: link.URL, Personal: bt.Binding.Owner != "",
		RequestedAt: store.FormatTime(now), ExpiresAt: store.FormatTime(now.Add(b.svc.opts.InputTTL)), Counted: true}
	ops, ev, err := b.inputs.File(&r)
	if err != nil {
		return CallAnswer{}, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	batch, err := unclaim(b.svc.st, runID, req.ToolCallID, req.ToolName, gate.SourceInputRequired, claimedAt)
	if err != nil {
		return CallAnswer{}, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	batch.Events = append(batch.Events, ev)
	batch.Ops = append(batch.Ops, ops...)
	rctx, cancel := recordContext(ctx)
	defer cancel()
	err = retry(rctx, func() error {
		_, err := b.perm.Ledger().Append(rctx, runID, func(h store.Head) (store.Batch, error) {
			// The run waits for a person as it does for an approval.
			filed := batch
			filed.Head.Inputs, filed.Head.Status = 1, store.WaitingStatus(h, 0, 1)
			return filed, nil
		})
		return err
	})
	if err != nil {
		b.log.ErrorContext(ctx, "input request not filed; the call's claim stays", "run", runID, "call", req.ToolCallID, "err", err)
		return CallAnswer{}, fmt.Errorf("%w: file input request: %w", ErrNotRecorded, err)
	}
	b.inputs.Filed(ctx, r)
	b.log.InfoContext(ctx, "brokered call waits for a person", "run", runID, "call", req.ToolCallID, "input_request", r.ID, "connection", bt.ConnectionID)
	return inputPending(r), nil
}

// elicitations is what the ledger keeps of the upstream's requests for
// input: the broker's judgement, and a link's scheme, host and path.
func elicitations(in []broker.InputRequest) []redact.Elicitation {
	var out []redact.Elicitation
	for _, r := range in {
		out = append(out, redact.Elicitation{Mode: r.Mode, Link: r.Link, Outcome: r.Outcome})
	}
	return out
}
