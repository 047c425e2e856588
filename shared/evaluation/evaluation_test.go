package evaluation

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/policy/tree"
)

const secrets = `{"name":"secrets","default_verdict":"deny","rules":[
 {"id":"env-grep","tool":"Grep","match":{"path":["**/.env"]},"verdict":"deny"},
 {"id":"env-glob","tool":"Glob","match":{"path":["**/.env"]},"verdict":"deny"},
 {"id":"grep","tool":"Grep","match":{"path":["**"]},"verdict":"allow"},
 {"id":"glob","tool":"Glob","match":{"path":["**"]},"verdict":"allow"}]}`

// TestDecideIsTheGate: with the path context a runner sends, the
// evaluation answers what the gate answers, updated_input included: a
// Grep of the root is narrowed, a Grep of a file (path_kinds) runs as
// asked, a Glob is allowed or denied by its search report.
func TestDecideIsTheGate(t *testing.T) {
	t.Parallel()
	p, _, err := policy.Parse([]byte(secrets))
	if err != nil {
		t.Fatal(err)
	}
	clean := &tree.Report{Entries: []string{"main.go"}, Complete: true}
	withEnv := &tree.Report{Entries: []string{"main.go", "app/.env"}, Complete: true}
	cases := []struct {
		name   string
		req    Request
		want   policy.Verdict
		update bool
	}{
		{"Grep of the root", Request{ToolName: "Grep", Input: map[string]any{"pattern": "KEY"}}, policy.VerdictAllow, true},
		{"Grep of a file", Request{ToolName: "Grep", Input: map[string]any{"pattern": "KEY", "path": "main.go"}, PathKinds: map[string]string{"path": "file"}}, policy.VerdictAllow, false},
		{"Glob of a clean tree", Request{ToolName: "Glob", Input: map[string]any{"pattern": "**/*"}, SearchReport: clean}, policy.VerdictAllow, false},
		{"Glob of a tree with a .env", Request{ToolName: "Glob", Input: map[string]any{"pattern": "**/*"}, SearchReport: withEnv}, policy.VerdictDeny, false},
		{"Glob without a report", Request{ToolName: "Glob", Input: map[string]any{"pattern": "**/*"}}, policy.VerdictDeny, false},
	}
	for _, c := range cases {
		c.req.Workspace, c.req.Cwd = "/work/app", "/work/app"
		if err := c.req.Check(); err != nil {
			t.Fatalf("%s: Check = %v", c.name, err)
		}
		v := Decide(Policy{Policy: p}, c.req, "")
		run := &gate.Run{AvailableMicros: 1, TrustTier: "trusted", Policy: p, Workspace: c.req.Workspace}
		d, _ := gate.Explain(run, gate.Request{ToolName: c.req.ToolName, Input: c.req.Input, Cwd: c.req.Cwd, Kinds: c.req.PathKinds, Report: c.req.SearchReport}, builtinTools()[c.req.ToolName])
		if v.Decision != c.want || (v.UpdatedInput != nil) != c.update {
			t.Errorf("%s: Decide = %s with updated_input %s (%s), want %s, updated %v", c.name, v.Decision, v.UpdatedInput, v.Reason, c.want, c.update)
		}
		want, _ := d.UpdatedInput.MarshalJSON()
		if d.Outcome != v.Decision || d.Reason != v.Reason || (c.update && string(want) != string(v.UpdatedInput)) {
			t.Errorf("%s: Decide = %s %q %s, the gate = %s %q %s", c.name, v.Decision, v.Reason, v.UpdatedInput, d.Outcome, d.Reason, want)
		}
		if c.update {
			var m map[string]any
			if err := json.Unmarshal(v.UpdatedInput, &m); err != nil || m["glob"] == nil {
				t.Errorf("%s: updated_input %s is not the narrowed input", c.name, v.UpdatedInput)
			}
		}
	}
}

func TestCheckPathContext(t *testing.T) {
	t.Parallel()
	many := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		many[k] = "file"
	}
	for _, r := range []Request{
		{ToolName: "Grep", PathKinds: map[string]string{"path": "symlink"}},
		{ToolName: "Grep", PathKinds: many},
		{ToolName: "Grep", ResolvedPaths: map[string]string{"path": "relative"}},
		{ToolName: "Glob", SearchReport: &tree.Report{Entries: []string{"/etc/passwd"}}},
	} {
		var inv *InvalidError
		if err := r.Check(); !errors.As(err, &inv) {
			t.Errorf("Check(%+v) = %v, want InvalidError", r, err)
		}
	}
}
