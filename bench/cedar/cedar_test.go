package cedar

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// The benchmark's fixtures live with the gate, so both benchmarks read the
// very same policy, schema and call.
var gateTestdata = filepath.Join("..", "..", "shared", "gate", "testdata")

const (
	toolIssue = "mcp__github__create_issue"
	conGitHub = "con_github"
)

func read(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(gateTestdata, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func decode(tb testing.TB, s string) any {
	tb.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("decode %q: %v", s, err)
	}
	return v
}

// both returns the compiled fluidbox policy and its Cedar translation.
func both(tb testing.TB) (*policy.Policy, *Engine) {
	tb.Helper()
	p, _, err := policy.Parse(read(tb, "policy200.json"))
	if err != nil {
		tb.Fatal(err)
	}
	e, text, err := New(p.Document())
	if err != nil {
		tb.Fatalf("New: %v\n%s", err, text)
	}
	return p, e
}

func TestTranslationParses(t *testing.T) {
	t.Parallel()
	_, e := both(t)
	n := 0
	for range e.set.All() {
		n++
	}
	if n != 200 {
		t.Fatalf("translated %d policies, want 200", n)
	}
}

// TestTranslationAgrees checks that Cedar and policy.Evaluate give the same
// verdict and rule for calls the translation models exactly (no Bash and
// no file paths: see the package comment).
func TestTranslationAgrees(t *testing.T) {
	t.Parallel()
	p, e := both(t)
	calls := []struct{ tool, input string }{
		{toolIssue, string(read(t, "github_create_issue.input.json"))},
		{toolIssue, `{"owner":"fluidbox","repo":"fluidbox-docs","title":"t"}`},
		{toolIssue, `{"owner":"fluidbox","repo":"other","title":"t"}`},
		{toolIssue, `{"owner":"org1","repo":"fluidbox","title":"t"}`},
		{toolIssue, `{"owner":"team11-infra","repo":"fluidbox","title":"t"}`},
		{toolIssue, `{"owner":"fluidbox","repo":"secret4-vault","title":"t"}`},
		{toolIssue, `{"owner":"fluidbox","repo":"fluidbox","title":"leak of secret17 today"}`},
		{toolIssue, `{"owner":"fluidbox","repo":"fluidbox","title":"t","milestone":18}`},
		{toolIssue, `{"owner":"fluidbox","repo":"fluidbox","title":"t","milestone":19}`},
		{toolIssue, `{"owner":"fluidbox","repo":"fluidbox","title":"t","milestone":null}`},
		{toolIssue, `{}`},
		{"mcp__github__get_issue", `{"owner":"fluidbox","repo":"secret14x"}`},
		{"mcp__github__get_issue", `{"owner":"fluidbox","repo":"fluidbox"}`},
		{"mcp__svc10__anything", `{}`},
		{"mcp__tool12__op", `{}`},
		{"mcp__jira__delete_16", `{}`},
		{"mcp__jira__delete_17", `{}`},
		{"Write", `{"file_path":"a"}`},
	}
	for _, c := range calls {
		in := decode(t, c.input)
		want := p.Evaluate(c.tool, in)
		req, ents, err := Request("ses_test", c.tool, "write", conGitHub, in)
		if err != nil {
			t.Fatalf("Request(%q): %v", c.tool, err)
		}
		got, rule, diag := e.Authorize(req, ents)
		if got != want.Verdict || rule != want.RuleID {
			t.Errorf("cedar(%q, %s) = %s by %q, want %s by %q (diag %+v)", c.tool, c.input, got, rule, want.Verdict, want.RuleID, diag)
		}
	}
}

// gateRun is the same run as the gate's own BenchmarkDecide200Rules.
func gateRun(tb testing.TB, p *policy.Policy) (*gate.Run, gate.Request) {
	tb.Helper()
	schema, err := schemaguard.Compile(read(tb, "github_create_issue.schema.json"))
	if err != nil {
		tb.Fatal(err)
	}
	run := &gate.Run{
		AvailableMicros: 5_000_000,
		TrustTier:       trust.Trusted,
		Tools: map[string]*gate.Tool{
			toolIssue: {Name: toolIssue, Class: capability.ClassWrite, Schema: schema, Callable: true, ConnectionID: conGitHub},
		},
		Policy:   p,
		Bindings: map[string]gate.Binding{conGitHub: {ConnectionID: conGitHub, Generation: 3, Owner: "usr_alice", ToolSetDigest: "sha256:tools-v1"}},
	}
	r := gate.Request{
		ToolName: toolIssue,
		Input:    decode(tb, string(read(tb, "github_create_issue.input.json"))),
		Connections: map[string]gate.Live{conGitHub: {Found: true, Status: gate.ConnectionActive, Generation: 3,
			ToolSetDigest: "sha256:tools-v1", OwnerActive: true}},
	}
	return run, r
}

// BenchmarkGate200Rules runs next to the Cedar benchmarks over the same
// rules and call: the whole gate (every stage, schema validation
// included), and the policy stage alone, which is what Cedar does.
func BenchmarkGate200Rules(b *testing.B) {
	p, _ := both(b)
	run, r := gateRun(b, p)
	if d := gate.Decide(run, r); d.Outcome != policy.VerdictAllow || d.RuleID != "gh-issue-ours" {
		b.Fatalf("gate.Decide = %+v, want allow by gh-issue-ours", d)
	}
	b.Run("decide_with_schema", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			gate.Decide(run, r)
		}
	})
	b.Run("policy_only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.Evaluate(r.ToolName, r.Input)
		}
	})
}

// BenchmarkCedar200Rules: cedar-go deciding the same call against the
// same 200 rules. "authorize" is cedar.Authorize on a prepared request;
// "request_and_authorize" also converts the decoded input and builds the
// entities, which a Cedar-based gate would do on every call.
func BenchmarkCedar200Rules(b *testing.B) {
	_, e := both(b)
	in := decode(b, string(read(b, "github_create_issue.input.json")))
	req, ents, err := Request("ses_bench", toolIssue, "write", conGitHub, in)
	if err != nil {
		b.Fatal(err)
	}
	if v, rule, diag := e.Authorize(req, ents); v != policy.VerdictAllow || rule != "gh-issue-ours" || len(diag.Errors) > 0 {
		b.Fatalf("Authorize = %s by %q (%+v), want allow by gh-issue-ours", v, rule, diag)
	}
	b.Run("authorize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e.Authorize(req, ents)
		}
	})
	b.Run("request_and_authorize", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req, ents, _ := Request("ses_bench", toolIssue, "write", conGitHub, in)
			e.Authorize(req, ents)
		}
	})
}

// TestTranslationText pins a few translated policies, so the benchmark's
// Cedar reads as a human would write it.
func TestTranslationText(t *testing.T) {
	t.Parallel()
	p, _ := both(t)
	text, err := Translate(p.Document())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"@rule(\"r000\")\n@verdict(\"require_approval\")\nforbid (principal, action == Action::\"call_tool\", resource)\nwhen { resource.name like \"mcp__svc0__*\" };",
		"@rule(\"r001\")\n@verdict(\"deny\")\nforbid (principal, action == Action::\"call_tool\", resource == Tool::\"mcp__github__create_issue\")\nwhen { context.input has \"owner\" && (context.input[\"owner\"] like \"org1\" || context.input[\"owner\"] like \"team1-*\") };",
		"@rule(\"gh-issue-ours\")\n@verdict(\"allow\")\npermit (principal, action == Action::\"call_tool\", resource == Tool::\"mcp__github__create_issue\")",
	} {
		if !bytes.Contains([]byte(text), []byte(want)) {
			t.Errorf("Translate() lacks\n%s", want)
		}
	}
}
