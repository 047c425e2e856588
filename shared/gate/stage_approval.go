package gate

import (
	"fmt"

	"github.com/fluidbox/fluidbox/shared/policy"
)

// Stage 6, approval: the policy said require_approval. Session grants that
// answer the call allow it; otherwise an autonomous run takes the policy's
// fallback; otherwise the caller pauses the run for a human.
//
// Why last: grants and autonomy are ways of answering a require_approval,
// and nothing else. Placing them after every floor (session, budget, frozen
// tool set, schema, trust tier) and after the policy's own deny means they
// can never pass any of those: a grant for "mcp__github__create_issue" does
// not make a drifted connection callable, and autonomy does not let a fork's
// run write.
//
// A grant belongs to the rule that asked (policy.AnswerGrants): it answers
// only calls that rule asks about and keys the same way, read strictly,
// and never one a stricter rule (a deny, a scope-once require_approval)
// also matches, so a grant of "Write docs/**" answers neither a Write that
// a scope-once rule also asks about nor one whose resolved path leaves
// docs/, and "Bash:git push" never covers "git push && curl x". When some
// asking rules hold their grants, the first that does not is the one that
// asks, so approving it makes progress. The grants are
// the run's, read by the caller and passed in (Run.Grants): the stage does
// no I/O. A caller that decided without reading them learns from
// Decision.Grantable that reading them could change the answer.
//
// Autonomy changes one thing: require_approval becomes the policy's
// fallback, and both verdicts are recorded; any fallback other than allow
// (including an empty or unknown one) is a deny. An approval whose scope or
// TTL is unknown is a deny: the caller could not create a well-formed
// pending approval from it.
//
// A run may have only so many approvals waiting (MaxPendingApprovals): one
// sandbox filing hundreds would push other runs' approvals out of a human's
// sight and let them expire unseen. So may all the runs of one trigger
// source together (SourceFull), since a fork gets a run per push. Past
// either limit the call is denied, as an answer the model can act on
// (wait, then ask again), not filed.
func checkApproval(c *call) (Decision, bool) {
	if !c.evaluated || c.result.Verdict != policy.VerdictRequireApproval {
		return deny(SourcePolicy, "the approval stage ran without a require_approval verdict, so the call is denied")
	}
	if c.run.Policy == nil {
		return deny(SourcePolicy, "this run has no frozen policy, so no tool call can be allowed")
	}
	ans := c.run.Policy.AnswerGrants(c.env(), c.policyCall(), c.result, c.run.Grants)
	if ans.Covered {
		d := Decision{Verdict: c.result.Verdict, RuleID: c.result.RuleID, Outcome: policy.VerdictAllow, Grant: ans.Grant.ScopeKey, GrantRule: ans.Grant.RuleID}
		d.Reason = c.result.Reason + "; allowed by the session grant " + quote(d.Grant)
		if d.GrantRule != "" {
			d.Reason += " of rule " + quote(d.GrantRule)
		}
		return d, true
	}
	// Not answered: the first rule whose grant is missing asks.
	res := ans.Ask
	base := Decision{Verdict: res.Verdict, RuleID: res.RuleID, Grantable: ans.Grantable}

	if c.run.Autonomous {
		d := base
		if res.OnAutonomous == policy.VerdictAllow {
			d.Outcome, d.Rewritten = policy.VerdictAllow, policy.VerdictAllow
			d.Reason = res.Reason + "; autonomous run: rewritten to allow by the policy's fallback"
			return d, true
		}
		d.Outcome, d.Source, d.Rewritten = policy.VerdictDeny, SourcePolicy, policy.VerdictDeny
		if res.OnAutonomous == policy.VerdictDeny {
			d.Reason = res.Reason + "; autonomous run: rewritten to deny by the policy's fallback"
		} else {
			d.Reason = res.Reason + "; autonomous run: the policy gives no usable fallback, so the call is denied"
		}
		return d, true
	}

	scope := res.Scope
	if res.ScopeKey == "" {
		scope = policy.ScopeOnce // nothing a session grant could safely name
	}
	if scope != policy.ScopeOnce && scope != policy.ScopeSession {
		d := base
		d.Outcome, d.Source = policy.VerdictDeny, SourcePolicy
		d.Reason = res.Reason + "; the approval has an unknown scope " + quote(string(scope)) + ", so the call is denied"
		return d, true
	}
	if res.TTL <= 0 {
		d := base
		d.Outcome, d.Source = policy.VerdictDeny, SourcePolicy
		d.Reason = res.Reason + "; the approval has no time limit, so the call is denied"
		return d, true
	}
	if limit := maxPending(c.run); c.run.PendingApprovals >= int64(limit) {
		d := base
		d.Outcome, d.Source = policy.VerdictDeny, SourceApprovalLimit
		d.Reason = fmt.Sprintf("%s; this run already has %d approvals waiting for a human, the most a run may have (%d), so the call is denied: ask again once some are decided",
			res.Reason, c.run.PendingApprovals, limit)
		return d, true
	}
	if c.run.SourceFull {
		d := base
		d.Outcome, d.Source = policy.VerdictDeny, SourceApprovalLimit
		d.Reason = fmt.Sprintf("%s; the runs started by the same source as this one (the same pull request author in the same repository, or the same schedule) already have %d approvals waiting for a human, the most they may have together, so the call is denied: ask again once some are decided",
			res.Reason, maxPending(c.run))
		return d, true
	}
	d := base
	d.Outcome, d.Reason = policy.VerdictRequireApproval, res.Reason
	d.ScopeKey, d.Scope, d.TTL = res.ScopeKey, scope, res.TTL
	return d, true
}

func maxPending(r *Run) int {
	if r.MaxPendingApprovals <= 0 {
		return DefaultMaxPendingApprovals
	}
	return r.MaxPendingApprovals
}
