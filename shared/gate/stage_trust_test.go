package gate

import (
	"maps"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/trust"
)

func TestStageTrustTier(t *testing.T) {
	t.Parallel()
	readOnly := func(r *Run) { r.TrustTier = trust.ReadOnly }
	bashAsRead := func(r *Run) {
		readOnly(r)
		r.Tools = maps.Clone(r.Tools)
		b := *r.Tools["Bash"]
		b.Class = capability.ClassRead
		r.Tools["Bash"] = &b
	}
	testStage(t, "trust_tier", []stageCase{
		{name: "trusted write", tool: "Write", input: `{"file_path":"a","content":"b"}`},
		{name: "trusted execute", tool: "Bash", input: `{"command":"ls"}`},
		{name: "trusted egress", tool: "WebFetch", input: `{"file_path":"a"}`},
		{name: "trusted brokered", tool: toolIssue, input: issueInput},
		{name: "read_only read", run: readOnly, tool: "Read", input: `{"file_path":"a"}`},

		{name: "read_only write", run: readOnly, tool: "Write", input: `{"file_path":"a","content":"b"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: `class "write"`},
		// Bash's class is per call: read-only lines run in a read_only run.
		{name: "read_only bash read", run: readOnly, tool: "Bash", input: `{"command":"ls"}`},
		{name: "read_only bash git diff", run: readOnly, tool: "Bash", input: `{"command":"git diff && git log --oneline -5 | head -3"}`},
		{name: "read_only bash push", run: readOnly, tool: "Bash", input: `{"command":"git push"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "no approval can change that"},
		{name: "read_only bash diff output", run: readOnly, tool: "Bash", input: `{"command":"git diff --output=.git/config"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "--output"},
		{name: "read_only bash redirect", run: readOnly, tool: "Bash", input: `{"command":"ls > out"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "execute"},
		{name: "read_only bash opaque", run: readOnly, tool: "Bash", input: `{"command":"python3 -c 'print(1)'"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "python3"},

		// A Bash frozen with class read (a custom bundle can say so) is
		// still the shell: its lines are judged per call.
		{name: "read_only bash frozen as read", run: bashAsRead, tool: "Bash", input: `{"command":"git push"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "no approval can change that"},
		{name: "read_only bash frozen as read, a read line", run: bashAsRead, tool: "Bash", input: `{"command":"git status"}`},

		{name: "read_only egress", run: readOnly, tool: "WebFetch", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier},
		{name: "read_only brokered write", run: readOnly, tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "brokered"},
		{name: "read_only brokered read", run: readOnly, tool: toolGetIssue, input: getIssueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "brokered"},
		{name: "read_only unknown class", run: readOnly, tool: toolMystery, input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "no valid class"},
		{name: "trusted unknown class", tool: toolMystery, input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "no valid class"},
		{name: "empty tier", run: func(r *Run) { r.TrustTier = "" }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier, wantReason: "unknown"},
		{name: "unknown tier", run: func(r *Run) { r.TrustTier = "TRUSTED" }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceTrustTier},
	})
}

func TestStageTrustTierWithoutTool(t *testing.T) {
	t.Parallel()
	d, done := checkTrustTier(&call{run: &Run{TrustTier: trust.Trusted}, req: Request{ToolName: "Read"}})
	if !done || d.Outcome != policy.VerdictDeny || d.Source != SourceTrustTier {
		t.Fatalf("checkTrustTier(no tool) = %+v, %v, want deny/trust_tier", d, done)
	}
}
