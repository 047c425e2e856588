package gate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/trust"
)

var update = flag.Bool("update", false, "rewrite testdata/policy200.json")

// bench200Document is the benchmarks' policy: 200 rules of the kinds real
// policies hold (tool globs over MCP servers, input matchers by JSON
// pointer on the GitHub tools, Bash command prefixes, file path globs),
// ending with the rule that allows the benchmarked call. About 80 of them
// apply to mcp__github__create_issue and must be matched against its input;
// none of them matches except the last. bench/cedar translates the same
// document (testdata/policy200.json) into Cedar.
func bench200Document() policy.Document {
	doc := policy.Document{
		Name:           "bench-200",
		DefaultVerdict: policy.VerdictRequireApproval,
		Autonomy:       &policy.Autonomy{OnApprovalRule: policy.VerdictDeny},
	}
	add := func(r policy.Rule) { doc.Rules = append(doc.Rules, r) }
	for i := range 199 {
		id := fmt.Sprintf("r%03d", i)
		switch i % 10 {
		case 0:
			add(policy.Rule{ID: id, Tool: fmt.Sprintf("mcp__svc%d__*", i), Verdict: policy.VerdictRequireApproval})
		case 1:
			add(policy.Rule{ID: id, Tool: "mcp__github__create_issue", Verdict: policy.VerdictDeny,
				Match: &policy.Match{Input: map[string][]string{"/owner": {fmt.Sprintf("org%d", i), fmt.Sprintf("team%d-*", i)}}}})
		case 2:
			add(policy.Rule{ID: id, Tool: fmt.Sprintf("mcp__tool%d__op", i), Verdict: policy.VerdictAllow})
		case 3:
			add(policy.Rule{ID: id, Tool: "Bash", Verdict: policy.VerdictAllow,
				Match: &policy.Match{CommandPrefix: []string{fmt.Sprintf("tool%d run", i), fmt.Sprintf("git log -%d", i)}}})
		case 4:
			add(policy.Rule{ID: id, Tool: "mcp__github__*", Verdict: policy.VerdictRequireApproval,
				Match: &policy.Match{Input: map[string][]string{"/repo": {fmt.Sprintf("secret%d*", i)}}}})
		case 5:
			add(policy.Rule{ID: id, Tool: "Read", Verdict: policy.VerdictAllow,
				Match: &policy.Match{Path: []string{fmt.Sprintf("dir%d/**", i)}}})
		case 6:
			add(policy.Rule{ID: id, Tool: fmt.Sprintf("mcp__*__delete_%d", i), Verdict: policy.VerdictDeny})
		case 7:
			add(policy.Rule{ID: id, Tool: "mcp__github__create_issue", Verdict: policy.VerdictRequireApproval,
				Match: &policy.Match{Input: map[string][]string{"/title": {fmt.Sprintf("*secret%d*", i)}}}})
		case 8:
			add(policy.Rule{ID: id, Tool: "mcp__github__create_issue", Verdict: policy.VerdictDeny,
				Match: &policy.Match{Input: map[string][]string{"/milestone": {fmt.Sprintf("%d", i)}}}})
		case 9:
			add(policy.Rule{ID: id, Tool: "Bash", Verdict: policy.VerdictDeny,
				Match: &policy.Match{CommandPrefix: []string{fmt.Sprintf("curl%d", i)}}})
		}
	}
	add(policy.Rule{ID: "gh-issue-ours", Tool: "mcp__github__create_issue", Verdict: policy.VerdictAllow,
		Match: &policy.Match{Input: map[string][]string{"/owner": {"fluidbox"}, "/repo": {"fluidbox", "fluidbox-*"}}}})
	return doc
}

// TestPolicy200Testdata keeps testdata/policy200.json (read by bench/cedar)
// equal to bench200Document.
func TestPolicy200Testdata(t *testing.T) {
	t.Parallel()
	want, err := json.MarshalIndent(bench200Document(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	path := filepath.Join("testdata", "policy200.json")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date: go test -run TestPolicy200Testdata -update", path)
	}
	p := mustPolicy(t, string(got))
	if n := len(p.Document().Rules); n != 200 {
		t.Fatalf("policy200 has %d rules, want 200", n)
	}
}

// benchCall is the benchmarked call: the GitHub MCP server's create_issue,
// brokered, with its real input schema, in a trusted run.
func benchCall(b *testing.B) (*Run, Request) {
	b.Helper()
	p := mustPolicy(b, string(readTestdata(b, "policy200.json")))
	schema := mustSchema(b, string(readTestdata(b, "github_create_issue.schema.json")))
	run := &Run{
		AvailableMicros: 5_000_000,
		TrustTier:       trust.Trusted,
		Tools: map[string]*Tool{
			toolIssue: {Name: toolIssue, Class: capability.ClassWrite, Schema: schema, Callable: true, ConnectionID: conGitHub},
			"Read":    {Name: "Read", Class: capability.ClassRead, Schema: mustSchema(b, `{"type":"object"}`), Callable: true},
		},
		Policy: p,
		Bindings: map[string]Binding{
			conGitHub: {ConnectionID: conGitHub, Generation: conGitHubGen, Owner: "usr_alice", ToolSetDigest: conGitHubTool},
		},
	}
	r := Request{
		ToolName:    toolIssue,
		Input:       decode(b, string(readTestdata(b, "github_create_issue.input.json"))),
		Connections: map[string]Live{conGitHub: liveGitHub()},
	}
	return run, r
}

// BenchmarkDecide200Rules is the whole gate on the hot path: every stage
// runs, the schema validates the call, the policy walks its ~80 applicable
// rules and allows. Targets: < 50 µs/op, < 50 allocs/op.
func BenchmarkDecide200Rules(b *testing.B) {
	run, r := benchCall(b)
	if d := Decide(run, r); d.Outcome != policy.VerdictAllow || d.RuleID != "gh-issue-ours" {
		b.Fatalf("Decide = %+v, want allow by gh-issue-ours", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(run, r)
	}
}

// BenchmarkDecideParts splits the hot path, so an allocation regression can
// be pinned on its stage.
func BenchmarkDecideParts(b *testing.B) {
	run, r := benchCall(b)
	b.Run("schema_validate", func(b *testing.B) {
		s := run.Tools[toolIssue].Schema
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Validate(r.Input); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("policy_evaluate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			run.Policy.Evaluate(r.ToolName, r.Input)
		}
	})
	b.Run("stages_without_schema", func(b *testing.B) {
		cp := *run
		cp.Tools = map[string]*Tool{toolIssue: {Name: toolIssue, Class: capability.ClassWrite,
			Schema: mustSchema(b, `{}`), Callable: true, ConnectionID: conGitHub}}
		b.ReportAllocs()
		for b.Loop() {
			Decide(&cp, r)
		}
	})
	b.Run("deny_budget", func(b *testing.B) {
		cp := *run
		cp.AvailableMicros = 0
		b.ReportAllocs()
		for b.Loop() {
			Decide(&cp, r)
		}
	})
	b.Run("deny_schema", func(b *testing.B) {
		bad := Request{ToolName: toolIssue, Input: decode(b, `{"owner":"fluidbox","repo":7,"labels":"bug"}`), Connections: r.Connections}
		b.ReportAllocs()
		for b.Loop() {
			Decide(run, bad)
		}
	})
}

// BenchmarkDecideWithShadow is BenchmarkDecide200Rules in a run whose
// shadow policy is the same 200 rules: what a shadow adds to a decision is
// one more evaluation, and nothing else (no I/O, no lock).
func BenchmarkDecideWithShadow(b *testing.B) {
	run, r := benchCall(b)
	run.Shadow = run.Policy
	if d := Decide(run, r); d.Outcome != policy.VerdictAllow || d.Shadow == nil || d.Shadow.Differs {
		b.Fatalf("Decide = %+v (shadow %+v), want allow with an agreeing shadow", d, d.Shadow)
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(run, r)
	}
}

// BenchmarkDecideBashWithShadow is a Bash call in a read_only run with a
// shadow policy: the trust tier, the enforced policy and the shadow all
// ask about the same line, which is parsed and analysed once for the three.
func BenchmarkDecideBashWithShadow(b *testing.B) {
	f := newFixture(b)
	run := f.run()
	run.TrustTier = trust.ReadOnly
	run.Shadow = mustPolicy(b, shadowPolicy)
	r := req(b, "Bash", `{"command":"git status --short && git diff --stat HEAD~1 | head -20"}`)
	if d := Decide(run, r); d.Shadow == nil || d.Outcome == policy.VerdictDeny {
		b.Fatalf("Decide = %+v, want a decision with a shadow", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(run, r)
	}
}

// BenchmarkDecideGranted is the path a session grant answers: the policy
// says require_approval and the approval stage finds the run's grant for
// the rule that asked (it reads the rules a second time to learn which
// rules ask and how they key the call).
func BenchmarkDecideGranted(b *testing.B) {
	f := newFixture(b)
	run := f.run()
	run.Grants = grants("bash-push", "Bash:git push")
	r := req(b, "Bash", `{"command":"git push origin main"}`)
	if d := Decide(run, r); d.Outcome != policy.VerdictAllow || d.Grant != "Bash:git push" {
		b.Fatalf("Decide = %+v, want allow by the grant", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(run, r)
	}
}
