package gate

import "github.com/fluidbox/fluidbox/shared/policy"

// The shadow policy: a second frozen policy a run may carry, evaluated at
// the policy stage beside the enforced one, on the same tool name, input
// and environment (workspace, cwd, resolved paths), and recorded when the
// two differ. It is how a tighter policy is tried on real traffic before
// it is enforced.
//
// It never decides anything. Its result goes only into Decision.Shadow;
// it is computed after the enforced result, from values the enforced
// evaluation does not read back, and a panic inside it is caught here and
// becomes a shadow error, so no shadow can turn an allow into a deny or the
// reverse, nor fail a call.
//
// It runs only where the policy stage runs. A call an earlier stage
// decided (session, budget, frozen tool set, schema, trust tier) is denied
// whatever either policy says: no policy can widen those floors, so the
// shadow could not have differed, and its input may not even be one the
// frozen schema accepts, which the policy is never shown.
//
// The two are compared as policies decide, not as the run then settled the
// call: each side's verdict, with an autonomous run's require_approval
// rewritten by that side's own fallback (on_autonomous, then
// autonomy.on_approval_rule, else deny). Session grants are not consulted
// for the shadow: they answer approvals the enforced policy asked for, and
// a shadow require_approval is a question a human would have been asked.
// Two rules giving the same verdict are not a difference.

// ShadowError is why a shadow policy could not decide a call. Values are
// persisted (tool.decision's shadow_error): never rename one.
type ShadowError string

// Shadow errors.
const (
	// ShadowUnavailable: the run's frozen shadow document did not compile.
	ShadowUnavailable ShadowError = "shadow_unavailable"
	// ShadowFailed: evaluating the shadow failed internally.
	ShadowFailed ShadowError = "shadow_failed"
	// ShadowUnknownVerdict: the shadow returned a verdict the gate does
	// not know.
	ShadowUnknownVerdict ShadowError = "shadow_unknown_verdict"
)

// Shadow is what the shadow policy would have decided about one call, and
// how it compares with the enforced policy.
type Shadow struct {
	// Verdict and RuleID are the shadow's own result; Rewritten is what
	// an autonomous run's fallback made of its require_approval ("" when
	// nothing was rewritten). All empty when Error is set.
	Verdict   policy.Verdict
	Rewritten policy.Verdict
	RuleID    string
	Error     ShadowError
	// Enforced and EnforcedRuleID are the enforced policy's verdict, as
	// compared (rewritten in an autonomous run), and its rule.
	Enforced       policy.Verdict
	EnforcedRuleID string
	// Differs: the shadow's verdict as compared is not the enforced one's,
	// or the shadow could not decide.
	Differs bool
}

// Settled is the shadow's verdict as compared: Rewritten when set.
func (s Shadow) Settled() policy.Verdict {
	if s.Rewritten != "" {
		return s.Rewritten
	}
	return s.Verdict
}

// shadowOf evaluates the run's shadow policy on exactly what the enforced
// policy saw (the same prepared call, so a Bash line is analysed once for
// both), and compares it with the enforced result.
func shadowOf(run *Run, env policy.Env, pc *policy.Call, enforced policy.Result) (sh *Shadow) {
	sh = &Shadow{Enforced: settledVerdict(enforced, run.Autonomous), EnforcedRuleID: enforced.RuleID}
	defer func() {
		if r := recover(); r != nil {
			*sh = Shadow{Enforced: sh.Enforced, EnforcedRuleID: sh.EnforcedRuleID, Error: ShadowFailed, Differs: true}
		}
	}()
	if run.Shadow == nil {
		sh.Error, sh.Differs = ShadowUnavailable, true
		return sh
	}
	res := run.Shadow.EvaluateCall(env, pc)
	switch res.Verdict {
	case policy.VerdictAllow, policy.VerdictDeny, policy.VerdictRequireApproval:
	default:
		sh.Error, sh.Differs = ShadowUnknownVerdict, true
		return sh
	}
	sh.Verdict, sh.RuleID = res.Verdict, res.RuleID
	if v := settledVerdict(res, run.Autonomous); v != res.Verdict {
		sh.Rewritten = v
	}
	sh.Differs = sh.Settled() != sh.Enforced
	return sh
}

// settledVerdict is a policy result's verdict as an autonomous run settles
// it without a human: require_approval becomes the fallback, and any
// fallback but allow is deny, as the approval stage does.
func settledVerdict(res policy.Result, autonomous bool) policy.Verdict {
	if res.Verdict != policy.VerdictRequireApproval || !autonomous {
		return res.Verdict
	}
	if res.OnAutonomous == policy.VerdictAllow {
		return policy.VerdictAllow
	}
	return policy.VerdictDeny
}
