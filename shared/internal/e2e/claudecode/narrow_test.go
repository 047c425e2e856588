//go:build e2e

package claudecode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// secretsPolicy is issue 31's: the secrets are denied to every file tool,
// reads and searches are allowed, and so are the shell's searches.
const secretsPolicy = `{"name":"e2e-secrets","default_verdict":"deny","rules":[
 {"id":"no-secrets-read","tool":"Read","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
 {"id":"no-secrets-grep","tool":"Grep","match":{"path":["**/.env","**/*.pem","secrets/**"]},"verdict":"deny"},
 {"id":"reads","tool":"Read","match":{"path":["**"]},"verdict":"allow"},
 {"id":"searches","tool":"Grep","match":{"path":["**"]},"verdict":"allow"},
 {"id":"shell-search","tool":"Bash","match":{"command_prefix":["grep","rg","cat"]},"verdict":"allow"}]}`

// TestNarrowedSearch: the real CLI searches the repository root the way
// Claude Code 2.1 does, through Bash (its session offers no Grep tool):
// rg (the CLI's own ripgrep) and grep -r, each rewritten by the gate to
// leave the denied files out, and cats .env (denied by the Read rule).
// Both searches are allowed and find the ordinary file, no tool result
// holds the content of a .env (in any case, at any depth), a .pem or the
// secrets directory, and the ledger records each narrowing as the
// narrowed input's digest beside the asked one's.
func TestNarrowedSearch(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-e2e-"
	dir := project(t, map[string]string{
		".env":       "KEY=" + secret + "dotenv\n",
		".ENV":       "KEY=" + secret + "dotenv-upper\n",
		"server.pem": "KEY=" + secret + "pem\n",
		"app.go":     "package app // KEY = ordinary\n",
	})
	for name, body := range map[string]string{"secrets/k": "KEY=" + secret + "dir\n", "src/deep/.env": "KEY=" + secret + "nested\n"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := newStack(t,
		call("toolu_grep", "Bash", bash("rg -n KEY")),
		then("toolu_shgrep", "Bash", bash("grep -rn KEY .")),
		then("toolu_cat", "Bash", bash("cat .env")),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, secretsPolicy, map[string]any{"workspace": dir})
	res := s.claude(t, r, dir, "find KEY", cliOpts{})
	v := s.Ledger(t, r)

	for _, id := range []string{"toolu_grep", "toolu_shgrep"} {
		if d := v.Decisions[id]; d.Decision != vocab.Allow {
			t.Errorf("%s: tool.decision %+v, want allow (narrowed)", id, d)
		}
		tr := s.ToolResult(t, id)
		if tr.IsError || !strings.Contains(tr.Content, "app.go") {
			t.Errorf("%s: tool_result %+v, want the ordinary file's match", id, tr)
		}
		if strings.Contains(tr.Content, secret) {
			t.Errorf("%s: tool_result holds a secret: %s", id, tr.Content)
		}
	}
	if d := v.Decisions["toolu_cat"]; d.Decision != vocab.Deny || d.RuleID != "no-secrets-read" {
		t.Errorf("cat .env: tool.decision %+v, want deny by no-secrets-read", d)
	}
	if _, ok := res.denied()["toolu_cat"]; !ok {
		t.Errorf("cat .env is not in permission_denials %+v", res.PermissionDenials)
	}
	if tr := s.ToolResult(t, "toolu_cat"); strings.Contains(tr.Content, secret) {
		t.Errorf("cat .env: tool_result holds the secret: %s", tr.Content)
	}
	narrowed := map[string]bool{}
	for _, ev := range s.Events(t, r) {
		if ev.Type != "tool.decision" {
			continue
		}
		var d struct {
			ToolCallID string `json:"tool_call_id"`
			Updated    string `json:"updated_input_digest"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		narrowed[d.ToolCallID] = strings.HasPrefix(d.Updated, "sha256:")
	}
	if !narrowed["toolu_grep"] || !narrowed["toolu_shgrep"] || narrowed["toolu_cat"] {
		t.Errorf("tool.decision updated_input_digest per call = %v, want the two searches only", narrowed)
	}
	s.CheckModelTraffic(t, r, v)
}
