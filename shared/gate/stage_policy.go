package gate

import "github.com/fluidbox/fluidbox/shared/policy"

// Stage 5, policy: the run's frozen policy snapshot decides allow, deny or
// require_approval.
//
// Why here: everything above it is a floor that holds whatever the policy
// says (a live run, money left, a frozen tool, well-formed arguments, a tier
// that permits the tool's class), so a policy can only narrow further; it
// can never widen a floor. It runs on the frozen snapshot, never the policy's
// current content, so loosening a rule today cannot make a past run look
// compliant. It sits before approval because approval only exists as an
// answer to the policy's require_approval: a deny here is final, and no
// grant or autonomy fallback is ever consulted for it. A missing policy or
// a verdict the gate does not know is a deny. A run's shadow policy is
// evaluated here too, on the same call, and only recorded (shadow.go).
func checkPolicy(c *call) (Decision, bool) {
	p := c.run.Policy
	if p == nil {
		return deny(SourcePolicy, "this run has no frozen policy, so no tool call can be allowed")
	}
	env := c.env()
	pc := c.policyCall()
	res := p.EvaluateCall(env, pc)
	if c.run.Shadow != nil || c.run.ShadowBroken {
		c.shadow = shadowOf(c.run, env, pc, res)
	}
	switch res.Verdict {
	case policy.VerdictAllow:
		return Decision{Outcome: policy.VerdictAllow, Verdict: res.Verdict, RuleID: res.RuleID, Reason: res.Reason, UpdatedInput: policy.InputOf(res.UpdatedInput)}, true
	case policy.VerdictDeny:
		return Decision{Outcome: policy.VerdictDeny, Source: SourcePolicy, Verdict: res.Verdict, RuleID: res.RuleID, Reason: res.Reason}, true
	case policy.VerdictRequireApproval:
		c.result, c.evaluated = res, true
		return next()
	}
	d, _ := deny(SourcePolicy, "the policy returned an unknown verdict %s, so the call is denied", quote(string(res.Verdict)))
	d.Verdict, d.RuleID = res.Verdict, res.RuleID
	return d, true
}
