package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestSessionWorkspace: a run's workspace resolves the policy's relative
// globs; without one the run is created with a warning; the runner's cwd
// and resolved paths reach the gate.
func TestSessionWorkspace(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(`{"name":"ws","default_verdict":"deny","rules":[
	  {"id":"src","tool":"Write","match":{"path":["src/**"]},"verdict":"allow"},
	  {"id":"env","tool":"Read","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"read","tool":"Read","match":{"path":["/work/**"]},"verdict":"allow"}]}`)
	run := func(extra map[string]any) map[string]any {
		body := map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
		for k, v := range extra {
			body[k] = v
		}
		return s.must(201, "POST", "/v1/sessions", adminToken, body)
	}
	bare := run(nil)
	if w := fmt.Sprint(bare["warnings"]); !strings.Contains(w, "rules[0].match.path[0]") || !strings.Contains(w, "no workspace") {
		t.Errorf("run without a workspace: warnings = %s, want one about rules[0].match.path[0]", w)
	}
	s.must(400, "POST", "/v1/sessions", adminToken, map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}, "workspace": "work/app"})
	s.must(400, "POST", "/v1/sessions", adminToken, map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}, "workspace": "/work/app/../x"})

	ws := run(map[string]any{"workspace": "/work/app"})
	if ws["warnings"] != nil || ws["workspace"] != "/work/app" {
		t.Errorf("run with a workspace = %v, want workspace /work/app and no warnings", ws)
	}
	id, tok := ws["id"].(string), ws["token"].(string)
	if got := s.must(200, "GET", "/v1/sessions/"+id, tok, nil)["workspace"]; got != "/work/app" {
		t.Errorf("GET session workspace = %v", got)
	}
	ask := func(n int, tool string, input string, extra string) map[string]any {
		return s.must(200, "POST", "/v1/sessions/"+id+"/permission", tok,
			fmt.Sprintf(`{"tool_call_id":"c%d","tool_name":%q,"input":%s%s}`, n, tool, input, extra))
	}
	tests := []struct {
		tool, input, extra, want string
	}{
		{"Write", `{"file_path":"/work/app/src/a.go","content":"x"}`, ``, "allow"},
		{"Write", `{"file_path":"/work/other/src/a.go","content":"x"}`, ``, "deny"},
		{"Write", `{"file_path":"../src/a.go","content":"x"}`, `,"cwd":"/work/app/sub"`, "allow"},
		{"Read", `{"file_path":"/work/app/notes.txt"}`, ``, "allow"},
		// A committed symlink: notes.txt -> ../.env.
		{"Read", `{"file_path":"/work/app/notes.txt"}`, `,"resolved_paths":{"file_path":"/work/.env"}`, "deny"},
		{"Read", `{"file_path":"/work/app/notes.txt"}`, `,"resolved_paths":{"file_path":"/etc/passwd"}`, "deny"},
		{"Read", `{"file_path":"/work/app/.ENV"}`, ``, "deny"},
	}
	for i, tt := range tests {
		if got := ask(i, tt.tool, tt.input, tt.extra); got["decision"] != tt.want {
			t.Errorf("%s %s%s = %v, want %s", tt.tool, tt.input, tt.extra, got, tt.want)
		}
	}
	s.must(400, "POST", "/v1/sessions/"+id+"/permission", tok, `{"tool_call_id":"bad","tool_name":"Read","input":{"file_path":"/a"},"cwd":"relative"}`)
}

// TestReadOnlyRunShell: a read_only run's Bash may read the repository and
// nothing else, whatever the policy allows.
func TestReadOnlyRunShell(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(`{"name":"open","default_verdict":"allow","rules":[]}`)
	id, tok := s.session(map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}, "trust_tier": "read_only"})
	for i, tt := range []struct{ cmd, want, source string }{
		{"git diff", "allow", ""},
		{"git status && git log --oneline -5 | head -3", "allow", ""},
		{"git push origin main", "deny", "trust_tier"},
		{"git diff --output=.git/config", "deny", "trust_tier"},
		{"python3 -c 'print(1)'", "deny", "trust_tier"},
	} {
		got := s.must(200, "POST", "/v1/sessions/"+id+"/permission", tok,
			fmt.Sprintf(`{"tool_call_id":"b%d","tool_name":"Bash","input":{"command":%q}}`, i, tt.cmd))
		if got["decision"] != tt.want || tt.source != "" && got["source"] != tt.source {
			t.Errorf("Bash %q in a read_only run = %v, want %s %s", tt.cmd, got, tt.want, tt.source)
		}
	}
}

// TestTriggeredRunWorkspace: a trigger configuration's workspace becomes
// its runs' workspace, which resolves the policy's relative globs.
func TestTriggeredRunWorkspace(t *testing.T) {
	t.Parallel()
	s := newWebhookStack(t, webhookSecret)
	pol := s.policy(`{"name":"ws","default_verdict":"deny","rules":[
	  {"id":"src","tool":"Read","match":{"path":["src/**"]},"verdict":"allow"}]}`)
	trg := s.must(201, "POST", "/v1/triggers", adminToken, map[string]any{
		"repository": "Codertocat/Hello-World", "policy_id": pol, "capabilities": []string{"claude-code"},
		"budget": map[string]any{"limit_usd": 1}, "workspace": "/work/app",
	})
	if trg["workspace"] != "/work/app" {
		t.Fatalf("trigger = %v, want workspace /work/app", trg)
	}
	s.must(400, "POST", "/v1/triggers", adminToken, map[string]any{
		"repository": "Codertocat/Other", "policy_id": pol, "capabilities": []string{"claude-code"},
		"budget": map[string]any{"limit_usd": 1}, "workspace": "work/app",
	})
	r := s.deliver(signed("d-ws-1", payload(t, "same_repo.opened.json")))
	if r.status != 201 {
		t.Fatalf("delivery = %d %s", r.status, r.raw)
	}
	id, _ := r.body["session_id"].(string)
	if got := s.must(200, "GET", "/v1/sessions/"+id, adminToken, nil)["workspace"]; got != "/work/app" {
		t.Errorf("triggered run workspace = %v, want /work/app", got)
	}
	for i, tt := range []struct{ path, want string }{{"/work/app/src/a.go", "allow"}, {"/work/other/src/a.go", "deny"}} {
		got := s.must(200, "POST", "/v1/sessions/"+id+"/permission", adminToken, map[string]any{
			"tool_call_id": fmt.Sprintf("ws-%d", i), "tool_name": "Read", "input": map[string]any{"file_path": tt.path},
		})
		if got["decision"] != tt.want {
			t.Errorf("Read %s in the triggered run = %v, want %s", tt.path, got, tt.want)
		}
	}
}
