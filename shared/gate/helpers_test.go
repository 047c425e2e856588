package gate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/schemaguard"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// Fixture names.
const (
	conGitHub     = "con_github"
	conGitHubGen  = 3
	conGitHubTool = "sha256:tools-v1"
	toolIssue     = "mcp__github__create_issue"
	toolGetIssue  = "mcp__github__get_issue"
	toolBroken    = "mcp__github__broken"
	toolMystery   = "Mystery" // frozen with a class nobody knows
)

// testPolicy is the frozen policy of the fixture run.
const testPolicy = `{
  "name": "gate-tests",
  "default_verdict": "require_approval",
  "autonomy": {"on_approval_rule": "deny"},
  "approval": {"scope": "once", "ttl_seconds": 600},
  "rules": [
    {"id": "read-all", "tool": "Read", "verdict": "allow"},
    {"id": "no-secrets", "tool": "Read", "match": {"path": ["secrets/**"]}, "verdict": "deny"},
    {"id": "bash-safe", "tool": "Bash", "match": {"command_prefix": ["git status", "ls"]}, "verdict": "allow"},
    {"id": "bash-push", "tool": "Bash", "match": {"command_prefix": ["git push"]}, "verdict": "require_approval", "scope": "session", "ttl_seconds": 300},
    {"id": "bash-rm", "tool": "Bash", "match": {"command_prefix": ["rm"]}, "verdict": "deny"},
    {"id": "gh-read", "tool": "mcp__github__get_*", "verdict": "allow"},
    {"id": "gh-issue", "tool": "mcp__github__create_issue", "verdict": "require_approval", "scope": "session", "on_autonomous": "allow"},
    {"id": "gh-issue-prod", "tool": "mcp__github__create_issue", "match": {"input": {"/repo": ["prod-*"]}}, "verdict": "deny"}
  ]
}`

func mustPolicy(tb testing.TB, doc string) *policy.Policy {
	tb.Helper()
	p, _, err := policy.Parse([]byte(doc))
	if err != nil {
		tb.Fatalf("policy.Parse: %v", err)
	}
	return p
}

func mustSchema(tb testing.TB, doc string) *schemaguard.Schema {
	tb.Helper()
	s, err := schemaguard.Compile([]byte(doc))
	if err != nil {
		tb.Fatalf("schemaguard.Compile: %v", err)
	}
	return s
}

func readTestdata(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// decode decodes JSON the way the gate's caller does: UseNumber.
func decode(tb testing.TB, s string) any {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("decode %q: %v", s, err)
	}
	return v
}

// testTools is the frozen tool set of the fixture run, compiled once.
func testTools(tb testing.TB) map[string]*Tool {
	tb.Helper()
	path := mustSchema(tb, `{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}`)
	write := mustSchema(tb, `{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}`)
	bash := mustSchema(tb, `{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer","minimum":1}},"required":["command"],"additionalProperties":false}`)
	issue := mustSchema(tb, string(readTestdata(tb, "github_create_issue.schema.json")))
	getIssue := mustSchema(tb, `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"issue_number":{"type":"number"}},"required":["owner","repo","issue_number"]}`)
	return map[string]*Tool{
		"Read":       {Name: "Read", Class: capability.ClassRead, Schema: path, Callable: true},
		"Write":      {Name: "Write", Class: capability.ClassWrite, Schema: write, Callable: true},
		"Bash":       {Name: "Bash", Class: capability.ClassExecute, Schema: bash, Callable: true},
		"WebFetch":   {Name: "WebFetch", Class: capability.ClassEgress, Schema: path, Callable: true},
		toolMystery:  {Name: toolMystery, Class: "telepathy", Schema: path, Callable: true},
		toolIssue:    {Name: toolIssue, Class: capability.ClassWrite, Schema: issue, Callable: true, ConnectionID: conGitHub},
		toolGetIssue: {Name: toolGetIssue, Class: capability.ClassRead, Schema: getIssue, Callable: true, ConnectionID: conGitHub},
		toolBroken:   {Name: toolBroken, Class: capability.ClassRead, Callable: false, Reason: "schema nests deeper than 32 levels", ConnectionID: conGitHub},
	}
}

// fixture builds a fresh trusted, non-autonomous run with money left, and a
// request constructor whose connections are live exactly as frozen.
type fixture struct {
	tools  map[string]*Tool
	policy *policy.Policy
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	return &fixture{tools: testTools(tb), policy: mustPolicy(tb, testPolicy)}
}

func (f *fixture) run() *Run {
	return &Run{
		AvailableMicros: 1_000_000,
		TrustTier:       trust.Trusted,
		Tools:           f.tools,
		Policy:          f.policy,
		Bindings: map[string]Binding{
			conGitHub: {ConnectionID: conGitHub, Generation: conGitHubGen, Owner: "usr_alice", ToolSetDigest: conGitHubTool},
		},
	}
}

func liveGitHub() Live {
	return Live{Found: true, Status: ConnectionActive, Generation: conGitHubGen, ToolSetDigest: conGitHubTool, OwnerActive: true}
}

func req(tb testing.TB, tool, input string) Request {
	tb.Helper()
	return Request{
		ToolName:    tool,
		Input:       decode(tb, input),
		Connections: map[string]Live{conGitHub: liveGitHub()},
	}
}

const (
	issueInput    = `{"owner":"fluidbox","repo":"fluidbox","title":"Flaky test","labels":["bug"],"milestone":3}`
	getIssueInput = `{"owner":"fluidbox","repo":"fluidbox","issue_number":12}`
)

// grants returns the set of session grants of the given rule and scope
// key pairs.
func grants(ruleAndKey ...string) policy.Grants {
	var keys []policy.GrantKey
	for i := 0; i+1 < len(ruleAndKey); i += 2 {
		keys = append(keys, policy.GrantKey{RuleID: ruleAndKey[i], ScopeKey: ruleAndKey[i+1]})
	}
	return policy.NewGrants(keys...)
}

// stageCase is the shape of every stage's table test: the stage function
// is called directly, after the stages above it have done their part.
type stageCase struct {
	name       string
	run        func(*Run)     // mutate the fixture run
	req        func(*Request) // mutate the request
	tool       string
	input      string
	wantDone   bool
	wantOut    policy.Verdict
	wantSource Source
	wantReason string // substring
}

// runStage runs the stages above the named one (each must pass the call
// on), then the named stage, and returns its answer.
func runStage(tb testing.TB, name string, run *Run, r Request) (Decision, bool) {
	tb.Helper()
	c := &call{run: run, req: r}
	for _, s := range stages {
		d, done := s.decide(c)
		if s.name == name {
			return d, done
		}
		if done {
			tb.Fatalf("stage %q decided %+v before stage %q ran", s.name, d, name)
		}
	}
	tb.Fatalf("no stage %q", name)
	return Decision{}, false
}

func testStage(t *testing.T, name string, tests []stageCase) {
	t.Helper()
	f := newFixture(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := f.run()
			if tt.run != nil {
				tt.run(run)
			}
			r := req(t, tt.tool, tt.input)
			if tt.req != nil {
				tt.req(&r)
			}
			d, done := runStage(t, name, run, r)
			if done != tt.wantDone {
				t.Fatalf("stage %s(%q) done = %v (%+v), want %v", name, tt.tool, done, d, tt.wantDone)
			}
			if !done {
				return
			}
			if d.Outcome != tt.wantOut || d.Source != tt.wantSource {
				t.Errorf("stage %s(%q) = %s/%s (%q), want %s/%s", name, tt.tool, d.Outcome, d.Source, d.Reason, tt.wantOut, tt.wantSource)
			}
			if !strings.Contains(d.Reason, tt.wantReason) {
				t.Errorf("stage %s(%q) reason = %q, want it to contain %q", name, tt.tool, d.Reason, tt.wantReason)
			}
		})
	}
}
