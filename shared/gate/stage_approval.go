package gate

import (
	"fmt"

	"github.com/fluidbox/fluidbox/shared/policy"
)

// Stage 6, approval: the policy said require_approval. A session grant that
// covers the call allows it; otherwise an autonomous run takes the policy's
// fallback; otherwise the caller pauses the run for a human.
//
// Why last: grants and autonomy are ways of answering a require_approval,
// and nothing else. Placing them after every floor (session, budget, frozen
// tool set, schema, trust tier) and after the policy's own deny means they
// can never pass any of those: a grant for "mcp__github__create_issue" does
// not make a drifted connection callable, and autonomy does not let a fork's
// run write. Grants are matched strictly (policy.Covered), so a grant for
// "Bash:git push" never covers "git push && rm -rf x". Autonomy changes one
// thing: require_approval becomes the policy's fallback, and both verdicts
// are recorded; any fallback other than allow (including an empty or
// unknown one) is a deny. An approval whose scope or TTL is unknown is a
// deny: the caller could not create a well-formed pending approval from it.
//
// A run may have only so many approvals waiting (MaxPendingApprovals): one
// sandbox filing hundreds would push other runs' approvals out of a human's
// sight and let them expire unseen. Past the limit the call is denied, as
// an answer the model can act on (wait, then ask again), not filed.
func checkApproval(c *call) (Decision, bool) {
	res := c.result
	if !c.evaluated || res.Verdict != policy.VerdictRequireApproval {
		return deny(SourcePolicy, "the approval stage ran without a require_approval verdict, so the call is denied")
	}
	base := Decision{Verdict: res.Verdict, RuleID: res.RuleID}

	if c.req.Granted != nil {
		var hit string
		granted := func(key string) bool {
			if c.req.Granted(key) {
				if hit == "" {
					hit = key
				}
				return true
			}
			return false
		}
		if c.policyCall().Covered(granted) && hit != "" {
			d := base
			d.Outcome, d.Grant = OutcomeAllow, hit
			d.Reason = res.Reason + "; allowed by the session grant " + quote(hit)
			return d, true
		}
	}

	if c.run.Autonomous {
		d := base
		if res.OnAutonomous == policy.VerdictAllow {
			d.Outcome, d.Rewritten = OutcomeAllow, policy.VerdictAllow
			d.Reason = res.Reason + "; autonomous run: rewritten to allow by the policy's fallback"
			return d, true
		}
		d.Outcome, d.Source, d.Rewritten = OutcomeDeny, SourcePolicy, policy.VerdictDeny
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
		d.Outcome, d.Source = OutcomeDeny, SourcePolicy
		d.Reason = res.Reason + "; the approval has an unknown scope " + quote(string(scope)) + ", so the call is denied"
		return d, true
	}
	if res.TTL <= 0 {
		d := base
		d.Outcome, d.Source = OutcomeDeny, SourcePolicy
		d.Reason = res.Reason + "; the approval has no time limit, so the call is denied"
		return d, true
	}
	if limit := maxPending(c.run); c.run.PendingApprovals >= int64(limit) {
		d := base
		d.Outcome, d.Source = OutcomeDeny, SourceApprovalLimit
		d.Reason = fmt.Sprintf("%s; this run already has %d approvals waiting for a human, the most a run may have (%d), so the call is denied: ask again once some are decided",
			res.Reason, c.run.PendingApprovals, limit)
		return d, true
	}
	d := base
	d.Outcome, d.Reason = OutcomeApproval, res.Reason
	d.ScopeKey, d.Scope, d.TTL = res.ScopeKey, scope, res.TTL
	return d, true
}

func maxPending(r *Run) int {
	if r.MaxPendingApprovals <= 0 {
		return DefaultMaxPendingApprovals
	}
	return r.MaxPendingApprovals
}
