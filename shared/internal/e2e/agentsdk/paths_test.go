//go:build e2e

package agentsdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestSymlinkJudgedByItsTarget: a symlink a pull request planted
// (notes.txt -> .env) is judged by what it points at. The adapter sends
// the call's cwd and the path resolved beside Claude Code, and the gate's
// deny rule on **/.env refuses the Read of notes.txt (given absolute) and
// the Grep of it (given relative to the cwd), while a plain file of the
// project is read. The same Read asked without the resolved path is
// allowed: the deny comes from the resolution.
func TestSymlinkJudgedByItsTarget(t *testing.T) {
	t.Parallel()
	const secret = "SECRET=the-env-secret-4b1d9"
	dir := project(t, map[string]string{".env": secret + "\n", "README.md": "hello from the readme\n"})
	if err := os.Symlink(".env", filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	// The project as the sandbox resolves it (the temp dir may sit behind
	// a symlink): a file of it is allowed only if both paths are.
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	globs, err := json.Marshal([]string{dir + "/**", real + "/**"})
	if err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf(`{"name":"paths","default_verdict":"deny","rules":[
	 {"id":"no-env","tool":"Read","match":{"path":["**/.env"]},"verdict":"deny"},
	 {"id":"no-env-grep","tool":"Grep","match":{"path":["**/.env"]},"verdict":"deny"},
	 {"id":"project","tool":"Read","match":{"path":%s},"verdict":"allow"},
	 {"id":"project-grep","tool":"Grep","match":{"path":%s},"verdict":"allow"}]}`, globs, globs)

	s := newStack(t,
		call("toolu_notes", "Read", map[string]any{"file_path": filepath.Join(dir, "notes.txt")}),
		then("toolu_grep", "Grep", map[string]any{"pattern": "SECRET", "path": "notes.txt", "output_mode": "content"}),
		then("toolu_readme", "Read", map[string]any{"file_path": filepath.Join(dir, "README.md")}),
		scriptedmodel.SayText("done"),
	)
	r := s.NewRun(t, policy, nil)
	res := s.query(t, r, dir, "read the notes", opts{})

	v := s.Ledger(t, r)
	for _, c := range []struct{ id, tool, decision, rule string }{
		{"toolu_notes", "Read", "deny", "no-env"},
		{"toolu_grep", "Grep", "deny", "no-env-grep"},
		{"toolu_readme", "Read", "allow", "project"},
	} {
		if d := v.Decisions[c.id]; string(d.Decision) != c.decision || d.RuleID != c.rule || v.Requested[c.id] != c.tool {
			t.Errorf("%s: tool.requested %q, tool.decision %+v; want %s %s by rule %s", c.id, v.Requested[c.id], d, c.tool, c.decision, c.rule)
		}
	}
	for _, id := range []string{"toolu_notes", "toolu_grep"} {
		if _, ok := res.denied()[id]; !ok {
			t.Errorf("%s is not in permission_denials %+v", id, res.Result.PermissionDenials)
		}
		if tr := s.ToolResult(t, id); !tr.IsError || !strings.Contains(tr.Content, "fluidbox denied (policy, rule no-env") {
			t.Errorf("%s: tool_result %+v, want fluidbox's denial by a no-env rule", id, tr)
		}
	}
	if tr := s.ToolResult(t, "toolu_readme"); tr.IsError || !strings.Contains(tr.Content, "hello from the readme") {
		t.Errorf("README.md: tool_result %+v, want its content", tr)
	}
	for i, req := range s.Model.Requests() {
		if strings.Contains(string(req.Body), secret) {
			t.Fatalf("model request %d carried the .env's content", i)
		}
	}

	// The control: the same Read, asked without the resolved path, is
	// allowed by the project rule.
	other := s.NewRun(t, policy, nil)
	runner, err := client.New(s.API.URL, other.Token)
	if err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(map[string]string{"file_path": filepath.Join(dir, "notes.txt")})
	if err != nil {
		t.Fatal(err)
	}
	ans, err := runner.Permission(context.Background(), other.ID, client.PermissionRequest{ToolCallID: "toolu_unresolved", ToolName: "Read", Input: in, Cwd: dir}, 0)
	if err != nil || ans.Decision != vocab.Allow || ans.RuleID != "project" {
		t.Errorf("the Read without resolved_paths = %+v, %v; want allow by rule project (so the deny above came from the resolution)", ans, err)
	}
	s.CheckModelTraffic(t, r, v)
}

// TestTokenNotASessionToken: an app that passes the admin token as the
// run's token is refused by withFluidbox before anything is sent: no
// request reaches the API, and no query starts, so the token never becomes
// Claude Code's ANTHROPIC_API_KEY.
func TestTokenNotASessionToken(t *testing.T) {
	t.Parallel()
	s := newStack(t, scriptedmodel.SayText("never asked"))
	r := s.NewRun(t, denyAll, nil)
	var seen atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		seen.Add(1)
		s.API.Config.Handler.ServeHTTP(w, req)
	}))
	t.Cleanup(api.Close)

	res, err := s.start(t, run{ID: r.ID, Token: adminToken}, project(t, nil), "hello", opts{apiURL: api.URL})()
	if err == nil {
		t.Fatalf("the query ran with the admin token: %+v", res.Result)
	}
	const want = "GateError: token is not a session token (fbx_sess_...): only a run's session token belongs in the sandbox"
	if !strings.HasPrefix(res.Error, want) {
		t.Errorf("driver error %q, want it to start with %q", res.Error, want)
	}
	if strings.Contains(res.Error, adminToken) {
		t.Error("the error carries the token")
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("%d requests reached the API with the admin token", n)
	}
	if got := s.requests.snapshot(); len(got) != 0 {
		t.Errorf("requests to the stack: %v, want none", got)
	}
	if n := len(s.Model.Requests()); n != 0 {
		t.Errorf("the model saw %d requests; want none (no query started)", n)
	}
}
