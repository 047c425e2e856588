package gate

import "github.com/fluidbox/fluidbox/shared/policy"

// Step is one stage of an explained decision: its name and what it did,
// "pass" or the outcome it decided with.
type Step struct {
	Stage   string `json:"stage"`
	Outcome string `json:"outcome"`
	Source  Source `json:"source,omitempty"`
	RuleID  string `json:"rule_id,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// StepPass is the outcome of a stage that let the call through.
const StepPass = "pass"

// callStages are the stages that judge the call itself rather than the
// run's state (its session, its money): the only ones an evaluation
// without a run can run.
var callStages = map[string]bool{"schema": true, "trust_tier": true, "policy": true, "approval": true}

// Explain decides req the way Decide would in a run that is live, has
// money left and froze tool, running the same stages from the frozen
// schema on and reporting each one that ran. A nil tool (one no bundle
// describes) skips the schema and trust tier stages, which need the
// tool's frozen schema and class; the policy and approval stages still
// run. Nothing is recorded anywhere: this is the pure decision.
func Explain(run *Run, req Request, tool *Tool) (d Decision, steps []Step) {
	c := &call{run: run, req: req, tool: tool}
	i := 0
	defer func() {
		if r := recover(); r != nil {
			s := stages[min(i, len(stages)-1)]
			d = Decision{Outcome: policy.VerdictDeny, Source: s.source, Stage: s.name, Reason: reasonPanic, Panicked: true}
			steps = append(steps, Step{Stage: s.name, Outcome: string(policy.VerdictDeny), Source: s.source, Reason: reasonPanic})
		}
	}()
	for ; i < len(stages); i++ {
		s := stages[i]
		if !callStages[s.name] || tool == nil && (s.name == "schema" || s.name == "trust_tier") {
			continue
		}
		dec, done := s.decide(c)
		if !done {
			steps = append(steps, Step{Stage: s.name, Outcome: StepPass})
			continue
		}
		dec.Stage = s.name
		dec = settle(dec)
		steps = append(steps, Step{Stage: s.name, Outcome: string(dec.Outcome), Source: dec.Source, RuleID: dec.RuleID, Reason: dec.Reason})
		return dec, steps
	}
	d = Decision{Outcome: policy.VerdictDeny, Source: SourcePolicy, Stage: "gate", Reason: "no stage of the gate allowed this call, so it is denied"}
	return d, steps
}
