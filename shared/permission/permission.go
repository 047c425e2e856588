// Package permission answers a runner's "may this tool call happen?" for a
// run: it loads the run's frozen state (cached: it never changes), asks the
// pure gate, and records the answer with its events in one ledger append.
//
// What it guarantees:
//   - One answer per (run, tool_call_id). The call record is written in the
//     same transaction as tool.requested and tool.decision, with
//     attribute_not_exists; a retry finds it and returns it, writing
//     nothing. The same tool_call_id with a different request (input, cwd,
//     resolved paths: anything the decision could have read) is a
//     conflict.
//   - Session grants are read before the gate decides, and only when it
//     says a grant could answer the call; a decision a grant answered is
//     recorded only while the grant stands.
//   - The decision is made on the head it commits against: the append is
//     conditioned on the run's counter, so an end, a spend or another
//     decision that lands first makes the gate decide again.
//   - Fail closed: if anything cannot be read or written, the caller gets
//     an error (503 on the wire), nothing is recorded, and the runner
//     treats that as deny.
//   - A run's shadow policy is evaluated on every recorded decision (not on
//     a preview or a model request's server tools, which record nothing);
//     where it differs, the decision's own event carries it and its count
//     is written in the same append, never in a write of its own.
//   - Inputs never reach the ledger or the call record, only their digest.
//     A require_approval keeps the input on the approval row, for the
//     human who decides; nowhere else.
package permission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/policy/tree"
	"github.com/fluidbox/fluidbox/shared/ratelimit"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/trust"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Request is the body of POST /v1/sessions/{id}/permission.
type Request struct {
	ToolCallID string          `json:"tool_call_id"`
	ToolName   string          `json:"tool_name"`
	Input      json.RawMessage `json:"input"`
	// Cwd is the runner's working directory; relative paths of the input
	// resolve against it (optional; the hook sends Claude Code's cwd).
	Cwd string `json:"cwd,omitempty"`
	// ResolvedPaths maps path-bearing input fields to the paths the
	// sandbox resolved them to (realpath); a file call is allowed only if
	// both are allowed, denied if either is (optional).
	ResolvedPaths map[string]string `json:"resolved_paths,omitempty"`
	// PathKinds maps path-bearing input fields to what the sandbox found
	// there: "file", "dir" or "absent" (optional).
	PathKinds map[string]string `json:"path_kinds,omitempty"`
	// SearchReport is what the sandbox found under the directory a Glob
	// walks (optional; package tree). Only a Glob's decision reads it.
	SearchReport *tree.Report `json:"search_report,omitempty"`
	// AgentID and AgentType identify the subagent that makes the call
	// (Claude Code's hook input); both empty for the run's main agent,
	// AgentType alone for the main thread of a claude --agent session.
	// They are recorded on tool.requested and matched by policies
	// (match.agent_type). The runner reports them, and the model chose
	// the type when it started the subagent (Agent's subagent_type).
	AgentID   string `json:"agent_id,omitempty"`
	AgentType string `json:"agent_type,omitempty"`
}

// checkAgent validates the subagent identity: bounded and printable (it
// is recorded and shown as it came). Either may come alone: agent_type
// without agent_id is the main thread of a claude --agent session.
func checkAgent(req Request) error {
	for _, f := range []struct{ name, v string }{{"agent_id", req.AgentID}, {"agent_type", req.AgentType}} {
		if len(f.v) > maxIDLen || strings.IndexFunc(f.v, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) >= 0 {
			return &InvalidError{fmt.Sprintf("%s: at most %d printable characters", f.name, maxIDLen)}
		}
	}
	return nil
}

// Bounds on the runner's path context.
const (
	maxPathLen       = 4096
	maxResolvedPaths = 8
)

// checkPaths validates the runner's path context: absolute paths, bounded.
func checkPaths(req Request) error {
	if req.Cwd != "" && (len(req.Cwd) > maxPathLen || req.Cwd[0] != '/' || strings.IndexByte(req.Cwd, 0) >= 0) {
		return &InvalidError{fmt.Sprintf("cwd: must be an absolute path of at most %d bytes", maxPathLen)}
	}
	if len(req.ResolvedPaths) > maxResolvedPaths {
		return &InvalidError{fmt.Sprintf("resolved_paths: at most %d fields", maxResolvedPaths)}
	}
	for k, v := range req.ResolvedPaths {
		if len(k) > maxIDLen || v == "" || len(v) > maxPathLen || v[0] != '/' || strings.IndexByte(v, 0) >= 0 {
			return &InvalidError{fmt.Sprintf("resolved_paths: each value must be an absolute path of at most %d bytes", maxPathLen)}
		}
	}
	if len(req.PathKinds) > maxResolvedPaths {
		return &InvalidError{fmt.Sprintf("path_kinds: at most %d fields", maxResolvedPaths)}
	}
	for k, v := range req.PathKinds {
		if len(k) > maxIDLen || v != policy.KindFile && v != policy.KindDir && v != policy.KindAbsent {
			return &InvalidError{`path_kinds: each value must be "file", "dir" or "absent"`}
		}
	}
	if req.SearchReport != nil {
		if err := req.SearchReport.Check(); err != nil {
			return &InvalidError{"search_report: " + err.Error()}
		}
	}
	return nil
}

// InvalidError is a malformed request.
type InvalidError struct{ Message string }

func (e *InvalidError) Error() string { return e.Message }

// ErrConflict: the tool_call_id was already used with a different input.
var ErrConflict = errors.New("permission: tool_call_id reused with a different input")

// Limits on a request's identifiers.
const (
	maxIDLen = 256
	// MaxWait is the longest a request may wait for a pending answer.
	MaxWait = 25 * time.Second
)

// Service answers permission requests.
type Service struct {
	led       *ledger.Ledger
	st        *store.Store
	now       func() time.Time
	frozen    *frozenCache
	approvals *approval.Service
	sched     approval.Scheduler
	log       *slog.Logger
	// maxPending is how many approvals a run may have waiting; 0 is the
	// gate's default.
	maxPending int
}

// LimitPending sets how many approvals one run may have waiting at once,
// and all the runs of one trigger source together (sourceOf); n <= 0 is
// gate.DefaultMaxPendingApprovals. Past it, a require_approval is denied
// (source approval_limit) instead of filed.
func (s *Service) LimitPending(n int) { s.maxPending = n }

func (s *Service) pendingLimit() int {
	if s.maxPending <= 0 {
		return gate.DefaultMaxPendingApprovals
	}
	return s.maxPending
}

// sourceOf names the source whose runs' pending approvals are capped
// together, so that a fork getting a run per push cannot fill a human's
// inbox three runs at a time: a pull request run's repository and author
// (runs whose author the delivery did not name share one count per
// repository), another triggered run's trigger (a schedule: its runs carry
// the repository too, but no author, and must not share the authorless
// pull requests' count). A run a person or the operator created has only
// its own cap: "".
func sourceOf(h store.Head) string {
	if g := h.GitHub; g != nil && g.Event != scheduleEvent {
		author := g.Author
		if author == "" {
			author = "unknown"
		}
		return "github:" + g.Repository + "#author:" + author
	}
	if h.Trigger != "" && h.Trigger != "manual" {
		return "invoker:" + h.Invoker
	}
	return ""
}

// scheduleEvent is the GitHub trigger event of a scheduled run
// (schedule/firing.Trigger, which this package cannot import).
const scheduleEvent = "schedule"

// NewService returns a permission service. sched arranges each new
// approval's expiry; lazy expiry and the sweep cover it if that fails.
func NewService(led *ledger.Ledger, approvals *approval.Service, sched approval.Scheduler, log *slog.Logger, now func() time.Time) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{led: led, st: led.Store(), now: now, frozen: newFrozenCache(led.Store()), approvals: approvals, sched: sched, log: log}
}

// Ledger is the ledger the service appends to.
func (s *Service) Ledger() *ledger.Ledger { return s.led }

// Decide answers one tool call for runID. With wait > 0, a pending answer
// waits up to wait for the call to be settled.
func (s *Service) Decide(ctx context.Context, runID string, req Request, wait time.Duration) (Answer, error) {
	return s.decide(ctx, runID, req, wait, nil)
}

// decide is Decide; live, when not nil, is the connections' live state the
// broker read for a brokered call (see DecideBrokered). When nil, a
// brokered tool's connection is read from the table here.
func (s *Service) decide(ctx context.Context, runID string, req Request, wait time.Duration, live map[string]gate.Live) (Answer, error) {
	ans, _, err := s.decideClaiming(ctx, runID, req, wait, live, "")
	return ans, err
}

// decideClaiming is decide; a brokered call whose decision this request
// records as allow is recorded claimed at claimAt when that is not ""
// (claimed: see DecideAndClaim).
func (s *Service) decideClaiming(ctx context.Context, runID string, req Request, wait time.Duration, live map[string]gate.Live, claimAt string) (ans Answer, claimed bool, err error) {
	cr, err := checkRequest(req)
	if err != nil {
		return Answer{}, false, err
	}
	input := cr.input
	fr, err := s.frozen.get(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return Answer{}, false, run.ErrNotFound
	}
	if err != nil {
		return Answer{}, false, err
	}
	if live == nil {
		if live, err = s.liveFor(ctx, fr, req.ToolName); err != nil {
			return Answer{}, false, err
		}
	}

	var recorded Answer
	var created store.Approval
	asked := Asked{RunID: runID, ToolCallID: req.ToolCallID, ToolName: req.ToolName, Input: input, Digest: cr.digest, Identity: cr.identity, AgentID: req.AgentID, AgentType: req.AgentType}
	sourceFull := false
	build := func(h store.Head) (store.Batch, error) {
		run := fr.recordedRun(h, s.maxPending)
		run.SourceFull = sourceFull
		d, err := s.gateDecide(ctx, runID, run, gate.Request{ToolName: req.ToolName, Input: input, Connections: live, Cwd: req.Cwd, Resolved: req.ResolvedPaths, Kinds: req.PathKinds, Report: req.SearchReport, AgentType: req.AgentType})
		if err != nil {
			return store.Batch{}, err
		}
		pin := fr.pin(req.ToolName)
		pin.Source, pin.SourceLimit = sourceOf(h), s.pendingLimit()
		pin.ClaimAt = claimAt
		if d.Outcome == policy.VerdictRequireApproval {
			pin.ApprovalID = ids.New("apr_")
		}
		rec, err := Record(s.st, h, asked, d, pin, s.now())
		recorded, created = rec.Answer, rec.Approval
		return rec.Batch, err
	}
	// A decision's own conditions may send it back to the gate: the
	// source's runs have as many approvals waiting as they may (decide
	// again knowing it, which denies instead of filing), or the grant
	// that answered it was revoked meanwhile (decide again on the grants
	// as they are now). Past a few rounds the call is not decided (503).
	for range maxRedecide {
		_, err = s.led.Append(ctx, runID, build)
		switch {
		case errors.Is(err, call.ErrSourceFull):
			sourceFull = true
			continue
		case errors.Is(err, call.ErrGrantRevoked):
			continue
		}
		break
	}
	if errors.Is(err, call.ErrSourceFull) || errors.Is(err, call.ErrGrantRevoked) {
		return Answer{}, false, fmt.Errorf("permission: run %s: decided %d times and every record was refused: %w", runID, maxRedecide, store.ErrUnavailable)
	}
	switch {
	case err == nil:
		claimed = recorded.Decision == vocab.Allow && claimAt != ""
		if recorded.Decision == vocab.Pending {
			s.approvals.Observed(ctx, store.Approval{}, created)
			at, err := time.Parse(store.TimeLayout, created.ExpiresAt)
			if err == nil {
				err = s.sched.Schedule(ctx, recorded.ApprovalID, at)
			}
			if err != nil {
				s.log.ErrorContext(ctx, "schedule approval expiry; lazy expiry and the sweep remain", "approval", recorded.ApprovalID, "err", err)
			}
		}
	case errors.Is(err, call.ErrRecorded):
		// The refused write carries the record it met: a retry costs no
		// read of its own.
		c, ok := store.RecordedCall(err, runID, req.ToolCallID)
		if !ok {
			if c, err = s.st.GetCall(ctx, runID, req.ToolCallID); err != nil {
				return Answer{}, false, err
			}
		}
		recorded, err = s.replayOf(ctx, runID, fr, req, cr, c)
		if err != nil {
			return Answer{}, false, err
		}
	case errors.Is(err, store.ErrNotFound):
		return Answer{}, false, run.ErrNotFound
	default:
		return Answer{}, false, err
	}
	if recorded.Decision == vocab.Pending && wait > 0 {
		ans, err := s.await(ctx, runID, req, fr, cr, min(wait, MaxWait), recorded)
		return ans, false, err
	}
	return recorded, claimed, nil
}

// gateDecide asks the pure gate about a call on run. The run's session
// grants are read here, before the Decide that uses them, and only when the
// gate says grants could change its answer (Decision.Grantable), so the
// common paths read nothing; a failed read fails the call (503), never
// decides it. A stage that panicked is logged: the gate denied the call,
// and someone must learn why.
func (s *Service) gateDecide(ctx context.Context, runID string, run *gate.Run, req gate.Request) (gate.Decision, error) {
	d := gate.Decide(run, req)
	if d.Grantable {
		held, err := s.st.Grants(ctx, runID)
		if err != nil {
			return gate.Decision{}, err
		}
		run.Grants = grantSet(held)
		d = gate.Decide(run, req)
	}
	if d.Panicked {
		s.log.ErrorContext(ctx, "a gate stage panicked; the call is denied (the gate recovers only its own stages)", "run", runID, "tool", req.ToolName, "stage", d.Stage)
	}
	return d, nil
}

// grantSet is the gate's view of a run's stored grants.
func grantSet(held []store.Grant) policy.Grants {
	keys := make([]policy.GrantKey, len(held))
	for i, g := range held {
		keys[i] = policy.GrantKey{RuleID: g.RuleID, ScopeKey: g.ScopeKey}
	}
	return policy.NewGrants(keys...)
}

// checked is a well-formed request: its input decoded, the input's digest
// (what the ledger and the model proxy's check know the call by) and its
// identity.
type checked struct {
	input  any
	digest redact.Digest
	// identity digests everything the decision reads (identityOf): a
	// retry with the same tool_call_id is the same call only if its
	// identity is the same.
	identity redact.Digest
}

// checkRequest validates a request and decodes its input.
func checkRequest(req Request) (checked, error) {
	if req.ToolCallID == "" || len(req.ToolCallID) > maxIDLen {
		return checked{}, &InvalidError{fmt.Sprintf("tool_call_id: must be 1 to %d characters", maxIDLen)}
	}
	if req.ToolName == "" || len(req.ToolName) > maxIDLen {
		return checked{}, &InvalidError{fmt.Sprintf("tool_name: must be 1 to %d characters", maxIDLen)}
	}
	// These are recorded in the ledger as the sandbox sent them: none may
	// carry a credential of fluidbox's there (never echoed back either).
	for _, f := range []struct{ name, v string }{{"tool_call_id", req.ToolCallID}, {"tool_name", req.ToolName}, {"agent_id", req.AgentID}, {"agent_type", req.AgentType}} {
		if auth.HoldsCredential(f.v) {
			return checked{}, &InvalidError{f.name + ": holds what looks like a fluidbox credential, which the ledger must never record"}
		}
	}
	if err := checkPaths(req); err != nil {
		return checked{}, err
	}
	if err := checkAgent(req); err != nil {
		return checked{}, err
	}
	raw := req.Input
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	input, err := decodeJSON(raw)
	if err != nil {
		return checked{}, &InvalidError{"input: must be a JSON object"}
	}
	if _, ok := input.(map[string]any); !ok {
		return checked{}, &InvalidError{"input: must be a JSON object"}
	}
	// The input's canonical JSON, encoded once: its digest, and the
	// input's part of the identity (an input can be large: a file's
	// content).
	canonical, err := json.Marshal(input)
	if err != nil {
		return checked{}, &InvalidError{"input: cannot be digested"}
	}
	identity, err := identityOf(req, canonical)
	if err != nil {
		return checked{}, &InvalidError{"request: cannot be digested"}
	}
	return checked{input: input, digest: redact.DigestBytes(canonical), identity: identity}, nil
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// identityOf is the digest that decides whether a repeated tool_call_id is
// the same call: the canonical JSON of the whole request body, every field
// of Request as it reads it, with the input as decoded and encoded again
// (canonicalInput, which checkRequest also digests). It covers what
// the gate reads by construction: a field added to Request (a path's kind,
// a subagent's id) is in it without anyone remembering to add it, so a
// retry that differs in anything the decision could have read (another
// cwd, another resolved path: a symlink to .env) is refused as a conflict
// instead of being answered with a decision made about another call.
func identityOf(req Request, canonicalInput json.RawMessage) (redact.Digest, error) {
	req.Input = nil
	b, err := json.Marshal(req)
	if err != nil {
		return redact.Digest{}, err
	}
	body, err := decodeJSON(b)
	if err != nil {
		return redact.Digest{}, err
	}
	m, ok := body.(map[string]any)
	if !ok {
		return redact.Digest{}, fmt.Errorf("permission: request encodes as %T", body)
	}
	// Encoded as it is: canonical already, so the whole is what encoding
	// the decoded input here would give (FuzzIdentityUnchanged).
	m["input"] = canonicalInput
	return redact.DigestJSON(m)
}

// pin is what an approval of toolName records about the run it pends in
// (without the approval's id).
func (fr *frozenRun) pin(toolName string) Pin {
	p := Pin{ToolDigest: fr.toolDigests[toolName], PolicyDigest: fr.policyDigest}
	if t, ok := fr.brokered[toolName]; ok {
		// A call on a personal connection is decidable only by the run's
		// invoker, who is its owner (run creation checks that).
		p.ConnectionID = t.ConnectionID
		p.Personal = fr.bindings[t.ConnectionID].Owner != ""
	}
	return p
}

// replay returns the answer recorded for a call, after checking that the
// retry is the same call.
func (s *Service) replay(ctx context.Context, runID string, fr *frozenRun, req Request, cr checked) (Answer, error) {
	c, err := s.st.GetCall(ctx, runID, req.ToolCallID)
	if err != nil {
		return Answer{}, err
	}
	return s.replayOf(ctx, runID, fr, req, cr, c)
}

// replayOf is replay of the record c, read already.
func (s *Service) replayOf(ctx context.Context, runID string, fr *frozenRun, req Request, cr checked, c store.Call) (Answer, error) {
	var err error
	if !sameCall(c, req, cr) {
		return Answer{}, ErrConflict
	}
	if c.Decision == vocab.Pending && c.ApprovalID != "" {
		// Lazy expiry: a pending call read past its approval's time is
		// settled as expired first. If that write fails the answer stays
		// pending, which allows nothing.
		apr, err := s.st.GetApproval(ctx, runID, req.ToolCallID)
		if err != nil {
			return Answer{}, err
		}
		if apr = s.approvals.Current(ctx, apr); apr.Status != vocab.ApprovalPending {
			if c, err = s.st.GetCall(ctx, runID, req.ToolCallID); err != nil {
				return Answer{}, err
			}
		}
	}
	a := AnswerOf(c)
	if c.Source == string(gate.SourceSchema) {
		a.Reason = fr.schemaReason(req.ToolName, cr.input)
	}
	if c.UpdatedInputDigest != "" {
		// The record keeps the narrowed input's digest, not the input:
		// the frozen policy derives it again from the same call, and a
		// retry never gets the allow without its narrowing.
		if a.UpdatedInput, err = s.narrowed(ctx, runID, fr, req, cr.input, c.UpdatedInputDigest); err != nil {
			return Answer{}, err
		}
	}
	return a, nil
}

// errNarrowing: a replayed allow's narrowed input could not be derived
// again as recorded; the answer is withheld (503), never given without it.
var errNarrowing = errors.New("permission: the recorded narrowed input cannot be derived again")

// narrowed re-derives the input an allowed call was narrowed to.
func (s *Service) narrowed(ctx context.Context, runID string, fr *frozenRun, req Request, input any, want string) (policy.Input, error) {
	if fr.policy == nil {
		return policy.Input{}, errNarrowing
	}
	h, err := s.st.GetHead(ctx, runID)
	if err != nil {
		return policy.Input{}, err
	}
	env := policy.Env{Workspace: h.Workspace, Cwd: req.Cwd, Resolved: req.ResolvedPaths, Kinds: req.PathKinds, Report: req.SearchReport, AgentType: req.AgentType}
	res := fr.policy.EvaluateIn(env, req.ToolName, input)
	got, err := redact.DigestJSON(res.UpdatedInput)
	if res.Verdict != policy.VerdictAllow || res.UpdatedInput == nil || err != nil || got.String() != want {
		return policy.Input{}, errNarrowing
	}
	return policy.InputOf(res.UpdatedInput), nil
}

// await waits for a pending call to be settled, re-reading its record when
// this process appends to the run and at least every pollEvery (the
// decision may land in another process).
func (s *Service) await(ctx context.Context, runID string, req Request, fr *frozenRun, cr checked, wait time.Duration, pending Answer) (Answer, error) {
	// Only now is the request held open: it takes its run's open-request
	// slot for the wait (a busy run refuses it, 429).
	release, err := ratelimit.Hold(ctx)
	if err != nil {
		return Answer{}, err
	}
	defer release()
	deadline := s.now().Add(wait)
	for {
		left := deadline.Sub(s.now())
		if left <= 0 {
			return pending, nil
		}
		if err := s.led.Wait(ctx, runID, min(left, pollEvery)); err != nil {
			return Answer{}, err
		}
		a, err := s.replay(ctx, runID, fr, req, cr)
		if err != nil {
			return Answer{}, err
		}
		if a.Decision != vocab.Pending {
			return a, nil
		}
	}
}

// sameCall reports whether a call's record was made for this request: the
// same tool, input and identity. A record without an identity (written
// before records kept one) cannot show that the retry is the same call, so
// it is not.
func sameCall(c store.Call, req Request, cr checked) bool {
	return c.ToolName == req.ToolName && c.InputDigest == cr.digest.String() &&
		c.RequestDigest != "" && c.RequestDigest == cr.identity.String()
}

// maxRedecide bounds how often one call goes back to the gate because its
// decision's own condition refused it.
const maxRedecide = 3

// pollEvery bounds how long a waiting request goes without re-reading.
const pollEvery = time.Second

// recordedRun is gateRun with the run's shadow policy, for a decision that
// is recorded: the shadow is evaluated only where its answer is kept, so a
// preview or a model request's judgement costs nothing for it.
func (fr *frozenRun) recordedRun(h store.Head, maxPending int) *gate.Run {
	r := fr.gateRun(h, maxPending)
	r.Shadow, r.ShadowBroken = fr.shadow, fr.shadowBroken
	return r
}

// gateRun combines a run's frozen state with the head a decision is made on.
func (fr *frozenRun) gateRun(h store.Head, maxPending int) *gate.Run {
	return &gate.Run{
		PendingApprovals:    h.PendingApprovals,
		MaxPendingApprovals: maxPending,
		Ended:               h.Status == vocab.Ended,
		AvailableMicros:     h.BudgetAvailable,
		TrustTier:           trust.Tier(h.TrustTier),
		Autonomous:          h.Autonomous,
		Tools:               fr.tools,
		Policy:              fr.policy,
		Bindings:            fr.bindings,
		Workspace:           h.Workspace,
	}
}
