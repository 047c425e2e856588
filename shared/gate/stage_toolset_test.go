package gate

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy"
)

func TestStageToolSet(t *testing.T) {
	t.Parallel()
	withLive := func(mut func(*Live)) func(*Request) {
		return func(r *Request) {
			l := r.Connections[conGitHub]
			mut(&l)
			r.Connections[conGitHub] = l
		}
	}
	testStage(t, "tool_set", []stageCase{
		{name: "sandbox tool", tool: "Read", input: `{"file_path":"a"}`},
		{name: "brokered tool, binding as frozen", tool: toolIssue, input: issueInput},
		{name: "shared connection (no owner), owner active", run: func(r *Run) {
			b := r.Bindings[conGitHub]
			b.Owner = ""
			r.Bindings[conGitHub] = b
		}, tool: toolIssue, input: issueInput},

		{name: "unknown tool", tool: "mcp__github__delete_repo", input: `{}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceCapability, wantReason: "not in this run's frozen tool set"},
		{name: "empty tool name", tool: "", input: `{}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceCapability},
		{name: "case matters", tool: "read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceCapability},
		{name: "nil tool set", run: func(r *Run) { r.Tools = nil }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceCapability},
		{name: "nil frozen tool", run: func(r *Run) { r.Tools = map[string]*Tool{"Read": nil} }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceCapability},
		{name: "frozen under another name", run: func(r *Run) {
			r.Tools = map[string]*Tool{"Read": r.Tools["Write"]}
		}, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceCapability, wantReason: "inconsistent"},

		{name: "binding missing", run: func(r *Run) { r.Bindings = nil }, tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding, wantReason: "no frozen binding"},
		{name: "binding names another connection", run: func(r *Run) {
			b := r.Bindings[conGitHub]
			b.ConnectionID = "con_other"
			r.Bindings = map[string]Binding{conGitHub: b}
		}, tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding},
		{name: "live state not read", req: func(r *Request) { r.Connections = nil }, tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding, wantReason: "no longer exists"},
		{name: "connection deleted", req: withLive(func(l *Live) { l.Found = false }), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding, wantReason: "no longer exists"},
		{name: "connection revoked", req: withLive(func(l *Live) { l.Status = ConnectionRevoked }), tool: toolGetIssue, input: getIssueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding, wantReason: "not active"},
		{name: "unknown status", req: withLive(func(l *Live) { l.Status = "Active" }), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding},
		{name: "empty status", req: withLive(func(l *Live) { l.Status = "" }), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding},
		{name: "generation bumped", req: withLive(func(l *Live) { l.Generation++ }), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding, wantReason: "re-authorized"},
		{name: "generation lower", req: withLive(func(l *Live) { l.Generation-- }), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding},
		{name: "owner inactive", req: withLive(func(l *Live) { l.OwnerActive = false }), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding, wantReason: "no longer an active member"},
		{name: "frozen digest missing", run: func(r *Run) {
			b := r.Bindings[conGitHub]
			b.ToolSetDigest = ""
			r.Bindings = map[string]Binding{conGitHub: b}
		}, req: withLive(func(l *Live) { l.ToolSetDigest = "" }), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding, wantReason: "no frozen tool-set digest"},

		{name: "tool set drifted", req: withLive(func(l *Live) { l.ToolSetDigest = "sha256:tools-v2" }), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceCapability, wantReason: "changed since this run started"},
		{name: "revoked and drifted: binding first", req: withLive(func(l *Live) {
			l.Status = ConnectionRevoked
			l.ToolSetDigest = "sha256:tools-v2"
		}), tool: toolIssue, input: issueInput,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceBinding},
	})
}
