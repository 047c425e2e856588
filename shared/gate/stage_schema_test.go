package gate

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
)

func TestStageSchema(t *testing.T) {
	t.Parallel()
	swapTool := func(name string, mut func(*Tool)) func(*Run) {
		return func(r *Run) {
			tools := make(map[string]*Tool, len(r.Tools))
			for k, v := range r.Tools {
				tools[k] = v
			}
			cp := *tools[name]
			mut(&cp)
			tools[name] = &cp
			r.Tools = tools
		}
	}
	testStage(t, "schema", []stageCase{
		{name: "valid sandbox call", tool: "Bash", input: `{"command":"ls -la","timeout":30}`},
		{name: "valid brokered call", tool: toolIssue, input: issueInput},
		{name: "full GitHub call", tool: toolIssue, input: string(readTestdata(t, "github_create_issue.input.json"))},

		{name: "required property missing", tool: toolIssue, input: `{"owner":"fluidbox","repo":"fluidbox"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantReason: "fix them and call again: input.title: required property missing"},
		{name: "wrong type", tool: toolIssue, input: `{"owner":"fluidbox","repo":"fluidbox","title":"t","milestone":"seven"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantReason: "input.milestone"},
		{name: "array of the wrong items", tool: toolIssue, input: `{"owner":"o","repo":"r","title":"t","labels":[1]}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantReason: "input.labels[0]"},
		{name: "extra property refused", tool: "Bash", input: `{"command":"ls","dangerouslyDisableSandbox":true}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantReason: "input.dangerouslyDisableSandbox: property is not allowed"},
		{name: "bound violated", tool: "Bash", input: `{"command":"ls","timeout":0}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantReason: "input.timeout"},
		{name: "not an object", tool: "Bash", input: `"ls"`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema},
		{name: "null input", tool: "Bash", input: `null`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema},
		{name: "huge number", tool: toolIssue, input: `{"owner":"o","repo":"r","title":"t","milestone":1e999999}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema},

		{name: "frozen un-callable", tool: toolBroken, input: `{}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantReason: "cannot be called in this run: schema nests deeper than 32 levels"},
		{name: "un-callable without a reason", run: swapTool(toolBroken, func(t *Tool) { t.Reason = "" }), tool: toolBroken, input: `{}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantReason: "rejected when the run was created"},
		{name: "un-callable with a schema is still un-callable", run: swapTool("Read", func(t *Tool) { t.Callable = false }), tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema},
		{name: "callable without a schema", run: swapTool("Read", func(t *Tool) { t.Schema = nil }), tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema, wantReason: "no frozen input schema"},
		{name: "zero schema rejects", run: swapTool("Write", func(t *Tool) { t.Schema, t.Class = new(schemaguard.Schema), capability.ClassWrite }), tool: "Write", input: `{"file_path":"a","content":"b"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSchema},
	})
}

func TestStageSchemaWithoutTool(t *testing.T) {
	t.Parallel()
	d, done := checkSchema(&call{run: &Run{}, req: Request{ToolName: "Read"}})
	if !done || d.Outcome != policy.VerdictDeny || d.Source != SourceSchema {
		t.Fatalf("checkSchema(no tool) = %+v, %v, want deny/schema", d, done)
	}
}
