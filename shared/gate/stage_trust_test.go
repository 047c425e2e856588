package gate

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/trust"
)

func TestStageTrustTier(t *testing.T) {
	t.Parallel()
	readOnly := func(r *Run) { r.TrustTier = trust.ReadOnly }
	testStage(t, "trust_tier", []stageCase{
		{name: "trusted write", tool: "Write", input: `{"file_path":"a","content":"b"}`},
		{name: "trusted execute", tool: "Bash", input: `{"command":"ls"}`},
		{name: "trusted egress", tool: "WebFetch", input: `{"file_path":"a"}`},
		{name: "trusted brokered", tool: toolIssue, input: issueInput},
		{name: "read_only read", run: readOnly, tool: "Read", input: `{"file_path":"a"}`},

		{name: "read_only write", run: readOnly, tool: "Write", input: `{"file_path":"a","content":"b"}`,
			wantDone: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantReason: `class "write"`},
		{name: "read_only execute", run: readOnly, tool: "Bash", input: `{"command":"ls"}`,
			wantDone: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantReason: "no approval can change that"},
		{name: "read_only egress", run: readOnly, tool: "WebFetch", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier},
		{name: "read_only brokered write", run: readOnly, tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantReason: "brokered"},
		{name: "read_only brokered read", run: readOnly, tool: toolGetIssue, input: getIssueInput,
			wantDone: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantReason: "brokered"},
		{name: "read_only unknown class", run: readOnly, tool: toolMystery, input: `{"file_path":"a"}`,
			wantDone: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantReason: "no valid class"},
		{name: "trusted unknown class", tool: toolMystery, input: `{"file_path":"a"}`,
			wantDone: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantReason: "no valid class"},
		{name: "empty tier", run: func(r *Run) { r.TrustTier = "" }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier, wantReason: "unknown"},
		{name: "unknown tier", run: func(r *Run) { r.TrustTier = "TRUSTED" }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: OutcomeDeny, wantSource: SourceTrustTier},
	})
}

func TestStageTrustTierWithoutTool(t *testing.T) {
	t.Parallel()
	d, done := checkTrustTier(&call{run: &Run{TrustTier: trust.Trusted}, req: Request{ToolName: "Read"}})
	if !done || d.Outcome != OutcomeDeny || d.Source != SourceTrustTier {
		t.Fatalf("checkTrustTier(no tool) = %+v, %v, want deny/trust_tier", d, done)
	}
}
