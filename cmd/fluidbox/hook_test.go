package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hookAnswer checks that a hook run printed exactly the shape Claude Code
// reads — one object, hookSpecificOutput with hookEventName PreToolUse,
// permissionDecision and permissionDecisionReason, and updatedInput only
// with an allow, nothing else — and exited 0, and returns the decision and
// reason.
func hookAnswer(t *testing.T, r result) (string, string) {
	t.Helper()
	d, reason, _ := hookAnswerInput(t, r)
	return d, reason
}

// hookAnswerInput is hookAnswer, also returning updatedInput (nil without).
func hookAnswerInput(t *testing.T, r result) (string, string, map[string]any) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("hook exit = %d (stderr %q), want 0 so Claude Code reads the JSON", r.code, r.stderr)
	}
	var out struct {
		HookSpecificOutput struct {
			HookEventName            string         `json:"hookEventName"`
			PermissionDecision       string         `json:"permissionDecision"`
			PermissionDecisionReason string         `json:"permissionDecisionReason"`
			UpdatedInput             map[string]any `json:"updatedInput"`
		} `json:"hookSpecificOutput"`
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("hook stdout %q is not the hookSpecificOutput shape: %v", r.stdout, err)
	}
	if dec.More() {
		t.Fatalf("hook stdout %q has more than one JSON value", r.stdout)
	}
	var keys map[string]map[string]any
	_ = json.Unmarshal([]byte(r.stdout), &keys)
	h := out.HookSpecificOutput
	want := 3
	if h.UpdatedInput != nil {
		want = 4
		if h.PermissionDecision != "allow" {
			t.Errorf("updatedInput with %q, want it only with an allow", h.PermissionDecision)
		}
	}
	if len(keys) != 1 || len(keys["hookSpecificOutput"]) != want {
		t.Fatalf("hook stdout %q: want exactly hookSpecificOutput{hookEventName, permissionDecision, permissionDecisionReason[, updatedInput]}", r.stdout)
	}
	if h.HookEventName != "PreToolUse" {
		t.Errorf("hookEventName = %q, want PreToolUse", h.HookEventName)
	}
	if h.PermissionDecision != "allow" && h.PermissionDecision != "deny" {
		t.Errorf("permissionDecision = %q, want allow or deny", h.PermissionDecision)
	}
	if h.PermissionDecisionReason == "" {
		t.Error("permissionDecisionReason is empty")
	}
	return h.PermissionDecision, h.PermissionDecisionReason, h.UpdatedInput
}

func TestHookAnswersFromTheGate(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ses, token := s.newRun(t)
	vars := s.sandboxEnv("FLUIDBOX_SESSION_ID", ses, "FLUIDBOX_SESSION_TOKEN", token)
	tests := []struct {
		sample       string
		wantDecision string
		wantReason   string
	}{
		{"pretooluse_bash_git_status.json", "allow", "fluidbox allowed (rule git-read)"},
		{"pretooluse_read.json", "allow", "fluidbox allowed (rule reads)"},
		{"pretooluse_bash_git_push.json", "deny", "fluidbox denied (policy, rule no-push)"},
		{"pretooluse_task.json", "deny", "fluidbox denied (capability"},
		{"posttooluse_bash.json", "deny", "configured for PostToolUse"},
	}
	for _, tt := range tests {
		r := fluidbox(context.Background(), vars, sample(t, tt.sample), "hook", "claude-code")
		got, reason := hookAnswer(t, r)
		if got != tt.wantDecision || !strings.Contains(reason, tt.wantReason) {
			t.Errorf("hook(%s) = %s %q, want %s %q", tt.sample, got, reason, tt.wantDecision, tt.wantReason)
		}
		if strings.Contains(r.stdout+r.stderr, token) {
			t.Errorf("hook(%s) printed the session token", tt.sample)
		}
	}
	// The run is fluidbox's, the call is Claude Code's tool_use_id: asking
	// again with the same sample re-reads the recorded answer.
	again := fluidbox(context.Background(), vars, sample(t, "pretooluse_bash_git_push.json"), "hook", "claude-code")
	if d, _ := hookAnswer(t, again); d != "deny" {
		t.Errorf("the same tool_use_id again = %s, want the recorded deny", d)
	}
}

// A call that needs a human: the hook waits through pending with long
// polls, a human approves with `fluidbox approve`, and the hook allows.
func TestHookPendingApprovedThroughCLIAllows(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ses, token := s.newRun(t)
	vars := s.sandboxEnv("FLUIDBOX_SESSION_ID", ses, "FLUIDBOX_SESSION_TOKEN", token, "FLUIDBOX_HOOK_TIMEOUT_SECONDS", "60")
	done := make(chan result, 1)
	go func() {
		done <- fluidbox(context.Background(), vars, sample(t, "pretooluse_bash_rm.json"), "hook", "claude-code")
	}()
	apr := s.pendingFor(t, ses)
	if apr.ToolCallID != "toolu_01ABC123rm" {
		t.Errorf("approval tool_call_id = %q, want Claude Code's tool_use_id", apr.ToolCallID)
	}
	list := fluidbox(context.Background(), s.env(), "", "approvals")
	if !strings.Contains(list.stdout, apr.ID) || !strings.Contains(list.stdout, "rm build.log") {
		t.Errorf("fluidbox approvals = %q, want %s with its command", list.stdout, apr.ID)
	}
	select {
	case r := <-done:
		t.Fatalf("the hook answered before a human decided: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	ok := fluidbox(context.Background(), s.env(), "", "approve", apr.ID)
	if ok.code != 0 || !strings.Contains(ok.stdout, "approved_once: applied") {
		t.Fatalf("fluidbox approve = %+v, want applied", ok)
	}
	select {
	case r := <-done:
		if d, reason := hookAnswer(t, r); d != "allow" || !strings.Contains(reason, "a human approved it ("+apr.ID+")") {
			t.Errorf("hook after approval = %s %q, want allow naming %s", d, reason, apr.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the hook did not answer after the approval")
	}
}

func TestHookDeniesOnAnyFailure(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ses, token := s.newRun(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"code":"internal","message":"internal error"}}`))
	}))
	t.Cleanup(broken.Close)
	odd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"decision":"maybe"}`))
	}))
	t.Cleanup(odd.Close)
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"reason":"no decision field"}`))
	}))
	t.Cleanup(silent.Close)

	good := map[string]string{"FLUIDBOX_URL": s.url, "FLUIDBOX_SESSION_ID": ses, "FLUIDBOX_SESSION_TOKEN": token}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	push := sample(t, "pretooluse_bash_git_status.json")
	tests := []struct {
		name  string
		vars  map[string]string
		stdin string
		want  string
	}{
		{"unreachable", with("FLUIDBOX_URL", deadURL), push, "cannot reach fluidbox at " + deadURL},
		{"wrong token", with("FLUIDBOX_SESSION_TOKEN", "fbx_sess_not-the-right-one"), push, "refused FLUIDBOX_SESSION_TOKEN"},
		{"another run", with("FLUIDBOX_SESSION_ID", "ses_00000000000000000000000000"), push, "refused FLUIDBOX_SESSION_TOKEN for run ses_00000000000000000000000000: 403 forbidden: a session token is good only"},
		{"the admin token", with("FLUIDBOX_SESSION_TOKEN", "the-operators-admin-token-0123456789"), push, "not a session token"},
		{"a runner token", with("FLUIDBOX_SESSION_TOKEN", "fbx_run_abcdefghijklmnop"), push, "not a session token"},
		{"the admin token beside it", with("FLUIDBOX_ADMIN_TOKEN", "the-operators-admin-token-0123456789"), push, "FLUIDBOX_ADMIN_TOKEN is set in the sandbox"},
		{"500", with("FLUIDBOX_URL", broken.URL), push, "500 internal"},
		{"unknown answer", with("FLUIDBOX_URL", odd.URL), push, `"maybe" is not a decision`},
		{"no decision", with("FLUIDBOX_URL", silent.URL), push, "the permission answer has no decision"},
		{"no token", with("FLUIDBOX_SESSION_TOKEN", ""), push, "FLUIDBOX_SESSION_TOKEN not set"},
		{"no env", map[string]string{}, push, "FLUIDBOX_URL, FLUIDBOX_SESSION_ID, FLUIDBOX_SESSION_TOKEN not set"},
		{"bad timeout", with("FLUIDBOX_HOOK_TIMEOUT_SECONDS", "soon"), push, "FLUIDBOX_HOOK_TIMEOUT_SECONDS"},
		{"bad url", with("FLUIDBOX_URL", "127.0.0.1:8080"), push, "FLUIDBOX_URL"},
		{"empty stdin", good, "", "empty"},
		{"not json", good, "Bash rm -rf /", "not a PreToolUse JSON object"},
		{"no tool_use_id", good, `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}`, "no tool_use_id"},
		{"too large", good, `{"tool_name":"Bash","tool_input":{"command":"` + strings.Repeat("a", maxHookInput) + `"}}`, "over 1048576 bytes"},
		{"pending, nobody decides", with("FLUIDBOX_HOOK_TIMEOUT_SECONDS", "2"), sample(t, "pretooluse_bash_rm.json"), "no human decided on approval apr_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := fluidbox(context.Background(), tt.vars, tt.stdin, "hook", "claude-code")
			d, reason := hookAnswer(t, r)
			if d != "deny" || !strings.Contains(reason, tt.want) {
				t.Errorf("hook = %s %q, want deny with %q", d, reason, tt.want)
			}
			if strings.Contains(r.stdout+r.stderr, token) {
				t.Errorf("hook printed the session token")
			}
		})
	}
}

// If the answer cannot be written, exit 2: the one non-zero code Claude
// Code treats as "block the call".
func TestHookExits2WhenStdoutFails(t *testing.T) {
	t.Parallel()
	var errb bytes.Buffer
	code := hook(context.Background(), []string{"claude-code"}, env(nil), strings.NewReader(""), failWriter{}, &errb)
	if code != 2 || !strings.Contains(errb.String(), "fluidbox denied") {
		t.Errorf("hook with a broken stdout = %d %q, want 2 and a reason on stderr", code, errb.String())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

// A symlink committed in a fork's pull request (notes.txt -> ../.env) is
// judged by what it points at: the hook sends the resolved path, and the
// gate denies when either path is denied.
func TestHookJudgesResolvedPaths(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".env"), []byte("SECRET=1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../.env", filepath.Join(work, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, nil)
	ctx := context.Background()
	doc := fmt.Sprintf(`{"name":"paths","default_verdict":"deny","rules":[
	  {"id":"no-env","tool":"Read","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"work","tool":"Read","match":{"path":[%q]},"verdict":"allow"}]}`, work+"/**")
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(doc), &pol); err != nil {
		t.Fatal(err)
	}
	var ses struct{ ID, Token string }
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}, &ses); err != nil {
		t.Fatal(err)
	}
	vars := s.sandboxEnv("FLUIDBOX_SESSION_ID", ses.ID, "FLUIDBOX_SESSION_TOKEN", ses.Token)
	for i, tt := range []struct{ file, want, reason string }{
		{"README.md", "allow", "rule work"},
		{"notes.txt", "deny", "rule no-env"},
		{filepath.Join(work, "notes.txt"), "deny", "rule no-env"},
	} {
		in := fmt.Sprintf(`{"hook_event_name":"PreToolUse","cwd":%q,"tool_name":"Read","tool_input":{"file_path":%q},"tool_use_id":"toolu_path%d"}`, work, tt.file, i)
		got, reason := hookAnswer(t, fluidbox(ctx, vars, in, "hook", "claude-code"))
		if got != tt.want || !strings.Contains(reason, tt.reason) {
			t.Errorf("Read %s = %s %q, want %s (%s)", tt.file, got, reason, tt.want, tt.reason)
		}
	}
}

func TestResolvePaths(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(root, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	got := resolvePaths(json.RawMessage(`{"file_path":"link/new/file.go","path":"`+root+`/link","pattern":"**/*.go","notebook_path":7}`), root)
	want := map[string]string{"file_path": filepath.Join(real, "new", "file.go"), "path": real}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("resolvePaths = %v, want %v", got, want)
	}
	if got := resolvePaths(json.RawMessage(`{"file_path":"relative"}`), ""); got != nil {
		t.Errorf("a relative path without cwd resolved to %v", got)
	}
}

// sandboxEnv is a sandbox's environment: the URL and what extra gives,
// never the admin token (the hook refuses to run beside one).
func (s *stack) sandboxEnv(extra ...string) map[string]string {
	m := s.env(extra...)
	delete(m, "FLUIDBOX_ADMIN_TOKEN")
	return m
}

// A search the gate narrows: the hook sends the path's kind and answers
// allow with Claude Code's updatedInput, the narrowed search; a Grep of a
// file (kind file) runs as asked; a Write through a link whose target does
// not exist yet is judged by where it points.
func TestHookNarrowsAndSendsKinds(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, ".git", "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "main.go"), []byte("package main"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git/hooks/pre-commit", filepath.Join(root, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, nil)
	ctx := context.Background()
	doc := fmt.Sprintf(`{"name":"secrets","default_verdict":"deny","rules":[
	  {"id":"no-env","tool":"Grep","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"grep","tool":"Grep","match":{"path":[%q]},"verdict":"allow"},
	  {"id":"write","tool":"Write","match":{"path":[%q]},"verdict":"allow"}]}`, root+"/**", root+"/**")
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(doc), &pol); err != nil {
		t.Fatal(err)
	}
	var ses struct{ ID, Token string }
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}, &ses); err != nil {
		t.Fatal(err)
	}
	vars := s.sandboxEnv("FLUIDBOX_SESSION_ID", ses.ID, "FLUIDBOX_SESSION_TOKEN", ses.Token)
	ask := func(id, tool, input string) (string, string, map[string]any) {
		in := fmt.Sprintf(`{"hook_event_name":"PreToolUse","cwd":%q,"tool_name":%q,"tool_input":%s,"tool_use_id":%q}`, root, tool, input, id)
		return hookAnswerInput(t, fluidbox(ctx, vars, in, "hook", "claude-code"))
	}
	d, reason, upd := ask("g1", "Grep", `{"pattern":"KEY","path":"."}`)
	if d != "allow" || upd == nil || !strings.Contains(fmt.Sprint(upd["glob"]), "!**/.[eE][nN][vV]") || upd["pattern"] != "KEY" || !strings.Contains(reason, "narrowed") {
		t.Errorf("Grep of the root = %s %q %v, want allow narrowed", d, reason, upd)
	}
	if d, reason, upd := ask("g2", "Grep", `{"pattern":"KEY","path":"main.go"}`); d != "allow" || upd != nil {
		t.Errorf("Grep of a file = %s %q %v, want allow as asked", d, reason, upd)
	}
	if d, reason, _ := ask("w1", "Write", `{"file_path":"notes.txt","content":"#!/bin/sh"}`); d != "deny" || !strings.Contains(reason, ".git") {
		t.Errorf("Write through a link to a hook not yet written = %s %q, want deny naming .git", d, reason)
	}
	if d, _, _ := ask("w2", "Write", `{"file_path":"src/new.go","content":"package src"}`); d != "allow" {
		t.Errorf("an ordinary Write = %s, want allow", d)
	}
}

func TestPathKindsAndDanglingLinks(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"dir", ".git/hooks"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "f.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"todir": "dir", "hook": ".git/hooks/pre-commit", "loop1": "loop2", "loop2": "loop1", "chain": "hook"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	kinds := map[string]string{"f.go": "file", "dir": "dir", "todir": "dir", "missing": "absent", "hook": "absent"}
	for p, want := range kinds {
		got := pathKinds(json.RawMessage(`{"path":"`+p+`"}`), root)
		if got["path"] != want {
			t.Errorf("pathKinds(%s) = %v, want %s", p, got, want)
		}
	}
	for link, want := range map[string]string{"hook": ".git/hooks/pre-commit", "chain": ".git/hooks/pre-commit", "hook/x": ".git/hooks/pre-commit/x"} {
		got := resolvePaths(json.RawMessage(`{"file_path":"`+link+`"}`), root)
		if got["file_path"] != filepath.Join(root, want) {
			t.Errorf("resolvePaths(%s) = %v, want %s", link, got, filepath.Join(root, want))
		}
	}
	if got := resolvePaths(json.RawMessage(`{"file_path":"loop1"}`), root); got != nil {
		t.Errorf("resolvePaths of a loop = %v, want nothing", got)
	}
}

// A Bash line's path operands that are links are resolved by the hook, as
// the file tools' paths are: cat notes.txt, where notes.txt -> .env, is
// judged as a read of .env under a Read deny; the same line of a plain
// file is allowed.
func TestHookResolvesBashOperands(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{".env": "SECRET=1", "README.md": "hi"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(".env", filepath.Join(root, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	s := newStack(t, nil)
	ctx := context.Background()
	doc := `{"name":"secrets","default_verdict":"deny","rules":[
	  {"id":"no-env","tool":"Read","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"cat","tool":"Bash","match":{"command_prefix":["cat"]},"verdict":"allow"}]}`
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(doc), &pol); err != nil {
		t.Fatal(err)
	}
	var ses struct{ ID, Token string }
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}, &ses); err != nil {
		t.Fatal(err)
	}
	vars := s.sandboxEnv("FLUIDBOX_SESSION_ID", ses.ID, "FLUIDBOX_SESSION_TOKEN", ses.Token)
	for i, tt := range []struct{ line, want, reason string }{
		{"cat README.md", "allow", "rule cat"},
		{"cat notes.txt", "deny", "resolves in the sandbox to a path it matches"},
		{"cat README.md " + filepath.Join(root, "notes.txt"), "deny", "word 2 of command 1"},
	} {
		in := fmt.Sprintf(`{"hook_event_name":"PreToolUse","cwd":%q,"tool_name":"Bash","tool_input":{"command":%q},"tool_use_id":"toolu_op%d"}`, root, tt.line, i)
		got, reason := hookAnswer(t, fluidbox(ctx, vars, in, "hook", "claude-code"))
		if got != tt.want || !strings.Contains(reason, tt.reason) {
			t.Errorf("Bash %q = %s %q, want %s (%s)", tt.line, got, reason, tt.want, tt.reason)
		}
	}
	links := strings.Repeat("notes.txt ", maxOperandLinks+1)
	if _, err := resolveOperands(json.RawMessage(`{"command":"cat `+links+`"}`), root); err == nil {
		t.Errorf("resolveOperands of %d links = nil error, want a refusal", maxOperandLinks+1)
	}
}

// A Glob cannot be narrowed: the hook walks the directory it searches and
// sends what exists there, and the gate denies it only where that holds a
// path a deny rule matches. The same Glob of the root is allowed in a tree
// without a .env and denied, naming the rule and the glob, in one with it;
// a Glob of a subdirectory holding none is allowed in the second tree too.
func TestHookReportsWhatAGlobReaches(t *testing.T) {
	t.Parallel()
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, nil)
	ctx := context.Background()
	doc := fmt.Sprintf(`{"name":"secrets","default_verdict":"deny","rules":[
	  {"id":"no-env","tool":"Glob","match":{"path":["**/.env"]},"verdict":"deny"},
	  {"id":"glob","tool":"Glob","match":{"path":[%q]},"verdict":"allow"}]}`, parent+"/**")
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(doc), &pol); err != nil {
		t.Fatal(err)
	}
	var ses struct{ ID, Token string }
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}, &ses); err != nil {
		t.Fatal(err)
	}
	vars := s.sandboxEnv("FLUIDBOX_SESSION_ID", ses.ID, "FLUIDBOX_SESSION_TOKEN", ses.Token)
	repo := func(name string, files ...string) string {
		root := filepath.Join(parent, name)
		for _, f := range files {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	clean, secret := repo("clean", "main.go", "docs/a.md"), repo("secret", "main.go", "docs/a.md", "app/.env")
	for i, tt := range []struct{ cwd, input, want, reason string }{
		{clean, `{"pattern":"**/*"}`, "allow", "rule glob"},
		{secret, `{"pattern":"**/*"}`, "deny", `rule "no-env": the search may reach paths matching "**/.env", and it is not narrowed because Glob has no way to exclude paths, and the sandbox reports 1 existing path`},
		{secret, `{"pattern":"**/*","path":"docs"}`, "allow", "rule glob"},
		{secret, `{"pattern":"**/*.go"}`, "allow", "rule glob"},
	} {
		in := fmt.Sprintf(`{"hook_event_name":"PreToolUse","cwd":%q,"tool_name":"Glob","tool_input":%s,"tool_use_id":"toolu_glob%d"}`, tt.cwd, tt.input, i)
		got, reason := hookAnswer(t, fluidbox(ctx, vars, in, "hook", "claude-code"))
		if got != tt.want || !strings.Contains(reason, tt.reason) {
			t.Errorf("Glob %s in %s = %s %q, want %s (%s)", tt.input, tt.cwd, got, reason, tt.want, tt.reason)
		}
	}
	if got := globReport(ctx, json.RawMessage(`{"pattern":"*","path":7}`), clean); got != nil {
		t.Errorf("globReport of a path that is not a string = %+v, want none", got)
	}
	if got := globReport(ctx, json.RawMessage(`{"pattern":"*"}`), ""); got != nil {
		t.Errorf("globReport without a directory = %+v, want none", got)
	}
}
