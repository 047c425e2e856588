package api_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestEvaluatePolicy: a call decided against a stored policy (latest or a
// version) with the gate's stages from the schema on, a trace of each, and
// for Bash the analysis; nothing is written.
func TestEvaluatePolicy(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(`{"name":"ev","default_verdict":"require_approval","autonomy":{"on_approval_rule":"deny"},"rules":[
	  {"id":"read","tool":"Bash","match":{"command_prefix":["git diff","git log"]},"verdict":"allow"},
	  {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"},
	  {"id":"src","tool":"Read","match":{"path":["src/**"]},"verdict":"allow"},
	  {"id":"jira","tool":"mcp__jira__*","verdict":"allow"}]}`)
	s.must(200, "PUT", "/v1/policies/"+pol, adminToken, `{"name":"ev2","default_verdict":"deny","rules":[]}`)
	before := len(s.items())

	v1 := "/v1/policies/" + pol + "/versions/1/evaluate"
	checkEvaluations(t, s, pol, v1)
	// The latest version is version 2, which denies everything.
	if out := s.evaluate("/v1/policies/"+pol+"/evaluate", map[string]any{"tool_name": "Bash", "input": bash("git diff")}); out["decision"] != "deny" || out["policy_version"] != 2.0 {
		t.Errorf("latest = %v version %v, want deny by version 2", out["decision"], out["policy_version"])
	}

	checkBashTrace(t, s, v1)
	checkEvaluateRefusals(t, s, pol, v1)
	if after := len(s.items()); after != before {
		t.Errorf("items after evaluations = %d, want %d: an evaluation writes nothing", after, before)
	}
	// A run's token cannot evaluate: 403, with a hint.
	_, tok := s.gateRun(pol, runOpts{budget: 1})
	if r := s.do("POST", v1, tok, map[string]any{"tool_name": "Bash", "input": bash("ls")}); r.status != 403 {
		t.Errorf("evaluate with a session token = %d, want 403", r.status)
	}
}

// evaluate posts body to an evaluate path as the operator.
func (s *stack) evaluate(path string, body map[string]any) map[string]any {
	s.t.Helper()
	return s.must(200, "POST", path, adminToken, body)
}

// traceStages lists an evaluation's stages as stage:outcome.
func traceStages(out map[string]any) string {
	var names []string
	for _, st := range out["trace"].(map[string]any)["stages"].([]any) {
		m := st.(map[string]any)
		names = append(names, fmt.Sprintf("%s:%s", m["stage"], m["outcome"]))
	}
	return strings.Join(names, " ")
}

// checkEvaluations: calls decided against version 1 of pol, with the
// stages each went through.
func checkEvaluations(t *testing.T, s *stack, pol, v1 string) {
	t.Helper()
	tests := []struct {
		name   string
		body   map[string]any
		want   string
		rule   string
		stages string
	}{
		{"allowed compound", map[string]any{"tool_name": "Bash", "input": bash("git diff && git log -3")}, "allow", "read", "schema:pass trust_tier:pass policy:allow"},
		{"denied through a wrapper", map[string]any{"tool_name": "Bash", "input": bash("sudo git -C x push")}, "deny", "no-push", "schema:pass trust_tier:pass policy:deny"},
		{"pending", map[string]any{"tool_name": "Bash", "input": bash("make")}, "require_approval", "", "schema:pass trust_tier:pass policy:pass approval:require_approval"},
		{"autonomous fallback", map[string]any{"tool_name": "Bash", "input": bash("make"), "autonomous": true}, "deny", "", "schema:pass trust_tier:pass policy:pass approval:deny"},
		{"read_only tier", map[string]any{"tool_name": "Bash", "input": bash("make"), "trust_tier": "read_only"}, "deny", "", "schema:pass trust_tier:deny"},
		{"read_only reads", map[string]any{"tool_name": "Bash", "input": bash("git diff"), "trust_tier": "read_only"}, "allow", "read", "schema:pass trust_tier:pass policy:allow"},
		{"schema", map[string]any{"tool_name": "Bash", "input": map[string]any{"cmd": "ls"}}, "deny", "", "schema:deny"},
		{"workspace", map[string]any{"tool_name": "Read", "input": map[string]any{"file_path": "/work/app/src/a.go"}, "workspace": "/work/app"}, "allow", "src", "schema:pass trust_tier:pass policy:allow"},
		{"no workspace", map[string]any{"tool_name": "Read", "input": map[string]any{"file_path": "/work/app/src/a.go"}}, "require_approval", "", "schema:pass trust_tier:pass policy:pass approval:require_approval"},
		{"symlink", map[string]any{"tool_name": "Read", "input": map[string]any{"file_path": "/work/app/src/a.go"}, "workspace": "/work/app", "resolved_paths": map[string]any{"file_path": "/etc/passwd"}}, "require_approval", "", "schema:pass trust_tier:pass policy:pass approval:require_approval"},
		{"mcp tool, no class", map[string]any{"tool_name": "mcp__jira__create_issue", "input": map[string]any{"project": "OPS"}}, "allow", "jira", "policy:allow"},
		{"mcp tool, read_only, write class", map[string]any{"tool_name": "mcp__jira__create_issue", "input": map[string]any{}, "class": "write", "trust_tier": "read_only"}, "deny", "", "schema:pass trust_tier:deny"},
	}
	for _, tt := range tests {
		out := s.evaluate(v1, tt.body)
		if out["decision"] != tt.want || str(out["rule_id"]) != tt.rule || traceStages(out) != tt.stages {
			t.Errorf("%s: %v rule %v stages %q, want %s rule %q stages %q (%v)", tt.name, out["decision"], out["rule_id"], traceStages(out), tt.want, tt.rule, tt.stages, out["reason"])
		}
		if out["policy_id"] != pol || out["policy_version"] != 1.0 || !strings.HasPrefix(str(out["digest"]), "sha256:") {
			t.Errorf("%s: evaluated %v version %v digest %v, want %s version 1", tt.name, out["policy_id"], out["policy_version"], out["digest"], pol)
		}
	}
}

// checkBashTrace: Bash's analysis in the trace.
func checkBashTrace(t *testing.T, s *stack, v1 string) {
	t.Helper()
	out := s.evaluate(v1, map[string]any{"tool_name": "Bash", "input": bash("git --no-pager diff --stat | head -3 && echo $(git push)")})
	b := out["trace"].(map[string]any)["bash"].(map[string]any)
	if b["parsed"] != true || len(b["commands"].([]any)) != 0 || !strings.Contains(str(b["not_plain"]), "substitution") || b["read_only"] != false {
		t.Errorf("bash trace = %v, want parsed, no plain commands (a substitution), not read-only", b)
	}
	norm := fmt.Sprint(b["normalized"])
	if !strings.Contains(norm, "[git push]") || !strings.Contains(norm, "[head -3]") {
		t.Errorf("bash normalized = %s, want git push and head -3 among them", norm)
	}
	out = s.evaluate(v1, map[string]any{"tool_name": "Bash", "input": bash("git --no-pager diff --stat | head -3")})
	b = out["trace"].(map[string]any)["bash"].(map[string]any)
	if want := []any{[]any{"git", "diff", "--stat"}, []any{"head", "-3"}}; !reflect.DeepEqual(b["commands"], want) || b["read_only"] != true {
		t.Errorf("bash trace = %v, want commands %v and read-only", b, want)
	}
	out = s.evaluate(v1, map[string]any{"tool_name": "Bash", "input": bash("curl x | sh")})
	b = out["trace"].(map[string]any)["bash"].(map[string]any)
	if !strings.Contains(str(b["opaque"]), "`sh` reads code from stdin") || out["decision"] != "require_approval" || out["rule_id"] != "no-push" {
		t.Errorf("opaque line = %v %v, trace %v", out["decision"], out["rule_id"], b)
	}
}

// checkEvaluateRefusals: a request without a tool, with a bad tier,
// workspace, class or field is 400; an unknown version or policy 404.
func checkEvaluateRefusals(t *testing.T, s *stack, pol, v1 string) {
	t.Helper()
	for _, bad := range []struct {
		path string
		body any
		want int
	}{
		{v1, map[string]any{"input": bash("ls")}, 400},
		{v1, map[string]any{"tool_name": "Bash", "input": bash("ls"), "trust_tier": "root"}, 400},
		{v1, map[string]any{"tool_name": "Bash", "input": bash("ls"), "workspace": "rel"}, 400},
		{v1, map[string]any{"tool_name": "x", "input": map[string]any{}, "class": "god"}, 400},
		{v1, map[string]any{"tool_name": "Bash", "input": bash("ls"), "bogus": 1}, 400},
		{"/v1/policies/" + pol + "/versions/9/evaluate", map[string]any{"tool_name": "Bash", "input": bash("ls")}, 404},
		{"/v1/policies/pol_nope/evaluate", map[string]any{"tool_name": "Bash", "input": bash("ls")}, 404},
	} {
		if r := s.do("POST", bad.path, adminToken, bad.body); r.status != bad.want {
			t.Errorf("POST %s %v = %d %s, want %d", bad.path, bad.body, r.status, r.raw, bad.want)
		}
	}
}

// TestPolicyTestsAtCreate: a document whose tests fail is refused at create
// and update with the failures listed; one whose tests pass is stored with
// them.
func TestPolicyTestsAtCreate(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const doc = `{"name":"t","default_verdict":"deny","rules":[{"id":"read","tool":"Bash","match":{"command_prefix":["git diff"]},"verdict":"allow"}],"tests":[
	  {"name":"diff","tool_name":"Bash","input":{"command":"git diff"},"expect":"allow"},
	  {"name":"push","tool_name":"Bash","input":{"command":"git push"},"expect":%q}]}`
	before := len(s.items())
	r := s.do("POST", "/v1/policies", adminToken, fmt.Sprintf(doc, "allow"))
	msg := fmt.Sprint(r.body["error"])
	if r.status != 400 || !strings.Contains(msg, "1 of the document's 2 tests failed") || !strings.Contains(msg, "tests[1] push: expected allow, got deny") {
		t.Errorf("create with a failing test = %d %s", r.status, r.raw)
	}
	if after := len(s.items()); after != before {
		t.Errorf("a refused document wrote %d items", after-before)
	}
	created := s.must(201, "POST", "/v1/policies", adminToken, fmt.Sprintf(doc, "deny"))
	if tests, _ := created["document"].(map[string]any)["tests"].([]any); len(tests) != 2 {
		t.Errorf("stored document tests = %v, want both", created["document"])
	}
	if r := s.do("PUT", "/v1/policies/"+created["id"].(string), adminToken, fmt.Sprintf(doc, "require_approval")); r.status != 400 || !strings.Contains(string(r.raw), "expected require_approval, got deny") {
		t.Errorf("update with a failing test = %d %s", r.status, r.raw)
	}
}

// TestEvaluateBrokeredInReadOnly: evaluate judges a tool named as an
// existing connection's brokered tool as the gate does: a read_only run may
// never call it, whatever class is given; a name of no connection is
// judged by its class.
func TestEvaluateBrokeredInReadOnly(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, canary)
	s := newBrokerStack(t, localSealer(t), 0)
	s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "jira", "url": up.url(), "kind": "shared",
		"credential": map[string]any{"type": "bearer", "token": canary}, "tool_classes": map[string]string{"echo": "read"},
	})
	pol := s.policy(`{"name":"b","default_verdict":"deny","rules":[{"id":"mcp","tool":"mcp__*","verdict":"allow"}]}`)
	eval := func(tool, tier string) map[string]any {
		t.Helper()
		return s.want(200, "POST", "/v1/policies/"+pol+"/evaluate", adminToken, map[string]any{
			"tool_name": tool, "input": map[string]any{}, "trust_tier": tier, "class": "read"})
	}
	if out := eval("mcp__jira__echo", "read_only"); out["decision"] != "deny" || out["source"] != "trust_tier" || !strings.Contains(fmt.Sprint(out["reason"]), "brokered") {
		t.Errorf("a connection's tool in a read_only run = %v, want the gate's trust_tier deny", out)
	}
	if out := eval("mcp__jira__echo", "trusted"); out["decision"] != "allow" {
		t.Errorf("a connection's tool in a trusted run = %v, want allow", out)
	}
	if out := eval("mcp__local__echo", "read_only"); out["decision"] != "allow" {
		t.Errorf("a sandbox MCP tool of class read in a read_only run = %v, want allow", out)
	}
}
