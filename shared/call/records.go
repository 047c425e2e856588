package call

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Answer is a call's recorded answer as the runner sees it.
type Answer struct {
	Decision         vocab.Decision `json:"decision"`
	Source           string         `json:"source,omitempty"`
	Reason           string         `json:"reason,omitempty"`
	RuleID           string         `json:"rule_id,omitempty"`
	ApprovalID       string         `json:"approval_id,omitempty"`
	Verdict          string         `json:"verdict,omitempty"`
	RewrittenVerdict string         `json:"rewritten_verdict,omitempty"`
	// UpdatedInput, on an allow, is the input the tool must run with
	// instead (a narrowed search).
	UpdatedInput policy.Input `json:"updated_input,omitzero"`
}

// AnswerOf is the answer a call record holds.
func AnswerOf(c store.Call) Answer {
	return Answer{Decision: c.Decision, Source: c.Source, Reason: c.Reason, RuleID: c.RuleID,
		ApprovalID: c.ApprovalID, Verdict: c.Verdict, RewrittenVerdict: c.RewrittenVerdict}
}

// Asked is a call as asked: its ids, its decoded input and that input's
// digest, and the identity of the whole request (the digest of everything
// the decision read), which a retry of the tool_call_id must match.
type Asked struct {
	RunID      string
	ToolCallID string
	ToolName   string
	Input      any
	Digest     redact.Digest
	Identity   redact.Digest
	// AgentID and AgentType name the subagent that asked; empty for the
	// run's main agent.
	AgentID, AgentType string
}

// Pin is what a pending call's approval records about what it was decided
// on, and who may decide it.
type Pin struct {
	// ApprovalID is the id the approval gets if the gate pends the call.
	ApprovalID   string
	ToolDigest   string
	PolicyDigest string
	// ConnectionID and Personal are set for a brokered call; a call on a
	// personal connection is decidable only by the run's invoker.
	ConnectionID string
	Personal     bool
	// Source is the run's trigger source ("" for none): its runs together
	// may have at most SourceLimit approvals pending, counted at
	// store.SourceKey in the same append that files one.
	Source      string
	SourceLimit int
}

// Recorded is what Record decided: the answer, the batch that records it,
// and the approval it creates (zero unless the answer is pending).
type Recorded struct {
	Answer   Answer
	Batch    store.Batch
	Approval store.Approval
}

// Record is requested -> allow | deny | pending: the gate's decision d on
// the head h, as the batch that records it (tool.requested, then
// tool.decision or approval.requested with the approval row, and the call
// record). The call record and the approval row must be new: a retry's
// Append fails with ErrRecorded. A decision a session grant answered holds
// only while the grant does (ErrGrantRevoked); one that files an approval,
// only while the run's trigger source is below its cap (ErrSourceFull).
func Record(st *store.Store, h store.Head, c Asked, d gate.Decision, pin Pin, now time.Time) (Recorded, error) {
	ans := answerOf(d)
	if err := Move(Requested, State(ans.Decision), Gate); err != nil {
		return Recorded{}, err
	}
	at := store.FormatTime(now)
	rec := store.Call{
		ToolCallID: c.ToolCallID, ToolName: c.ToolName, InputDigest: c.Digest.String(), RequestDigest: c.Identity.String(),
		Decision: ans.Decision, Source: ans.Source, Reason: storedReason(d), RuleID: ans.RuleID,
		Verdict: ans.Verdict, RewrittenVerdict: ans.RewrittenVerdict, DecidedAt: at,
	}
	var updated redact.Digest
	if !ans.UpdatedInput.IsZero() {
		// The call record and the decision keep the narrowed input's
		// digest, so a replay can check it re-derives the same input.
		v, err := ans.UpdatedInput.Value()
		if err == nil {
			updated, err = redact.DigestJSON(v)
		}
		if err != nil {
			return Recorded{}, err
		}
		rec.UpdatedInputDigest = updated.String()
	}
	var out Recorded
	requested, err := redact.New(redact.ToolRequested{ToolCallID: c.ToolCallID, ToolName: c.ToolName, InputDigest: c.Digest, AgentID: c.AgentID, AgentType: c.AgentType})
	if err != nil {
		return Recorded{}, err
	}
	out.Batch.Events = append(out.Batch.Events, requested)
	// The decision's event (tool.decision, or approval.requested) follows
	// tool.requested; a shadow difference is recorded on it and counted
	// with a pointer to it.
	shadow := shadowFields(d.Shadow)
	if shadow != (redact.Shadow{}) {
		op, err := st.ShadowDifferenceOp(h.RunID, shadowKey(c.ToolName, d.Shadow), c.ToolCallID, h.LastSeq+2, at)
		if err != nil {
			return Recorded{}, err
		}
		out.Batch.Ops = append(out.Batch.Ops, op)
	}

	if ans.Decision == vocab.Pending {
		shown, size, cut, err := displayInput(c.Input)
		if err != nil {
			return Recorded{}, err
		}
		a := store.Approval{
			ID: pin.ApprovalID, RunID: h.RunID, ToolCallID: c.ToolCallID, ToolName: c.ToolName,
			Input: shown, InputSize: size, InputTruncated: cut, InputDigest: c.Digest.String(),
			ToolDigest: pin.ToolDigest, PolicyDigest: pin.PolicyDigest, RuleID: d.RuleID,
			ScopeKey: d.ScopeKey, DefaultScope: string(d.Scope), Status: vocab.ApprovalPending,
			RequestedAt: at, ExpiresAt: store.FormatTime(now.Add(d.TTL)),
			ConnectionID: pin.ConnectionID, Personal: pin.Personal,
			ShadowVerdict: shadow.ShadowVerdict, ShadowRewrittenVerdict: shadow.ShadowRewrittenVerdict,
			ShadowRuleID: shadow.ShadowRuleID, ShadowError: shadow.ShadowError,
			Source: pin.Source,
		}
		row, err := st.PutNew(store.ApprovalKey(a.RunID, a.ToolCallID),
			store.PendingApproval{Approval: a, GSI1PK: store.PendingIndex, GSI1SK: store.ApprovalPosition(a)}, ErrRecorded)
		if err != nil {
			return Recorded{}, err
		}
		ref, err := st.PutNew(store.ApprovalRefKey(a.ID), store.ApprovalRef{RunID: a.RunID, ToolCallID: a.ToolCallID}, ErrRecorded)
		if err != nil {
			return Recorded{}, err
		}
		ev, err := redact.New(redact.ApprovalRequested{
			ApprovalID: a.ID, ToolCallID: a.ToolCallID, ToolName: a.ToolName, RuleID: a.RuleID,
			ScopeKey: a.ScopeKey, DefaultScope: a.DefaultScope, ExpiresAt: a.ExpiresAt, InputDigest: c.Digest,
			Shadow: shadow,
		})
		if err != nil {
			return Recorded{}, err
		}
		out.Batch.Ops = append(out.Batch.Ops, row, ref)
		if a.Source != "" {
			// The cap across the source's runs holds by this condition,
			// whatever the gate was told: two runs of one pull request
			// filing at once cannot both pass it.
			out.Batch.Ops = append(out.Batch.Ops, st.SourcePendingOp(store.SourceKey(a.Source), 1, pin.SourceLimit, ErrSourceFull))
		}
		out.Batch.Events = append(out.Batch.Events, ev)
		out.Batch.Head.Pending = 1
		if h.Status != vocab.Ended {
			out.Batch.Head.Status = vocab.AwaitingApproval
		}
		out.Approval = a
		ans.ApprovalID, rec.ApprovalID = a.ID, a.ID
	} else {
		ev, err := redact.New(redact.ToolDecision{
			ToolCallID: c.ToolCallID, ToolName: c.ToolName, Decision: ans.Decision, Source: ans.Source,
			RuleID: ans.RuleID, Verdict: ans.Verdict, RewrittenVerdict: ans.RewrittenVerdict, Grant: d.Grant,
			UpdatedInputDigest: updated, Shadow: shadow,
		})
		if err != nil {
			return Recorded{}, err
		}
		out.Batch.Events = append(out.Batch.Events, ev)
	}
	if d.Grant != "" {
		// Answered by a grant: recorded only while the grant stands.
		out.Batch.Ops = append(out.Batch.Ops, st.GrantHeldOp(h.RunID, d.GrantRule, d.Grant, ErrGrantRevoked))
	}
	op, err := st.PutNew(store.CallKey(h.RunID, c.ToolCallID), rec, ErrRecorded)
	if err != nil {
		return Recorded{}, err
	}
	out.Batch.Ops = append(out.Batch.Ops, op)
	out.Answer = ans
	return out, nil
}

// shadowFields is what the ledger keeps of a shadow's answer: the verdict,
// its rewrite and rule, or the error, only when it differs from the
// enforced policy's; zero otherwise.
func shadowFields(sh *gate.Shadow) redact.Shadow {
	if sh == nil || !sh.Differs {
		return redact.Shadow{}
	}
	if sh.Error != "" {
		return redact.Shadow{ShadowError: string(sh.Error)}
	}
	return redact.Shadow{ShadowVerdict: string(sh.Verdict), ShadowRewrittenVerdict: string(sh.Rewritten), ShadowRuleID: sh.RuleID}
}

// shadowKey is what a difference is counted under.
func shadowKey(toolName string, sh *gate.Shadow) store.ShadowKey {
	return store.ShadowKey{
		ToolName: toolName, Verdict: string(sh.Enforced), RuleID: sh.EnforcedRuleID,
		ShadowVerdict: string(sh.Settled()), ShadowRuleID: sh.RuleID, ShadowError: sh.Error != "",
	}
}

func answerOf(d gate.Decision) Answer {
	a := Answer{Reason: d.Reason, RuleID: d.RuleID, Verdict: string(d.Verdict), RewrittenVerdict: string(d.Rewritten)}
	switch d.Outcome {
	case policy.VerdictAllow:
		a.Decision = vocab.Allow
		a.UpdatedInput = d.UpdatedInput
	case policy.VerdictRequireApproval:
		a.Decision = vocab.Pending
	default:
		a.Decision = vocab.Deny
		a.Source = string(d.Source)
		if a.Source == "" {
			a.Source = string(gate.SourcePolicy)
		}
	}
	return a
}

// storedReason is the reason kept on the call record. Schema reasons may
// quote the input and Bash parse errors may quote the command, so those
// are not stored; a replay re-derives the schema reason from the frozen
// schema and the (identical) input.
func storedReason(d gate.Decision) string {
	switch {
	case d.Source == gate.SourceSchema:
		return ""
	case d.Source == gate.SourcePolicy || d.Outcome != policy.VerdictDeny:
		if d.RuleID != "" || d.Outcome == policy.VerdictAllow || d.Outcome == policy.VerdictRequireApproval {
			return d.Reason
		}
		return "denied by the policy"
	}
	return d.Reason
}

// MaxShownInput bounds the input an approval row keeps for display, so the
// row stays below DynamoDB's 400 KB item limit whatever the input; an
// input up to this size is kept whole, for the human deciding it.
const MaxShownInput = 256 << 10

// displayInput is the input as the approval row keeps it: the whole JSON
// when it fits MaxShownInput; otherwise the same object with its long
// strings cut (each ending in a note of how much was cut), and if even
// that does not fit, a JSON string holding the input's first bytes. The
// result is always valid JSON; size is the whole input's size.
func displayInput(input any) (shown string, size int, truncated bool, err error) {
	whole, err := json.Marshal(input)
	if err != nil {
		return "", 0, false, err
	}
	if len(whole) <= MaxShownInput {
		return string(whole), len(whole), false, nil
	}
	for _, limit := range []int{4096, 512, 64} {
		b, err := json.Marshal(cutStrings(input, limit))
		if err != nil {
			return "", 0, false, err
		}
		if len(b) <= MaxShownInput {
			return string(b), len(whole), true, nil
		}
	}
	head := string(whole[:MaxShownInput/2])
	for len(head) > 0 && !utfStart(head[len(head)-1]) {
		head = head[:len(head)-1]
	}
	b, err := json.Marshal(fmt.Sprintf("%s... [input of %d bytes cut for display]", head, len(whole)))
	return string(b), len(whole), true, err
}

func utfStart(b byte) bool { return b&0xC0 != 0x80 }

// cutStrings returns v with every string longer than limit bytes cut.
func cutStrings(v any, limit int) any {
	switch t := v.(type) {
	case string:
		if len(t) <= limit {
			return t
		}
		cut := limit
		for cut > 0 && !utfStart(t[cut]) {
			cut--
		}
		return fmt.Sprintf("%s... [%d more bytes]", t[:cut], len(t)-cut)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = cutStrings(e, limit)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = cutStrings(e, limit)
		}
		return out
	}
	return v
}

// Settle is pending -> approved_once | approved_session | denied (by a
// decider) or expired (by System(ExpiryRole)): the compare-and-swap on the
// approval row, with the call's final answer, the session grant for
// approved_session, the run's pending count and status, and
// approval.decided and tool.decision. The swap holds only while the
// approval is pending and, for a decision, unexpired at now, for an expiry
// overdue at now; otherwise the Append fails with ErrSettled. It returns
// the build for ledger.Append and the approval as it will stand. note is
// the decider's own words ("" for none): kept on the approval and, for a
// deny, given to the runner in the call's reason; free text from a person
// never enters the ledger, so it is in neither event.
func Settle(st *store.Store, a store.Approval, to vocab.ApprovalStatus, by Subject, note string, now time.Time) (func(store.Head) (store.Batch, error), store.Approval, error) {
	actor := Decider
	if to == vocab.ApprovalExpired {
		actor = Expiry
	}
	if err := Move(State(a.Status), State(to), actor); err != nil {
		return nil, store.Approval{}, err
	}
	at := store.FormatTime(now)
	decision, source, answer := to.Answer(), "", "approved by "+string(by)
	switch to {
	case vocab.ApprovalDenied:
		source, answer = string(gate.SourceApproval), "a human denied this call"
		if note != "" {
			answer += ": " + note
		}
	case vocab.ApprovalExpired:
		source, answer = string(gate.SourceApprovalExpired), "nobody approved this call in time"
	}
	decided, err := redact.New(redact.ApprovalDecided{ApprovalID: a.ID, ToolCallID: a.ToolCallID, Status: to, DecidedBy: string(by)})
	if err != nil {
		return nil, store.Approval{}, err
	}
	decisionEvent, err := redact.New(redact.ToolDecision{
		ToolCallID: a.ToolCallID, ToolName: a.ToolName, Decision: decision, Source: source,
		RuleID: a.RuleID, Verdict: string(policy.VerdictRequireApproval), ApprovalID: a.ID,
		Shadow: redact.Shadow{ShadowVerdict: a.ShadowVerdict, ShadowRewrittenVerdict: a.ShadowRewrittenVerdict, ShadowRuleID: a.ShadowRuleID, ShadowError: a.ShadowError},
	})
	if err != nil {
		return nil, store.Approval{}, err
	}
	cond := "#s = :pending AND expires_at > :now"
	if to == vocab.ApprovalExpired {
		cond = "#s = :pending AND expires_at <= :now"
	}
	set := map[string]any{"status": to, "decided_by": string(by), "decided_at": at}
	if note != "" {
		set["reason"] = note
	}
	row, err := st.UpdateOp(store.ApprovalKey(a.RunID, a.ToolCallID), store.Update{
		Set:    set,
		Remove: []string{"gsi1pk", "gsi1sk"},
		Cond:   cond, Names: map[string]string{"#s": "status"},
		Values: map[string]any{":pending": vocab.ApprovalPending, ":now": at},
	}, ErrSettled)
	if err != nil {
		return nil, store.Approval{}, err
	}
	rec, err := st.UpdateOp(store.CallKey(a.RunID, a.ToolCallID), store.Update{
		Set:  map[string]any{"decision": decision, "source": source, "reason": answer, "decided_at": at},
		Cond: "#d = :pending", Names: map[string]string{"#d": "decision"},
		Values: map[string]any{":pending": vocab.Pending},
	}, ErrSettled)
	if err != nil {
		return nil, store.Approval{}, err
	}
	ops := []store.Op{row, rec}
	if a.Source != "" {
		ops = append(ops, st.SourcePendingOp(store.SourceKey(a.Source), -1, 0, ErrSettled))
	}
	if to == vocab.ApprovedSession {
		// The grant belongs to the rule that asked: the same scope key
		// under another rule is another grant (policy.AnswerGrants).
		g, err := st.Put(store.GrantKey(a.RunID, a.RuleID, a.ScopeKey), store.Grant{RuleID: a.RuleID, ScopeKey: a.ScopeKey, ApprovalID: a.ID, GrantedBy: string(by), GrantedAt: at})
		if err != nil {
			return nil, store.Approval{}, err
		}
		ops = append(ops, g)
	}
	after := a
	after.Status, after.DecidedBy, after.DecidedAt, after.Reason = to, string(by), at, note
	return func(h store.Head) (store.Batch, error) {
		b := store.Batch{Events: []redact.Envelope{decided, decisionEvent}, Ops: ops, Head: store.HeadChange{Pending: -1}}
		if h.Status != vocab.Ended {
			b.Head.Status = vocab.Running
			if h.PendingApprovals > 1 {
				b.Head.Status = vocab.AwaitingApproval
			}
		}
		return b, nil
	}, after, nil
}

// Revoke withdraws the run's session grants held with scopeKey (under
// every rule that holds one: held is what the caller read), recorded as one
// grant.revoked; later calls they answered ask again. The Append fails
// with ErrNoGrant when any of them is gone by then, and Revoke fails with
// it at once when held has none with that key.
func Revoke(st *store.Store, runID, scopeKey string, held []store.Grant, by Subject) (store.Batch, error) {
	var ops []store.Op
	for _, g := range held {
		if g.ScopeKey == scopeKey {
			ops = append(ops, st.DeleteExisting(store.GrantKey(runID, g.RuleID, g.ScopeKey), ErrNoGrant))
		}
	}
	if len(ops) == 0 {
		return store.Batch{}, ErrNoGrant
	}
	ev, err := redact.New(redact.GrantRevoked{ScopeKey: scopeKey, RevokedBy: string(by)})
	if err != nil {
		return store.Batch{}, err
	}
	return store.Batch{Events: []redact.Envelope{ev}, Ops: ops}, nil
}

// Claim is allow | approved_* -> executing: it marks an allowed call's one
// execution on its record, before the broker calls the upstream, so a
// retry, a concurrent duplicate or another process finds the claim and
// never runs the tool a second time. It claims only when the context's
// deadline leaves at least need (the call's timeout), so a call is never
// started that its caller cannot wait for (ErrNoTime: the tool did not
// run). On ErrExecuted the record is returned, with the outcome if it was
// stored. The cost is at-most-once: a broker that dies after the claim
// leaves the call unexecuted, and the runner must use a new tool_call_id.
func Claim(ctx context.Context, st *store.Store, runID, toolCallID string, now time.Time, need time.Duration) (store.Call, error) {
	if err := Move(Allowed, Executing, Broker); err != nil {
		return store.Call{}, err
	}
	// The deadline is the request's, on the wall clock it was set with.
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < need {
		return store.Call{}, fmt.Errorf("%w: %s left, the call may take %s", ErrNoTime, time.Until(dl).Round(time.Millisecond), need)
	}
	var old store.Call
	err := st.UpdateItem(ctx, "claim "+runID+"/"+toolCallID, store.CallKey(runID, toolCallID), store.Update{
		Set:    map[string]any{"executed_at": store.FormatTime(now)},
		Cond:   "attribute_exists(pk) AND #d = :allow AND (attribute_not_exists(executed_at) OR executed_at = :released)",
		Names:  map[string]string{"#d": "decision"},
		Values: map[string]any{":allow": vocab.Allow, ":released": released},
	}, &old)
	if errors.Is(err, store.ErrConditionFailed) {
		switch {
		case old.ExecutedAt != "":
			return old, fmt.Errorf("claim %s/%s: %w", runID, toolCallID, ErrExecuted)
		case old.ToolCallID == "":
			return old, fmt.Errorf("claim %s/%s: %w", runID, toolCallID, ErrNotRecorded)
		}
		return old, fmt.Errorf("claim %s/%s: %w", runID, toolCallID, ErrNotAllowed)
	}
	return store.Call{}, err
}

// Outcome is what an executed call's record keeps: digests and numbers,
// never the result.
type Outcome struct {
	ResultDigest redact.Digest
	LatencyMS    int64
	IsError      bool
}

// OutcomeOf is the outcome a call record holds; ok is false until one was
// stored.
func OutcomeOf(c store.Call) (Outcome, bool) {
	// A stored digest that is not one (never written by us) is left zero;
	// the outcome still counts as stored, so the call is not run again.
	d, _ := redact.ParseDigest(c.ResultDigest)
	return Outcome{ResultDigest: d, LatencyMS: c.LatencyMS, IsError: c.IsError}, c.ResultDigest != ""
}

// StoreOutcome is the first half of executing -> executed: the outcome on
// the call record, right after the upstream answered and before anything
// else, a single-item write that no other write to the run can conflict
// with. It holds only on a claimed call without an outcome (otherwise
// ErrNotExecuting). With the
// outcome stored, tool.brokered can be appended (Brokered) by this request
// or by any retry of it.
func StoreOutcome(ctx context.Context, st *store.Store, runID, toolCallID string, o Outcome) error {
	if err := Move(Executing, Executed, Broker); err != nil {
		return err
	}
	err := st.UpdateItem(ctx, "outcome of "+runID+"/"+toolCallID, store.CallKey(runID, toolCallID), store.Update{
		Set:    map[string]any{"result_digest": o.ResultDigest.String(), "latency_ms": o.LatencyMS, "is_error": o.IsError},
		Cond:   "attribute_exists(executed_at) AND executed_at <> :released AND attribute_not_exists(result_digest)",
		Values: map[string]any{":released": released},
	}, nil)
	if errors.Is(err, store.ErrConditionFailed) {
		return fmt.Errorf("outcome of %s/%s: %w", runID, toolCallID, ErrNotExecuting)
	}
	return err
}

// Brokered is the second half of executing -> executed: tool.brokered for
// the stored outcome, marking the record so it is appended once (a second
// Append fails with ErrBrokeredRecorded).
func Brokered(st *store.Store, runID string, ev redact.ToolBrokered) (store.Batch, error) {
	env, err := redact.New(ev)
	if err != nil {
		return store.Batch{}, err
	}
	op, err := st.UpdateOp(store.CallKey(runID, ev.ToolCallID), store.Update{
		Set:  map[string]any{"brokered": true},
		Cond: "attribute_exists(result_digest) AND attribute_not_exists(brokered)",
	}, ErrBrokeredRecorded)
	if err != nil {
		return store.Batch{}, err
	}
	return store.Batch{Events: []redact.Envelope{env}, Ops: []store.Op{op}}, nil
}

// Refusal is allow | approved_* -> refused: a tool.decision deny for an
// allowed call that re-verification (Reverify, or the upstream's
// definition of the tool) stopped before it ran. The call record keeps its
// allow; a retry re-verifies.
func Refusal(toolCallID, toolName string, src gate.Source) (store.Batch, error) {
	if err := Move(Allowed, Refused, Broker); err != nil {
		return store.Batch{}, err
	}
	env, err := redact.New(redact.ToolDecision{ToolCallID: toolCallID, ToolName: toolName, Decision: vocab.Deny, Source: string(src)})
	if err != nil {
		return store.Batch{}, err
	}
	return store.Batch{Events: []redact.Envelope{env}}, nil
}

// released is executed_at once a claim is released: the execution was
// claimed, the upstream refused it at its door, and the call may be
// claimed again.
const released = ""

// Unclaim is executing -> refused: the upstream refused the claimed call
// before the tool ran (it wants scopes the grant lacks), so the claim made
// at claimedAt is released in the same append as the tool.decision deny.
// A retry of the call then re-verifies and, if it is still allowed, claims
// it again; at most one execution still happens, since the release holds
// only for this claim and only while no outcome is stored.
func Unclaim(st *store.Store, runID, toolCallID, toolName string, src gate.Source, claimedAt time.Time) (store.Batch, error) {
	if err := Move(Executing, Refused, Broker); err != nil {
		return store.Batch{}, err
	}
	env, err := redact.New(redact.ToolDecision{ToolCallID: toolCallID, ToolName: toolName, Decision: vocab.Deny, Source: string(src)})
	if err != nil {
		return store.Batch{}, err
	}
	op, err := st.UpdateOp(store.CallKey(runID, toolCallID), store.Update{
		Set:    map[string]any{"executed_at": released},
		Cond:   "executed_at = :claimed AND attribute_not_exists(result_digest)",
		Values: map[string]any{":claimed": store.FormatTime(claimedAt)},
	}, ErrNotExecuting)
	if err != nil {
		return store.Batch{}, err
	}
	return store.Batch{Events: []redact.Envelope{env}, Ops: []store.Op{op}}, nil
}

// Reverify repeats the gate's own stage 2 (frozen tool set and binding) for
// an allowed brokered call right before it executes: the call may have been
// decided long before (approval), and the connection may have changed
// since. It returns the gate's denial, or denied=false.
func Reverify(run *gate.Run, toolName string, live map[string]gate.Live) (d gate.Decision, denied bool) {
	return gate.ToolSetDenial(run, gate.Request{ToolName: toolName, Connections: live})
}
