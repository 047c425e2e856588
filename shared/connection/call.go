package connection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Errors of a brokered call the API maps to its codes.
var (
	// ErrSandboxTool: the tool is a sandbox tool; the runner asks
	// /permission and runs it itself.
	ErrSandboxTool = errors.New("connection: not a brokered tool")
	// ErrAlreadyExecuted: the call was executed already; its result is not
	// kept, and the tool is not run again.
	ErrAlreadyExecuted = errors.New("connection: tool call already executed")
	// ErrUpstreamUnavailable: the upstream's tools could not be read before
	// the decision; nothing was recorded and the tool was not called.
	ErrUpstreamUnavailable = errors.New("connection: upstream unavailable")
	// ErrNotRecorded: the tool ran but its tool.brokered event could not be
	// appended; the result is withheld (nothing unrecorded leaves).
	ErrNotRecorded = errors.New("connection: brokered call not recorded")
)

// CallAnswer is the answer of POST /v1/sessions/{id}/tools/call: the gate's
// answer, and on allow the upstream's CallToolResult and the latency.
type CallAnswer struct {
	permission.Answer
	Result    *broker.Result `json:"result,omitempty"`
	LatencyMS *int64         `json:"latency_ms,omitempty"`
}

// Broker calls brokered tools for runs, through the gate.
type Broker struct {
	svc  *Service
	perm *permission.Service
	log  *slog.Logger
}

// NewBroker returns a broker over the connection and permission services.
func NewBroker(svc *Service, perm *permission.Service, log *slog.Logger) *Broker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Broker{svc: svc, perm: perm, log: log}
}

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
//     at most once, the tool is called with a bounded timeout, and
//     tool.brokered is appended.
func (b *Broker) Call(ctx context.Context, runID string, req permission.Request, wait time.Duration) (CallAnswer, error) {
	bt, brokered, err := b.perm.BrokeredTool(ctx, runID, req.ToolName)
	if err != nil {
		return CallAnswer{}, err
	}
	if !brokered {
		sandbox, err := b.perm.SandboxTool(ctx, runID, req.ToolName)
		if err != nil {
			return CallAnswer{}, err
		}
		if sandbox {
			return CallAnswer{}, ErrSandboxTool
		}
		// Not frozen at all: the gate denies it (capability) and records it.
		ans, err := b.perm.Decide(ctx, runID, req, 0)
		if err != nil {
			return CallAnswer{}, err
		}
		if ans.Decision == permission.DecisionAllow {
			return CallAnswer{}, fmt.Errorf("connection: the gate allowed %q, which is not a brokered tool of run %s", req.ToolName, runID)
		}
		return CallAnswer{Answer: ans}, nil
	}
	args, err := decodeArgs(req.Input)
	if err != nil {
		return CallAnswer{}, err
	}
	recorded, executed, err := b.perm.CallState(ctx, runID, req)
	if err != nil {
		return CallAnswer{}, err
	}
	if executed {
		return CallAnswer{}, ErrAlreadyExecuted
	}
	live, conn, err := permission.LiveConnection(ctx, b.svc.st, bt.ConnectionID)
	if err != nil {
		return CallAnswer{}, err
	}
	up := &upstream{}
	defer up.close(ctx)

	var ans permission.Answer
	waited := recorded
	if !recorded {
		lives := map[string]gate.Live{bt.ConnectionID: live}
		pre, err := b.perm.Preview(ctx, runID, req, lives)
		if err != nil {
			return CallAnswer{}, err
		}
		if pre.Outcome != gate.OutcomeDeny {
			if err := b.look(ctx, up, bt, conn, false); err != nil {
				return CallAnswer{}, err
			}
			l := live
			l.ToolSetDigest = up.digest
			lives[bt.ConnectionID] = l
		}
		if ans, err = b.perm.DecideBrokered(ctx, runID, req, 0, lives); err != nil {
			return CallAnswer{}, err
		}
		if ans.Decision == permission.DecisionPending && wait > 0 {
			waited = true
			if ans, err = b.perm.DecideBrokered(ctx, runID, req, wait, lives); err != nil {
				return CallAnswer{}, err
			}
		}
	} else {
		// A retry or an approved call: the recorded answer stands (the gate
		// is not asked again), and the checks below run before execution.
		if ans, err = b.perm.DecideBrokered(ctx, runID, req, wait, nil); err != nil {
			return CallAnswer{}, err
		}
	}
	if ans.Decision != permission.DecisionAllow {
		return CallAnswer{Answer: ans}, nil
	}

	if waited {
		// Time passed since the connection was read: read it again.
		if live, conn, err = permission.LiveConnection(ctx, b.svc.st, bt.ConnectionID); err != nil {
			return CallAnswer{}, err
		}
	}
	if src, reason := checkBinding(bt, live); src != "" {
		return b.refuse(ctx, runID, req, src, reason)
	}
	if err := b.look(ctx, up, bt, conn, waited); err != nil {
		return CallAnswer{}, err
	}
	if up.digest != bt.Binding.ToolSetDigest || up.tools[bt.UpstreamName] != bt.ToolDigest {
		return b.refuse(ctx, runID, req, gate.SourceCapability,
			fmt.Sprintf("the upstream's definition of tool %q changed since this run started; refresh the connection and start a new run", req.ToolName))
	}
	return b.execute(ctx, runID, req, bt, conn, up, args, ans)
}

// checkBinding is stage 2's binding check, repeated right before an allowed
// call executes: the call may have been decided long before (approval).
func checkBinding(bt permission.BrokeredTool, l gate.Live) (gate.Source, string) {
	b := bt.Binding
	switch {
	case b.ConnectionID == "":
		return gate.SourceBinding, "the tool has no frozen binding to its connection"
	case !l.Found:
		return gate.SourceBinding, "the tool's connection no longer exists"
	case l.Status != gate.ConnectionActive:
		return gate.SourceBinding, "the tool's connection is not active"
	case l.Generation != b.Generation:
		return gate.SourceBinding, "the tool's connection was re-authorized since this run started; start a new run"
	case !l.OwnerActive:
		return gate.SourceBinding, "the owner of the tool's connection is no longer an active member"
	case l.ToolSetDigest != b.ToolSetDigest:
		return gate.SourceCapability, "the tools of the connection changed since this run started; refresh the connection and start a new run"
	}
	return "", ""
}

// refuse answers an allowed call that must not execute after all, and
// records the refusal in the ledger.
func (b *Broker) refuse(ctx context.Context, runID string, req permission.Request, src gate.Source, reason string) (CallAnswer, error) {
	ans := permission.Answer{Decision: permission.DecisionDeny, Source: string(src), Reason: reason}
	if err := b.perm.RecordRefusal(ctx, runID, req, ans); err != nil {
		return CallAnswer{}, err
	}
	return CallAnswer{Answer: ans}, nil
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
		cred, err := seal.OpenCredential(ctx, b.svc.sealer, conn.Sealed, seal.Context{ConnectionID: bt.ConnectionID, Generation: bt.Binding.Generation})
		if err != nil {
			return fmt.Errorf("connection: open credential of %s: %w", bt.ConnectionID, err)
		}
		up.cred = &cred
	}
	now := b.svc.opts.Now()
	if c, ok := b.svc.tools.get(bt.ConnectionID, bt.Binding.Generation, b.svc.opts.UpstreamToolsTTL, now); ok {
		up.looked, up.digest, up.tools, up.fetched = true, c.digest, c.tools, c.at
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, b.svc.opts.ListTimeout)
	defer cancel()
	if up.sess == nil {
		sess, err := broker.Connect(lctx, b.svc.opts.Egress, conn.URL, *up.cred)
		if err != nil {
			return b.upstreamFailed(ctx, bt, err)
		}
		up.sess = sess
	}
	photo, err := up.sess.ListTools(lctx)
	if err != nil {
		return b.upstreamFailed(ctx, bt, err)
	}
	b.svc.tools.put(bt.ConnectionID, bt.Binding.Generation, photo, now)
	up.looked, up.digest, up.tools, up.fetched = true, photo.Digest, toolDigests(photo), now
	return nil
}

func (b *Broker) upstreamFailed(ctx context.Context, bt permission.BrokeredTool, err error) error {
	// broker's errors carry no credential and no upstream text.
	b.log.WarnContext(ctx, "upstream tools unreadable", "connection", bt.ConnectionID, "err", err)
	return fmt.Errorf("%w: %w", ErrUpstreamUnavailable, err)
}

// execute claims the call's one execution, calls the upstream and records
// tool.brokered.
func (b *Broker) execute(ctx context.Context, runID string, req permission.Request, bt permission.BrokeredTool, conn store.Connection, up *upstream, args map[string]any, ans permission.Answer) (CallAnswer, error) {
	err := b.perm.ClaimExecution(ctx, runID, req.ToolCallID)
	if errors.Is(err, permission.ErrAlreadyExecuted) {
		return CallAnswer{}, ErrAlreadyExecuted
	}
	if err != nil {
		return CallAnswer{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, b.svc.opts.CallTimeout)
	defer cancel()
	start := time.Now()
	var res broker.Result
	if up.sess == nil {
		up.sess, err = broker.Connect(cctx, b.svc.opts.Egress, conn.URL, *up.cred)
	}
	if err == nil {
		res, err = up.sess.CallTool(cctx, bt.UpstreamName, args)
	}
	latency := time.Since(start).Milliseconds()
	if err != nil {
		// An upstream failure is the tool's failure: the model sees a tool
		// error. broker's error texts hold no credential and no upstream
		// text.
		var ue *broker.UpstreamError
		msg := "the upstream call failed"
		if errors.As(err, &ue) {
			msg = "the upstream call failed: " + ue.Error()
		}
		content, _ := json.Marshal([]map[string]string{{"type": "text", "text": msg}})
		res = broker.Result{Content: content, IsError: true}
	}
	body, err := json.Marshal(res)
	if err != nil {
		return CallAnswer{}, fmt.Errorf("connection: encode result: %w", err)
	}
	err = b.perm.RecordBrokered(ctx, runID, redact.ToolBrokered{
		ToolCallID: req.ToolCallID, ToolName: req.ToolName, ConnectionID: bt.ConnectionID,
		LatencyMS: latency, ResultDigest: redact.DigestBytes(body), IsError: res.IsError,
	})
	if err != nil {
		b.log.ErrorContext(ctx, "brokered call executed but not recorded; result withheld", "run", runID, "call", req.ToolCallID, "err", err)
		return CallAnswer{}, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	return CallAnswer{Answer: ans, Result: &res, LatencyMS: &latency}, nil
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
