package policy

import (
	"strings"
	"testing"
)

// TestToolGlobAlternatives: a rule's tool may name a {a,b,...} group; with
// path globs only when every name is a file tool; and such a rule decides
// each of those tools (and the Bash lines that read what it denies) as a
// rule per tool would.
func TestToolGlobAlternatives(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"p","default_verdict":"allow","rules":[
	  {"id":"secrets","tool":"{Read,Glob,Grep}","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"trackers","tool":"mcp__{jira,linear}__*","verdict":"require_approval"}]}`)
	env := Env{Workspace: "/work/app", Cwd: "/work/app"}
	for _, tt := range []struct {
		tool  string
		input map[string]any
		want  Verdict
	}{
		{"Read", map[string]any{"file_path": "/work/app/.env"}, VerdictDeny},
		{"Read", map[string]any{"file_path": "/work/app/main.go"}, VerdictAllow},
		{"Grep", map[string]any{"pattern": "KEY", "path": "/work/app/.env"}, VerdictDeny},
		{"Write", map[string]any{"file_path": "/work/app/.env", "content": "x"}, VerdictAllow}, // not named
		{"Bash", map[string]any{"command": "cat .env"}, VerdictDeny},                           // Read's rules reach cat
		{"mcp__jira__create_issue", map[string]any{}, VerdictRequireApproval},
		{"mcp__linear__list", map[string]any{}, VerdictRequireApproval},
		{"mcp__github__get", map[string]any{}, VerdictAllow},
	} {
		if got := p.EvaluateIn(env, tt.tool, tt.input); got.Verdict != tt.want {
			t.Errorf("%s %v = %s (%s), want %s", tt.tool, tt.input, got.Verdict, got.Reason, tt.want)
		}
	}
	for _, bad := range []struct{ tool, why string }{
		{"{Read,Bash}", "only for file tools"},
		{"{Read,Gre*}", "only for file tools"},
		{"*", "only for file tools"},
		{"{Read,Grep", "without '}'"},
		{"Read}", "without '{'"},
		{"{Read,{Grep}}", "not nested"},
		{"{Read,}", "empty alternative"},
		{"{Read,Grep}{Glob}", "not nested"},
	} {
		doc := `{"name":"p","default_verdict":"allow","rules":[{"id":"r","tool":` + quote(bad.tool) + `,"match":{"path":["**/.env"]},"verdict":"deny"}]}`
		if _, _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("tool %q with a path = %v, want refused (%s)", bad.tool, err, bad.why)
		}
	}
	if _, _, err := Parse([]byte(`{"name":"p","default_verdict":"allow","rules":[{"id":"r","tool":"\\{Read\\}","verdict":"deny"}]}`)); err != nil {
		t.Errorf("an escaped brace is a literal character: %v", err)
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
