package permission

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Answer is a call's recorded answer as the runner sees it (the wire's
// answer to POST /v1/sessions/{id}/permission).
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
	// ClaimAt, when set, is the instant the broker claims the call's one
	// execution if the gate allows it: the record is put claimed
	// (store.RecordClaimedCallOp), and the broker calls the upstream
	// without a write of its own first.
	ClaimAt string
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
// Append fails with call.ErrRecorded. A decision a session grant answered holds
// only while the grant does (call.ErrGrantRevoked); one that files an approval,
// only while the run's trigger source is below its cap (call.ErrSourceFull).
func Record(st *store.Store, h store.Head, c Asked, d gate.Decision, pin Pin, now time.Time) (Recorded, error) {
	ans := answerOf(d)
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
		filed, err := st.FileApprovalOps(call.Requested, a)
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
		out.Batch.Ops = append(out.Batch.Ops, filed...)
		if a.Source != "" {
			// The cap across the source's runs holds by this condition,
			// whatever the gate was told: two runs of one pull request
			// filing at once cannot both pass it.
			out.Batch.Ops = append(out.Batch.Ops, st.SourcePendingOp(store.SourceKey(a.Source), 1, pin.SourceLimit, call.ErrSourceFull))
		}
		out.Batch.Events = append(out.Batch.Events, ev)
		out.Batch.Head.Pending = 1
		out.Batch.Head.Status = store.WaitingStatus(h, 1, 0)
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
		out.Batch.Ops = append(out.Batch.Ops, st.GrantHeldOp(h.RunID, d.GrantRule, d.Grant, call.ErrGrantRevoked))
	}
	var op store.Op
	if ans.Decision == vocab.Allow && pin.ClaimAt != "" {
		op, err = st.RecordClaimedCallOp(h.RunID, call.Requested, rec, pin.ClaimAt)
	} else {
		op, err = st.RecordCallOp(h.RunID, call.Requested, rec)
	}
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
