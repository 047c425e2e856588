package gate

import (
	"math"
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy"
)

func TestStageBudget(t *testing.T) {
	t.Parallel()
	testStage(t, "budget", []stageCase{
		{name: "money left", tool: "Read", input: `{"file_path":"a"}`},
		{name: "one micro-dollar left", run: func(r *Run) { r.AvailableMicros = 1 }, tool: "Read", input: `{"file_path":"a"}`},
		{name: "exhausted", run: func(r *Run) { r.AvailableMicros = 0 }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBudget, wantReason: "budget is exhausted"},
		{name: "overdrawn", run: func(r *Run) { r.AvailableMicros = -5 }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBudget},
		{name: "most negative", run: func(r *Run) { r.AvailableMicros = math.MinInt64 }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBudget},
		// Nothing else is looked at: an unknown tool, a nil policy and an
		// unknown tier are still a budget denial.
		{name: "exhausted looks at nothing else", run: func(r *Run) {
			r.AvailableMicros = 0
			r.Policy = nil
			r.Tools = nil
			r.TrustTier = "???"
		}, tool: "NoSuchTool", input: `null`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBudget},
	})
}
