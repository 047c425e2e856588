package policy

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy/tree"
)

// TestReportNeverWidensReadOrGrep: a report saying nothing exists (what a
// hostile sandbox would send) changes no decision but a Glob's. Read and
// Grep return contents, so theirs never rely on it; a Bash line neither.
func TestReportNeverWidensReadOrGrep(t *testing.T) {
	t.Parallel()
	p := mustParse(t, filesPolicy)
	empty := &tree.Report{Entries: []string{}, Complete: true}
	calls := []struct {
		tool  string
		input map[string]any
	}{
		{"Read", map[string]any{"file_path": ".env"}},
		{"Read", map[string]any{"file_path": "secrets/k"}},
		{"Grep", map[string]any{"pattern": "KEY"}},
		{"Grep", map[string]any{"pattern": "KEY", "path": "secrets"}},
		{"Grep", map[string]any{"pattern": "KEY", "glob": ".env"}},
		{"Grep", map[string]any{"pattern": "KEY", "path": "src", "glob": "*"}},
		{"Bash", map[string]any{"command": "cat .env"}},
		{"Bash", map[string]any{"command": "rg -L KEY"}},
		{"Bash", map[string]any{"command": "find . -name '*.pem' -exec cat {} +"}},
	}
	for _, c := range calls {
		env := Env{Workspace: "/work/repo", Cwd: "/work/repo"}
		want := p.EvaluateIn(env, c.tool, c.input)
		env.Report = empty
		got := p.EvaluateIn(env, c.tool, c.input)
		if got.Verdict != want.Verdict || got.Reason != want.Reason || (got.UpdatedInput == nil) != (want.UpdatedInput == nil) {
			t.Errorf("%s %v with an empty report: %s (%s), without: %s (%s)", c.tool, c.input, got.Verdict, got.Reason, want.Verdict, want.Reason)
		}
	}
	// A Grep that cannot be narrowed (no exclusion expresses a class) is
	// denied, report or not.
	q := mustParse(t, `{"name":"x","default_verdict":"allow","rules":[
	  {"id":"cls","tool":"{Grep,Glob}","match":{"path":["**/[.]env"]},"verdict":"deny"}]}`)
	for _, rep := range []*tree.Report{nil, empty} {
		env := Env{Workspace: "/work/repo", Cwd: "/work/repo", Report: rep}
		if got := q.EvaluateIn(env, "Grep", map[string]any{"pattern": "KEY"}); got.Verdict != VerdictDeny {
			t.Errorf("Grep of the root under a class glob, report %v: %s (%s), want deny", rep, got.Verdict, got.Reason)
		}
	}
	// The same empty report does clear a Glob of the root: the one place
	// it is read.
	env := Env{Workspace: "/work/repo", Cwd: "/work/repo"}
	if got := p.EvaluateIn(env, "Glob", map[string]any{"pattern": "**/*"}); got.Verdict != VerdictDeny {
		t.Errorf("Glob of the root without a report: %s, want deny", got.Verdict)
	}
	env.Report = empty
	if got := p.EvaluateIn(env, "Glob", map[string]any{"pattern": "**/*"}); got.Verdict != VerdictAllow {
		t.Errorf("Glob of the root with an empty report: %s (%s), want allow", got.Verdict, got.Reason)
	}
}

// TestGlobReportPlaces: entries are judged under the given and the
// resolved directory, and a report the gate cannot place clears nothing.
func TestGlobReportPlaces(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"name":"x","default_verdict":"allow","rules":[
	  {"id":"no-keys","tool":"Glob","match":{"path":["/work/repo/keys/**"]},"verdict":"deny"},
	  {"id":"ask-env","tool":"Glob","match":{"path":["**/.env"]},"verdict":"require_approval"}]}`)
	rep := func(entries ...string) *tree.Report { return &tree.Report{Entries: entries, Complete: true} }
	cases := []struct {
		name  string
		input map[string]any
		env   Env
		want  Verdict
	}{
		{"link to the denied directory, resolved", map[string]any{"pattern": "**/*", "path": "k"},
			Env{Cwd: "/work/repo", Resolved: map[string]string{"path": "/work/repo/keys"}, Report: rep("a.pem")}, VerdictDeny},
		{"link resolved elsewhere", map[string]any{"pattern": "**/*", "path": "k"},
			Env{Cwd: "/work/repo", Resolved: map[string]string{"path": "/work/other"}, Report: rep("a.pem")}, VerdictAllow},
		{"a require_approval rule asks when something exists", map[string]any{"pattern": "**/*"},
			Env{Cwd: "/work/repo", Report: rep("src/.env")}, VerdictRequireApproval},
		{"and is not asked when nothing does", map[string]any{"pattern": "**/*"},
			Env{Cwd: "/work/repo", Report: rep("src/main.go")}, VerdictAllow},
		{"an entry the pattern does not select", map[string]any{"pattern": "**/*.go"},
			Env{Cwd: "/work/repo", Report: rep("keys/a.pem", "src/.env")}, VerdictAllow},
		{"no working directory: nothing to join the entries to", map[string]any{"pattern": "**/*"},
			Env{Report: rep()}, VerdictDeny},
		{"a pattern that is not a string", map[string]any{"pattern": 5},
			Env{Cwd: "/work/repo", Report: rep()}, VerdictDeny},
		{"a path that is not a string", map[string]any{"pattern": "**/*", "path": 5},
			Env{Cwd: "/work/repo", Report: rep()}, VerdictDeny},
		{"a home pattern: the rule it reaches still asks", map[string]any{"pattern": "~/**"},
			Env{Cwd: "/work/repo", Report: rep()}, VerdictRequireApproval},
	}
	for _, c := range cases {
		if got := p.EvaluateIn(c.env, "Glob", c.input); got.Verdict != c.want {
			t.Errorf("%s: EvaluateIn(Glob %v) = %s (%s), want %s", c.name, c.input, got.Verdict, got.Reason, c.want)
		}
	}
}

func TestGlobSelects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pat, entry string
		want       bool
	}{
		{"*.go", "a/b/c.go", true},
		{"*.go", "c.GO", true},
		{"src/*.go", "src/a.go", true},
		{"src/*.go", "x/src/a.go", false},
		{"**/*.go", "a.go", true},
		{"*.{md,json}", "docs/a.md", true},
		{"*.{md,json}", ".env", false},
		{"!*.go", ".env", true},
		{"*.go .env", ".env", true},
		{"[", "x", true},
		{"*", ".", true},
	}
	for _, c := range cases {
		if got := globSelects(c.pat, c.entry); got != c.want {
			t.Errorf("globSelects(%q, %q) = %v, want %v", c.pat, c.entry, got, c.want)
		}
	}
}
