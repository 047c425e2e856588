package approval

import (
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/call"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Settle is pending -> approved_once | approved_session | denied (by a
// decider) or expired (by the expiry): the compare-and-swap on the
// approval row (store.SettleApprovalOp), with the call's final answer
// (store.SettleCallOp), the session grant for approved_session, the
// trigger source's count, the run's pending count and status, and
// approval.decided and tool.decision. The swap holds only while the
// approval is pending and, for a decision, unexpired at now, for an expiry
// overdue at now; otherwise the Append fails with call.ErrSettled. It
// returns the build for ledger.Append and the approval as it will stand.
// note is the decider's own words ("" for none): kept on the approval and,
// for a deny, given to the runner in the call's reason; free text from a
// person never enters the ledger, so it is in neither event.
//
// An approval never allows a call of a run that allows no call any more:
// when the run has ended or spent its whole budget by the time of the
// Append, an approving build fails with a *RunRefusedError, and the
// caller settles the approval with RefuseForRun instead.
func Settle(st *store.Store, a store.Approval, to vocab.ApprovalStatus, by auth.Subject, note string, now time.Time) (func(store.Head) (store.Batch, error), store.Approval, error) {
	source, answer := "", "approved by "+string(by)
	switch to {
	case vocab.ApprovalDenied:
		source, answer = string(gate.SourceApproval), "a human denied this call"
		if note != "" {
			answer += ": " + note
		}
	case vocab.ApprovalExpired:
		source, answer = string(gate.SourceApprovalExpired), "nobody approved this call in time"
	}
	return settleAs(st, a, to, by, note, now, source, answer)
}

// RunRefuses is the gate's answer for every call of the run at head h
// when the run allows no call any more (gate.RunRefuses): it has ended, or
// spent its whole budget. Spent, not reserved: a model request in flight
// holds an upper bound of its cost, and what was approved or recorded
// before is not lost to it.
func RunRefuses(h store.Head) (gate.Decision, bool) {
	return gate.RunRefuses(&gate.Run{Ended: h.Status == vocab.Ended, AvailableMicros: h.Unspent()})
}

// RunRefusedError is an approving settlement's failure on a run that
// allows no call any more: Decision is the gate's answer for every call of
// it (gate.RunRefuses).
type RunRefusedError struct{ Decision gate.Decision }

func (e *RunRefusedError) Error() string {
	return "approval: the run allows no call any more: " + e.Decision.Reason
}

// RefusedBy is who settles an approval denied because its run allows no
// call any more, stage by stage: "system:session", "system:budget".
func RefusedBy(d gate.Decision) auth.Subject { return auth.System(d.Stage) }

// RefuseForRun is Settle of a pending approval as denied because its run
// allows no call any more (d, from a *RunRefusedError): by RefusedBy(d),
// the call answered with the gate's own source and reason, as a call asked
// now would be.
func RefuseForRun(st *store.Store, a store.Approval, d gate.Decision, now time.Time) (func(store.Head) (store.Batch, error), store.Approval, error) {
	return settleAs(st, a, vocab.ApprovalDenied, RefusedBy(d), "", now, string(d.Source), d.Reason)
}

// settleAs is Settle with the call's answer (its source and reason) given.
func settleAs(st *store.Store, a store.Approval, to vocab.ApprovalStatus, by auth.Subject, note string, now time.Time, source, answer string) (func(store.Head) (store.Batch, error), store.Approval, error) {
	set := store.Settlement{To: to, By: string(by), At: store.FormatTime(now), Note: note}
	row, err := st.SettleApprovalOp(a, set)
	if err != nil {
		return nil, store.Approval{}, err
	}
	rec, err := st.SettleCallOp(a, set, source, answer)
	if err != nil {
		return nil, store.Approval{}, err
	}
	decided, err := redact.New(redact.ApprovalDecided{ApprovalID: a.ID, ToolCallID: a.ToolCallID, Status: to, DecidedBy: string(by)})
	if err != nil {
		return nil, store.Approval{}, err
	}
	decisionEvent, err := redact.New(redact.ToolDecision{
		ToolCallID: a.ToolCallID, ToolName: a.ToolName, Decision: to.Answer(), Source: source,
		RuleID: a.RuleID, Verdict: string(policy.VerdictRequireApproval), ApprovalID: a.ID,
		Shadow: redact.Shadow{ShadowVerdict: a.ShadowVerdict, ShadowRewrittenVerdict: a.ShadowRewrittenVerdict, ShadowRuleID: a.ShadowRuleID, ShadowError: a.ShadowError},
	})
	if err != nil {
		return nil, store.Approval{}, err
	}
	ops := []store.Op{row, rec}
	if a.Source != "" {
		ops = append(ops, st.SourcePendingOp(store.SourceKey(a.Source), -1, 0, call.ErrSettled))
	}
	if to == vocab.ApprovedSession {
		// The grant belongs to the rule that asked: the same scope key
		// under another rule is another grant (policy.AnswerGrants).
		g, err := st.GrantOp(a.RunID, store.Grant{RuleID: a.RuleID, ScopeKey: a.ScopeKey, ApprovalID: a.ID, GrantedBy: string(by), GrantedAt: set.At})
		if err != nil {
			return nil, store.Approval{}, err
		}
		ops = append(ops, g)
	}
	after := a
	after.Status, after.DecidedBy, after.DecidedAt, after.Reason = to, string(by), set.At, note
	return func(h store.Head) (store.Batch, error) {
		if to.Approved() {
			// The head a settlement is written on is the run's latest (the
			// Append is conditioned on it), so an end or a spent budget
			// that came first is seen here.
			if d, refused := RunRefuses(h); refused {
				return store.Batch{}, &RunRefusedError{Decision: d}
			}
		}
		return store.Batch{Events: []redact.Envelope{decided, decisionEvent}, Ops: ops, Head: store.HeadChange{Pending: -1, Status: store.WaitingStatus(h, -1, 0)}}, nil
	}, after, nil
}

// Revoke withdraws the run's session grants held with scopeKey (under
// every rule that holds one: held is what the caller read), recorded as
// one grant.revoked; later calls they answered ask again. The Append fails
// with call.ErrNoGrant when any of them is gone by then, and Revoke
// fails with it at once when held has none with that key.
func Revoke(st *store.Store, runID, scopeKey string, held []store.Grant, by auth.Subject) (store.Batch, error) {
	var ops []store.Op
	for _, g := range held {
		if g.ScopeKey == scopeKey {
			ops = append(ops, st.RevokeGrantOp(runID, g))
		}
	}
	if len(ops) == 0 {
		return store.Batch{}, call.ErrNoGrant
	}
	ev, err := redact.New(redact.GrantRevoked{ScopeKey: scopeKey, RevokedBy: string(by)})
	if err != nil {
		return store.Batch{}, err
	}
	return store.Batch{Events: []redact.Envelope{ev}, Ops: ops}, nil
}
