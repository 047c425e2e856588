package gate

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// TestExplainMatchesDecide: for a live run with money left, Explain reaches
// Decide's answer and lists the stages that ran.
func TestExplainMatchesDecide(t *testing.T) {
	t.Parallel()
	p := mustPolicy(t, `{"name":"p","default_verdict":"require_approval","autonomy":{"on_approval_rule":"deny"},"rules":[
	  {"id":"read","tool":"Bash","match":{"command_prefix":["git diff"]},"verdict":"allow"},
	  {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"}]}`)
	bash := &Tool{Name: "Bash", Class: capability.ClassExecute, Callable: true, Schema: mustSchema(t, `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}
	tests := []struct {
		cmd        string
		tier       trust.Tier
		autonomous bool
		tool       *Tool
		want       policy.Verdict
		stages     []string
	}{
		{"git diff", trust.Trusted, false, bash, policy.VerdictAllow, []string{"schema", "trust_tier", "policy"}},
		{"git push", trust.Trusted, false, bash, policy.VerdictDeny, []string{"schema", "trust_tier", "policy"}},
		{"make", trust.Trusted, false, bash, policy.VerdictRequireApproval, []string{"schema", "trust_tier", "policy", "approval"}},
		{"make", trust.Trusted, true, bash, policy.VerdictDeny, []string{"schema", "trust_tier", "policy", "approval"}},
		{"make", trust.ReadOnly, false, bash, policy.VerdictDeny, []string{"schema", "trust_tier"}},
		{"make", trust.Trusted, false, nil, policy.VerdictRequireApproval, []string{"policy", "approval"}},
	}
	for _, tt := range tests {
		run := &Run{AvailableMicros: 1, TrustTier: tt.tier, Autonomous: tt.autonomous, Policy: p, Tools: map[string]*Tool{"Bash": bash}}
		req := Request{ToolName: "Bash", Input: map[string]any{"command": tt.cmd}}
		d, steps := Explain(run, req, tt.tool)
		if d.Outcome != tt.want {
			t.Errorf("Explain(%q, %s, autonomous %v) = %s (%s), want %s", tt.cmd, tt.tier, tt.autonomous, d.Outcome, d.Reason, tt.want)
		}
		if tt.tool != nil {
			if g := Decide(run, req); g.Outcome != d.Outcome || g.Reason != d.Reason || g.RuleID != d.RuleID {
				t.Errorf("Explain(%q) = %+v, Decide = %+v", tt.cmd, d, g)
			}
		}
		var got []string
		for _, s := range steps {
			got = append(got, s.Stage)
		}
		if len(got) != len(tt.stages) {
			t.Fatalf("Explain(%q) stages = %v, want %v", tt.cmd, got, tt.stages)
		}
		for i := range got {
			if got[i] != tt.stages[i] {
				t.Errorf("Explain(%q) stages = %v, want %v", tt.cmd, got, tt.stages)
			}
		}
		if last := steps[len(steps)-1]; last.Outcome != string(d.Outcome) {
			t.Errorf("Explain(%q) last step %+v, decision %s", tt.cmd, last, d.Outcome)
		}
	}
}
