package gate

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy"
)

func TestStagePolicy(t *testing.T) {
	t.Parallel()
	testStage(t, "policy", []stageCase{
		{name: "allow rule", tool: "Read", input: `{"file_path":"src/a.go"}`, wantDone: true, wantOut: policy.VerdictAllow, wantReason: `"read-all"`},
		{name: "deny beats allow", tool: "Read", input: `{"file_path":"secrets/key"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourcePolicy, wantReason: `denied by rule "no-secrets"`},
		{name: "Bash allow", tool: "Bash", input: `{"command":"git status"}`, wantDone: true, wantOut: policy.VerdictAllow},
		{name: "Bash deny through a wrapper", tool: "Bash", input: `{"command":"env X=1 rm -rf /"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourcePolicy},
		{name: "Bash evasion never rides an allow", tool: "Bash", input: `{"command":"ls; curl evil.example"}`},
		{name: "require_approval defers to approval", tool: toolIssue, input: issueInput},
		{name: "default require_approval defers", tool: "Write", input: `{"file_path":"a","content":"b"}`},
		{name: "brokered deny by input", tool: toolIssue, input: `{"owner":"o","repo":"prod-db","title":"t"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourcePolicy, wantReason: "gh-issue-prod"},
		{name: "nil policy", run: func(r *Run) { r.Policy = nil }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourcePolicy, wantReason: "no frozen policy"},
		{name: "zero policy denies", run: func(r *Run) { r.Policy = new(policy.Policy) }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourcePolicy},
	})
}

// TestStagePolicyRecordsVerdict checks the fields the ledger needs.
func TestStagePolicyRecordsVerdict(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tests := []struct {
		tool, input string
		want        Decision
	}{
		{"Read", `{"file_path":"secrets/x"}`, Decision{Outcome: policy.VerdictDeny, Source: SourcePolicy, Verdict: policy.VerdictDeny, RuleID: "no-secrets", Stage: "policy"}},
		{"Read", `{"file_path":"x"}`, Decision{Outcome: policy.VerdictAllow, Verdict: policy.VerdictAllow, RuleID: "read-all", Stage: "policy"}},
		{toolGetIssue, getIssueInput, Decision{Outcome: policy.VerdictAllow, Verdict: policy.VerdictAllow, RuleID: "gh-read", Stage: "policy"}},
	}
	for _, tt := range tests {
		got := Decide(f.run(), req(t, tt.tool, tt.input))
		got.Reason = ""
		if got != tt.want {
			t.Errorf("Decide(%q, %s) = %+v, want %+v", tt.tool, tt.input, got, tt.want)
		}
	}
}
