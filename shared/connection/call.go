package connection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Errors of a brokered call the API maps to its codes.
var (
	// ErrSandboxTool: the tool is a sandbox tool; the runner asks
	// /permission and runs it itself.
	ErrSandboxTool = errors.New("connection: not a brokered tool")
	// ErrAlreadyExecuted: the call was executed already; its result is not
	// kept, and the tool is not run again. The error is an *ExecutedError
	// with what the record knows of the outcome.
	ErrAlreadyExecuted = errors.New("connection: tool call already executed")
	// ErrNoTime: the request's remaining deadline does not cover the call's
	// timeout; the execution was not claimed and the tool did not run.
	ErrNoTime = errors.New("connection: not enough time left to run the tool")
	// ErrUpstreamUnavailable: the upstream's tools could not be read before
	// the decision; nothing was recorded and the tool was not called.
	ErrUpstreamUnavailable = errors.New("connection: upstream unavailable")
	// ErrNotRecorded: the tool ran but its outcome with its tool.brokered
	// event could not be written within the deadline (or a retry recorded
	// the call's lapsed claim as failed first); the result is withheld
	// (nothing unrecorded leaves). The tool is never run again for the
	// call: a retry finds it executed and, once the claim has lapsed,
	// records it as failed.
	ErrNotRecorded = errors.New("connection: brokered call not recorded")
)

// ExecutedError is ErrAlreadyExecuted with the recorded outcome of the
// call's one execution; Known is false when the execution was claimed but
// its outcome not stored (the broker stopped while the tool ran, or could
// not record it) and the claim has not lapsed yet.
type ExecutedError struct {
	Outcome outcome
	Known   bool
}

func (e *ExecutedError) Error() string {
	if !e.Known {
		return ErrAlreadyExecuted.Error() + " (its outcome was not recorded)"
	}
	return fmt.Sprintf("%s (result %s, %d ms, is_error %t)", ErrAlreadyExecuted, e.Outcome.ResultDigest, e.Outcome.LatencyMS, e.Outcome.IsError)
}

// Is makes errors.Is(err, ErrAlreadyExecuted) hold.
func (e *ExecutedError) Is(target error) bool { return target == ErrAlreadyExecuted }

// CallAnswer is the answer of POST /v1/sessions/{id}/tools/call: the gate's
// answer, and on allow the upstream's CallToolResult and the latency.
type CallAnswer struct {
	permission.Answer
	Result    *broker.Result `json:"result,omitempty"`
	LatencyMS *int64         `json:"latency_ms,omitempty"`
	// InputRequestID, on a pending answer, is the input request the call
	// waits on (a person must open a link its upstream asked for).
	InputRequestID string `json:"input_request_id,omitempty"`
}

// Broker calls brokered tools for runs, through the gate.
type Broker struct {
	svc    *Service
	perm   *permission.Service
	inputs *elicitation.Service
	log    *slog.Logger
}

// NewBroker returns a broker over the connection and permission services.
func NewBroker(svc *Service, perm *permission.Service, log *slog.Logger) *Broker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Broker{svc: svc, perm: perm, inputs: elicitation.NewService(perm.Ledger(), svc.opts.Now, log), log: log}
}

// ObserveInputs sets the observer of the input requests the broker files
// and settles (a settlement when it finds one expired).
func (b *Broker) ObserveInputs(o elicitation.Observer) { b.inputs.Observe(o) }

// upstream is one call's view of the upstream: its credential and session,
// opened lazily, and its current tools.
type upstream struct {
	cred    *seal.Credential
	sess    *broker.Session
	looked  bool
	digest  string
	tools   map[string]string
	fetched time.Time
}

// close ends the upstream session before the answer goes out, unless the
// request is already abandoned (then in the background: after an abandoned
// call the upstream may answer the session's DELETE late).
func (u *upstream) close(ctx context.Context) {
	if u.sess == nil {
		return
	}
	if ctx.Err() != nil {
		go func(s *broker.Session) { _ = s.Close() }(u.sess)
	} else {
		_ = u.sess.Close()
	}
	u.sess = nil
}

// Call decides and, when allowed, executes a brokered tool call:
//
//  1. The connection is read as it is now. The gate is asked (recording
//     nothing) on what is known without the secret; if it denies (binding
//     stale, connection re-photographed, read_only run, schema, policy,
//     budget), that denial is recorded and the secret is never touched.
//  2. Otherwise the credential is opened for the frozen generation and the
//     upstream's current tool list is read (or taken from the cache within
//     UpstreamToolsTTL); its digest is the live tool-set digest the gate
//     compares with the frozen one, so a rug pull is denied (capability)
//     and recorded like any decision.
//  3. The gate decides and records (a require_approval pends, and with
//     wait > 0 the call waits for the human, as for /permission).
//  4. On allow: the binding and the tool's upstream definition are checked
//     again (an approved call may have waited), the execution is claimed
//     at most once (in the decision's own write when those checks passed
//     before it), the tool is called with a bounded timeout, and
//     tool.brokered is appended with the outcome on the record.
func (b *Broker) Call(ctx context.Context, runID string, req permission.Request, wait time.Duration) (CallAnswer, error) {
	bt, brokered, err := b.perm.BrokeredTool(ctx, runID, req.ToolName)
	if err != nil {
		return CallAnswer{}, err
	}
	if !brokered {
		return b.notBrokered(ctx, runID, req)
	}
	args, err := decodeArgs(req.Input)
	if err != nil {
		return CallAnswer{}, err
	}
	rec, recorded, err := b.perm.Recorded(ctx, runID, req)
	if err != nil {
		return CallAnswer{}, err
	}
	if rec.ExecutedAt != "" && rec.Task != nil && rec.ResultDigest == "" {
		// Its upstream runs it as a task (task.go).
		return b.awaitTask(ctx, runID, req, bt, rec, b.waitWithin(ctx, wait))
	}
	if rec.ExecutedAt != "" {
		return CallAnswer{}, b.ranAlready(ctx, runID, req, bt, rec)
	}
	c := &brokeredCall{runID: runID, req: req, bt: bt, up: &upstream{}}
	if c.live, c.conn, err = permission.LiveConnection(ctx, b.svc.st, bt.ConnectionID); err != nil {
		return CallAnswer{}, err
	}
	defer c.up.close(ctx)
	wait = b.waitWithin(ctx, wait)

	var ans permission.Answer
	waited := recorded
	if !recorded {
		ans, waited, err = b.decide(ctx, c, wait)
	} else {
		// A retry or an approved call: the recorded answer stands (the gate
		// is not asked again), and the checks below run before execution.
		ans, err = b.perm.DecideBrokered(ctx, runID, req, wait, nil)
	}
	if err != nil {
		return CallAnswer{}, err
	}
	if ans.Decision != vocab.Allow {
		return CallAnswer{Answer: ans}, nil
	}
	// Only a call asked before can have met an input request.
	var in inputAnswer
	if recorded {
		if in, err = b.awaitInput(ctx, runID, req, wait); err != nil {
			return CallAnswer{}, err
		}
		if in.stop {
			return in.answer, nil
		}
		waited = waited || in.waited
	}
	if !c.claimed() {
		// An allow recorded earlier does not outlive its run (a decision
		// that claims in its own write is fenced instead).
		if r, err := b.runRefuses(ctx, runID); err != nil {
			return CallAnswer{}, err
		} else if r != nil {
			return b.refuse(ctx, runID, req, r.src, r.reason)
		}
		if r, err := b.recheck(ctx, c, waited); err != nil {
			return CallAnswer{}, err
		} else if r != nil {
			return b.refuse(ctx, runID, req, r.src, r.reason)
		}
	}
	return b.execute(ctx, runID, req, bt, c.conn, c.up, args, ans, in, c.claimedAt)
}

// brokeredCall is what Call's steps share about one brokered call: the
// connection as last read (live for the gate, conn for the upstream) and
// the call's view of the upstream.
type brokeredCall struct {
	runID string
	req   permission.Request
	bt    permission.BrokeredTool
	live  gate.Live
	conn  store.Connection
	up    *upstream
	// claimedAt is when the decision's own write claimed the call's one
	// execution (zero: it did not).
	claimedAt time.Time
}

// claimed says the decision claimed the call's execution.
func (c *brokeredCall) claimed() bool { return !c.claimedAt.IsZero() }

// notBrokered answers a call of a tool that is not one of the run's
// brokered tools: a sandbox tool is ErrSandboxTool; a tool not frozen at
// all is denied by the gate (capability), which records it.
func (b *Broker) notBrokered(ctx context.Context, runID string, req permission.Request) (CallAnswer, error) {
	sandbox, err := b.perm.SandboxTool(ctx, runID, req.ToolName)
	if err != nil {
		return CallAnswer{}, err
	}
	if sandbox {
		return CallAnswer{}, ErrSandboxTool
	}
	ans, err := b.perm.Decide(ctx, runID, req, 0)
	if err != nil {
		return CallAnswer{}, err
	}
	if ans.Decision == vocab.Allow {
		return CallAnswer{}, fmt.Errorf("connection: the gate allowed %q, which is not a brokered tool of run %s", req.ToolName, runID)
	}
	return CallAnswer{Answer: ans}, nil
}

// decide asks the gate about a call not recorded before (steps 1 to 3 of
// Call): a preview on what is known without the secret, then, unless it
// denies, a look at the upstream, and the decision recorded on the
// connection as the look found it. A pending answer waits up to wait for
// a person; waited says it did. When the checks before execution already
// pass (claimable), an allow is recorded claimed (c.claimedAt), so the
// decision and the claim are one write.
func (b *Broker) decide(ctx context.Context, c *brokeredCall, wait time.Duration) (ans permission.Answer, waited bool, err error) {
	lives := map[string]gate.Live{c.bt.ConnectionID: c.live}
	pre, err := b.perm.Preview(ctx, c.runID, c.req, lives)
	if err != nil {
		return permission.Answer{}, false, err
	}
	steppedUp := false
	if pre.Outcome != policy.VerdictDeny {
		var l gate.Live
		if l, steppedUp, err = b.liveForGate(ctx, c); err != nil {
			return permission.Answer{}, false, err
		}
		lives[c.bt.ConnectionID] = l
	}
	if b.claimable(ctx, c) {
		at := b.svc.opts.Now()
		var claimed bool
		if ans, claimed, err = b.perm.DecideAndClaim(ctx, c.runID, c.req, lives, at); err != nil {
			return permission.Answer{}, false, err
		}
		if claimed {
			c.claimedAt = at
		}
	} else if ans, err = b.perm.DecideBrokered(ctx, c.runID, c.req, 0, lives); err != nil {
		return permission.Answer{}, false, err
	}
	if steppedUp && ans.Decision == vocab.Deny && ans.Source == string(gate.SourceBinding) {
		ans.Reason = stepUpReason(c.bt.ConnectionID)
	}
	if ans.Decision == vocab.Pending && wait > 0 {
		ans, err = b.perm.DecideBrokered(ctx, c.runID, c.req, wait, lives)
		return ans, true, err
	}
	return ans, false, nil
}

// liveForGate looks at the upstream and returns the connection as the
// gate is to judge it: with the upstream's live tool-set digest, or, when
// the look found the grant short of this call (steppedUp) or gone, as one
// the gate denies with source binding.
func (b *Broker) liveForGate(ctx context.Context, c *brokeredCall) (l gate.Live, steppedUp bool, err error) {
	l = c.live
	switch err := b.look(ctx, c.up, c.bt, c.conn, false); {
	case errors.Is(err, ErrStepUp):
		// The grant does not cover this call: for it, the connection is as
		// good as one needing authorization, and the gate denies with
		// source binding (the connection itself stays active for what its
		// grant covers).
		l.Status = store.ConnectionAuthorizationRequired
		return l, true, nil
	case errors.Is(err, errAuthorizationLost):
		// The grant is gone (or moved on): the connection as it is now
		// makes the gate deny with source binding.
		if c.live, _, err = permission.LiveConnection(ctx, b.svc.st, c.bt.ConnectionID); err != nil {
			return gate.Live{}, false, err
		}
		return c.live, false, nil
	case err != nil:
		return gate.Live{}, false, err
	}
	l.ToolSetDigest = c.up.digest
	return l, false, nil
}

// claimable says a call the gate is about to decide may be claimed in the
// decision's own write if it allows: the upstream was looked at, the
// checks before execution (recheck, which then reads nothing) let it run,
// and the deadline leaves the call its time (otherwise the claim after
// the decision refuses it, ErrNoTime, as it always did).
func (b *Broker) claimable(ctx context.Context, c *brokeredCall) bool {
	if !c.up.looked {
		return false
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < b.svc.opts.CallTimeout+recordMargin {
		return false
	}
	r, err := b.recheck(ctx, c, false)
	return err == nil && r == nil
}

// recheck verifies an allowed call again right before it executes (step 4
// of Call): the connection is read again if time passed (waited), then the
// gate's tool-set stage, the credential and the upstream's definition of
// the tool are checked. A non-nil refusal says why the call must not
// run after all.
func (b *Broker) recheck(ctx context.Context, c *brokeredCall, waited bool) (*refusalOf, error) {
	if waited {
		// Time passed since the connection was read: read it again.
		var err error
		if c.live, c.conn, err = permission.LiveConnection(ctx, b.svc.st, c.bt.ConnectionID); err != nil {
			return nil, err
		}
	}
	if d, denied := gate.ToolSetDenial(c.bt.Frozen, gate.Request{ToolName: c.req.ToolName, Connections: map[string]gate.Live{c.bt.ConnectionID: c.live}}); denied {
		return &refusalOf{d.Source, d.Reason}, nil
	}
	if err := b.look(ctx, c.up, c.bt, c.conn, waited); errors.Is(err, errAuthorizationLost) {
		return &refusalOf{gate.SourceBinding, reauthorizeReason(c.bt.ConnectionID)}, nil
	} else if errors.Is(err, ErrStepUp) {
		return &refusalOf{gate.SourceBinding, stepUpReason(c.bt.ConnectionID)}, nil
	} else if err != nil {
		return nil, err
	}
	if c.up.digest != c.bt.Binding.ToolSetDigest || c.up.tools[c.bt.UpstreamName] != c.bt.ToolDigest {
		return &refusalOf{gate.SourceCapability,
			fmt.Sprintf("the upstream's definition of tool %q changed since this run started; refresh the connection and start a new run", c.req.ToolName)}, nil
	}
	return nil, nil
}

// runRefuses reads the run as it is now: a run that has ended (an admin
// ended it, the model proxy halted it) or spent its whole budget since a
// call was allowed runs nothing more, as the gate answers a call asked
// now (approval.RunRefuses).
func (b *Broker) runRefuses(ctx context.Context, runID string) (*refusalOf, error) {
	h, err := b.svc.st.GetHead(ctx, runID)
	if err != nil {
		return nil, err
	}
	if d, refused := approval.RunRefuses(h); refused {
		return &refusalOf{d.Source, d.Reason}, nil
	}
	return nil, nil
}

// refusalOf is why an allowed call must not execute: the source and
// reason of the deny that refuse records.
type refusalOf struct {
	src    gate.Source
	reason string
}

// waitWithin shortens a wait for a human so that, once it ends, the
// request still has time to look at the upstream, run the tool for its
// whole timeout and record it: an approval that lands late is answered
// pending (the runner asks again with the same tool_call_id), never run
// past the caller's cut-off with nobody left to read the result.
func (b *Broker) waitWithin(ctx context.Context, wait time.Duration) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok || wait <= 0 {
		return wait
	}
	left := time.Until(dl) - b.svc.opts.ListTimeout - b.svc.opts.CallTimeout - recordMargin
	return max(min(wait, left), 0)
}

// refuse answers an allowed call that must not execute after all, and
// records the refusal in the ledger.
func (b *Broker) refuse(ctx context.Context, runID string, req permission.Request, src gate.Source, reason string) (CallAnswer, error) {
	batch, err := refusal(req.ToolCallID, req.ToolName, src)
	if err != nil {
		return CallAnswer{}, err
	}
	return b.refuseWith(ctx, runID, batch, src, reason)
}

// refuseWith appends a refusal's batch and answers the deny.
func (b *Broker) refuseWith(ctx context.Context, runID string, batch store.Batch, src gate.Source, reason string) (CallAnswer, error) {
	if _, err := b.perm.Ledger().Append(ctx, runID, func(store.Head) (store.Batch, error) { return batch, nil }); err != nil {
		return CallAnswer{}, err
	}
	return CallAnswer{Answer: permission.Answer{Decision: vocab.Deny, Source: string(src), Reason: reason}}, nil
}

// look opens the credential for the frozen generation and reads the
// upstream's current tools, unless a look within UpstreamToolsTTL is cached.
// again forces a new look (subject to the cache) even if this call looked.
func (b *Broker) look(ctx context.Context, up *upstream, bt permission.BrokeredTool, conn store.Connection, again bool) error {
	if up.looked && !again {
		return nil
	}
	if b.svc.sealer == nil {
		return ErrNoSealer
	}
	if up.cred == nil {
		cred, err := b.svc.credential(ctx, conn, bt.Binding.Generation, false)
		if err != nil {
			return err
		}
		up.cred = &cred
	}
	now := b.svc.opts.Now()
	if c, ok := b.svc.tools.get(bt.ConnectionID, bt.Binding.Generation, b.svc.opts.UpstreamToolsTTL, now); ok {
		up.looked, up.digest, up.tools, up.fetched = true, c.digest, c.tools, c.at
		return nil
	}
	if again {
		// A session lists once (its SDK client would answer from the
		// upstream's cache hints): a second look is a new session.
		up.close(ctx)
	}
	lctx, cancel := context.WithTimeout(ctx, b.svc.opts.ListTimeout)
	defer cancel()
	photo, err := b.listTools(lctx, up, conn.URL)
	if serr := b.svc.scopeChallenge(ctx, conn, bt.Binding.Generation, err, false); serr != nil {
		return serr
	}
	if errors.Is(err, broker.ErrUnauthorized) && conn.CredentialType == CredentialOAuth {
		// The upstream refused the access token before its expiry (revoked,
		// or the clocks disagree): refresh once and look again.
		if err := b.reauthenticate(lctx, up, conn, bt.Binding.Generation); err != nil {
			return err
		}
		photo, err = b.listTools(lctx, up, conn.URL)
		if serr := b.svc.scopeChallenge(ctx, conn, bt.Binding.Generation, err, true); serr != nil {
			return serr
		}
	}
	if err != nil {
		return b.upstreamFailed(ctx, bt, err)
	}
	b.svc.tools.put(bt.ConnectionID, bt.Binding.Generation, photo, now)
	up.looked, up.digest, up.tools, up.fetched = true, photo.Digest, toolDigests(photo), now
	return nil
}

// listTools reads the upstream's tools on up's session, opening it first.
func (b *Broker) listTools(ctx context.Context, up *upstream, endpoint string) (broker.Photo, error) {
	if up.sess == nil {
		sess, err := broker.Connect(ctx, b.svc.opts.Egress, endpoint, *up.cred)
		if err != nil {
			return broker.Photo{}, err
		}
		up.sess = sess
	}
	return up.sess.ListTools(ctx)
}

// reauthenticate refreshes an OAuth connection's access token after the
// upstream refused it, and drops the session that presented the old one.
func (b *Broker) reauthenticate(ctx context.Context, up *upstream, conn store.Connection, gen int) error {
	cred, err := b.svc.credential(ctx, conn, gen, true)
	if err != nil {
		return err
	}
	up.close(ctx)
	up.cred = &cred
	return nil
}

func (b *Broker) upstreamFailed(ctx context.Context, bt permission.BrokeredTool, err error) error {
	// broker's errors carry no credential and no upstream text.
	b.log.WarnContext(ctx, "upstream tools unreadable", "connection", bt.ConnectionID, "err", err)
	return fmt.Errorf("%w: %w", ErrUpstreamUnavailable, err)
}

// recordMargin is the time an execution keeps for recording its outcome
// after the call's own timeout: the claim needs CallTimeout plus this.
const recordMargin = 2 * time.Second

// execute claims the call's one execution (unless its decision did, at
// claimed), calls the upstream and records the outcome with tool.brokered.
func (b *Broker) execute(ctx context.Context, runID string, req permission.Request, bt permission.BrokeredTool, conn store.Connection, up *upstream, args map[string]any, ans permission.Answer, in inputAnswer, claimed time.Time) (CallAnswer, error) {
	claimedAt, err := b.claimOnce(ctx, runID, req, bt, ans, claimed)
	if err != nil {
		return CallAnswer{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, b.svc.opts.CallTimeout)
	defer cancel()
	start := b.svc.opts.Now()
	var res broker.Result
	if up.sess == nil {
		up.sess, err = broker.Connect(cctx, b.svc.opts.Egress, conn.URL, *up.cred)
	}
	if err == nil {
		up.sess.Completed(in.done...)
		up.sess.DeferTasks()
		res, err = up.sess.CallTool(cctx, bt.UpstreamName, args)
	}
	serr := b.svc.scopeChallenge(ctx, conn, bt.Binding.Generation, err, false)
	if serr == nil && errors.Is(err, broker.ErrUnauthorized) && conn.CredentialType == CredentialOAuth {
		// Refused at the door: the tool did not run, so the one execution
		// this call claimed is still unspent. Refresh once and call again.
		if err = b.reauthenticate(cctx, up, conn, bt.Binding.Generation); err == nil {
			if up.sess, err = broker.Connect(cctx, b.svc.opts.Egress, conn.URL, *up.cred); err == nil {
				up.sess.Completed(in.done...)
				up.sess.DeferTasks()
				res, err = up.sess.CallTool(cctx, bt.UpstreamName, args)
			}
		}
		serr = b.svc.scopeChallenge(ctx, conn, bt.Binding.Generation, err, true)
	}
	if errors.Is(serr, ErrStepUp) {
		// Refused at the door for want of scopes: the tool did not run, so
		// the claim is released with the refusal. A retry of this
		// tool_call_id re-verifies (after the re-authorization the run's
		// frozen binding no longer matches) and never finds it "executed".
		batch, err := unclaim(b.svc.st, runID, req.ToolCallID, req.ToolName, gate.SourceBinding, claimedAt)
		if err != nil {
			return CallAnswer{}, err
		}
		return b.refuseWith(ctx, runID, batch, gate.SourceBinding, stepUpReason(bt.ConnectionID))
	}
	if serr != nil {
		err = serr
	}
	if h, ok := up.sess.PendingTask(); ok && errors.Is(err, broker.ErrTaskPending) {
		return b.parkTask(ctx, runID, req, h, claimedAt)
	}
	if link, ok := waitingLink(up.sess.InputRequests()); ok && in.rounds < MaxInputRounds {
		return b.park(ctx, runID, req, bt, conn, claimedAt, link)
	}
	latency := b.svc.opts.Now().Sub(start).Milliseconds()
	if err != nil {
		res = failedResult(err)
	}
	body, err := json.Marshal(res)
	if err != nil {
		// The tool ran: whatever fails from here on is a record not made.
		return CallAnswer{}, fmt.Errorf("%w: encode result: %w", ErrNotRecorded, err)
	}
	out := outcome{ResultDigest: redact.DigestBytes(body), LatencyMS: latency, IsError: res.IsError}
	if err := b.record(ctx, runID, req, bt, out, false, elicitations(up.sess.InputRequests())); err != nil {
		b.log.ErrorContext(ctx, "brokered call executed but not recorded; result withheld", "run", runID, "call", req.ToolCallID, "err", err)
		return CallAnswer{}, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	return CallAnswer{Answer: ans, Result: &res, LatencyMS: &latency}, nil
}

// claimOnce is the claim of the call's one execution made at claimedAt:
// the decision's (non-zero claimed), or one made now (ErrAlreadyExecuted
// when another request claimed it first).
func (b *Broker) claimOnce(ctx context.Context, runID string, req permission.Request, bt permission.BrokeredTool, ans permission.Answer, claimed time.Time) (claimedAt time.Time, err error) {
	if !claimed.IsZero() {
		return claimed, nil
	}
	claimedAt = b.svc.opts.Now()
	prev, err := claim(ctx, b.svc.st, runID, req.ToolCallID, ans.Decision, claimedAt, b.svc.opts.CallTimeout+recordMargin)
	switch {
	case errors.Is(err, call.ErrExecuted):
		return time.Time{}, b.ranAlready(ctx, runID, req, bt, prev)
	case err != nil:
		return time.Time{}, err
	}
	return claimedAt, nil
}

// failedResult is the tool error the model sees for an upstream failure
// (the tool's failure). broker's error texts hold no credential and no
// upstream text.
func failedResult(err error) broker.Result {
	var ue *broker.UpstreamError
	msg := "the upstream call failed; the tool may have run"
	switch {
	case errors.As(err, &ue) && ue.Op == "connect":
		// No session was opened: the call never reached the upstream.
		msg = "the upstream call failed before reaching the upstream, so the tool did not run: " + ue.Error()
	case errors.As(err, &ue):
		msg = "the upstream call failed, and the tool may have run: " + ue.Error()
	case errors.Is(err, errAuthorizationLost):
		// The upstream refused the token, and no fresh one could be had.
		msg = "the upstream refused the connection's OAuth grant, so the tool did not run; its owner must re-authorize it"
	}
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": msg}})
	return broker.Result{Content: content, IsError: true}
}

// record appends tool.brokered for an executed call with its outcome
// stored on its record in the same write (or, stored, for an outcome a
// broker before this one stored on its own), retried until it lands or
// the request's deadline passes. It runs on past a caller who gave up: the
// tool ran, so its record must land.
func (b *Broker) record(ctx context.Context, runID string, req permission.Request, bt permission.BrokeredTool, out outcome, stored bool, inputs []redact.Elicitation) error {
	rctx, cancel := recordContext(ctx)
	defer cancel()
	build := executed
	if stored {
		build = brokered
	}
	batch, err := build(b.svc.st, runID, redact.ToolBrokered{
		ToolCallID: req.ToolCallID, ToolName: req.ToolName, ConnectionID: bt.ConnectionID,
		LatencyMS: out.LatencyMS, ResultDigest: out.ResultDigest, IsError: out.IsError,
		Elicitations: inputs,
	})
	if err != nil {
		return err
	}
	err = retry(rctx, func() error {
		_, err := b.perm.Ledger().Append(rctx, runID, func(store.Head) (store.Batch, error) { return batch, nil })
		return err
	})
	if errors.Is(err, call.ErrBrokeredRecorded) {
		return nil // a concurrent retry appended it
	}
	if err != nil {
		return fmt.Errorf("connection: record brokered call %s of %s: %w", req.ToolCallID, runID, err)
	}
	return nil
}

// ranAlready answers a call whose one execution was claimed before: with
// its recorded outcome, after appending tool.brokered if the request that
// ran it stored the outcome on its own (a broker before ExecutedOp), or,
// once the claim has lapsed without an outcome (the broker that claimed
// it stopped, or could not record), after recording the call as failed.
func (b *Broker) ranAlready(ctx context.Context, runID string, req permission.Request, bt permission.BrokeredTool, rec store.Call) error {
	out, known := outcomeOf(rec)
	switch {
	case known && !rec.Brokered:
		// The input requests of the run that executed were not stored with
		// its outcome: this completed record has none.
		if err := b.record(ctx, runID, req, bt, out, true, nil); err != nil {
			b.log.ErrorContext(ctx, "brokered call's record still incomplete", "run", runID, "call", req.ToolCallID, "err", err)
			return fmt.Errorf("%w: %w", ErrNotRecorded, err)
		}
	case !known && b.lapsed(rec):
		return b.recordLapsed(ctx, runID, req, bt)
	}
	return &ExecutedError{Outcome: out, Known: known}
}

// claimLapse is how long after its claim a call without an outcome is
// taken as failed: the call's timeout and its recording margin, and the
// time a request without a deadline keeps trying to record.
func (b *Broker) claimLapse() time.Duration {
	return b.svc.opts.CallTimeout + recordMargin + recordTimeout
}

// lapsed says the claim on rec is older than claimLapse. A claim time
// that does not parse is not lapsed: the call stays unrecorded, never
// run again.
func (b *Broker) lapsed(rec store.Call) bool {
	at, err := time.Parse(store.TimeLayout, rec.ExecutedAt)
	return err == nil && !b.svc.opts.Now().Before(at.Add(b.claimLapse()))
}

// lapsedText is the failed result a lapsed claim is recorded with.
const lapsedText = "the broker that claimed this call stopped before its outcome was recorded; the tool may have run"

// recordLapsed records a call whose claim lapsed without an outcome as
// failed (tool.brokered, is_error, with lapsedText's result), so the
// ledger does not keep an allowed call that never ends. A broker still
// running it past the lapse then finds its own record refused
// (call.ErrNotExecuting) and withholds its result: one outcome is
// recorded, whichever lands first, and none leaves unrecorded.
func (b *Broker) recordLapsed(ctx context.Context, runID string, req permission.Request, bt permission.BrokeredTool) error {
	content, _ := json.Marshal([]map[string]string{{"type": "text", "text": lapsedText}})
	body, err := json.Marshal(broker.Result{Content: content, IsError: true})
	if err != nil {
		return err
	}
	out := outcome{ResultDigest: redact.DigestBytes(body), IsError: true}
	err = b.record(ctx, runID, req, bt, out, false, nil)
	if errors.Is(err, call.ErrNotExecuting) {
		// Another request recorded an outcome first: answer with it.
		rec, gerr := b.svc.st.GetCall(ctx, runID, req.ToolCallID)
		if gerr != nil {
			return gerr
		}
		out, known := outcomeOf(rec)
		return &ExecutedError{Outcome: out, Known: known}
	}
	if err != nil {
		b.log.ErrorContext(ctx, "lapsed brokered call not recorded", "run", runID, "call", req.ToolCallID, "err", err)
		return fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	b.log.WarnContext(ctx, "brokered call's claim lapsed without an outcome; recorded as failed", "run", runID, "call", req.ToolCallID)
	return &ExecutedError{Outcome: out, Known: true}
}

// recordTimeout bounds recording when the request has no deadline.
const recordTimeout = 10 * time.Second

// recordContext is ctx without its cancellation, with its deadline (or
// recordTimeout).
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(base, dl)
	}
	return context.WithTimeout(base, recordTimeout)
}

// retry runs write until it succeeds, fails with a condition (which
// another try cannot change), or ctx ends; between tries it backs off.
func retry(ctx context.Context, write func() error) error {
	wait := 20 * time.Millisecond
	for {
		err := write()
		if err == nil || !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// decodeArgs decodes a call's input as the upstream's arguments, numbers
// kept as written. The permission service validates the same input.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil || args == nil {
		return nil, &permission.InvalidError{Message: "input: must be a JSON object"}
	}
	return args, nil
}

// reauthorizeReason is the denial of a call whose connection lost its
// OAuth grant.
func reauthorizeReason(id string) string {
	return fmt.Sprintf("connection %s needs re-authorization (its OAuth grant was refused or revoked): its owner runs `fluidbox connections authorize %s`; then start a new run", id, id)
}
