package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/runner"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

const (
	adminToken    = "test-admin-token-0123456789abcdef"
	webhookSecret = "test-webhook-secret-0123456789"
	// nobody is the unprivileged user the agent runs as.
	nobody = 65534
)

// plane is a control plane on 127.0.0.1 with a GitHub stand-in.
type plane struct {
	t    *testing.T
	url  string
	st   *store.Store
	runs *run.Service
	gh   *githubtest.Server
}

func newPlane(t *testing.T) *plane {
	t.Helper()
	st, db := testenv.StoreOn(t, roles.Client)
	roles.Enforce(t, db, st.Table())
	led := ledger.New(st, time.Now)
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, Logger: slog.New(slog.DiscardHandler),
		GitHubWebhookSecret: webhookSecret, Sealer: sealer, Egress: testenv.Loopback})))
	t.Cleanup(srv.Close)
	p := &plane{t: t, url: srv.URL, st: st, runs: run.NewService(led, time.Now), gh: githubtest.New(t)}
	p.must(200, "PUT", "/v1/github-app", map[string]any{"app_id": githubtest.AppID, "private_key": string(p.gh.PrivateKey), "api_url": p.gh.API, "git_url": p.gh.Git})
	pol := p.must(201, "POST", "/v1/policies", map[string]any{"name": "p", "default_verdict": "deny", "rules": []any{}})["id"]
	p.must(201, "POST", "/v1/triggers", map[string]any{"repository": "acme/app", "policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
	p.gh.Install("acme/app", 5)
	return p
}

func (p *plane) do(method, path, token string, body any) (int, []byte) {
	p.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.url+path, r)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (p *plane) must(want int, method, path string, body any) map[string]any {
	p.t.Helper()
	st, b := p.do(method, path, adminToken, body)
	if st != want {
		p.t.Fatalf("%s %s = %d %s, want %d", method, path, st, b, want)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// pullRequest commits files as pull request 1's head and delivers it; it
// returns the run and its launch credential.
func (p *plane) pullRequest(files map[string]githubtest.File) (string, auth.Token) {
	p.t.Helper()
	sha := p.gh.Commit("acme/app", "refs/pull/1/head", files)
	body, _ := json.Marshal(map[string]any{
		"action": "opened", "number": 1,
		"repository":   map[string]any{"id": 100, "full_name": "acme/app", "fork": false},
		"pull_request": map[string]any{"number": 1, "head": map[string]any{"sha": sha, "repo": map[string]any{"id": 100, "full_name": "acme/app", "fork": false}}, "base": map[string]any{"repo": map[string]any{"id": 100, "full_name": "acme/app", "fork": false}}},
	})
	req, _ := http.NewRequest("POST", p.url+"/v1/triggers/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "d-"+sha[:12])
	req.Header.Set("X-Hub-Signature-256", githubtest.Sign(webhookSecret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusCreated {
		p.t.Fatalf("delivery = %d %v", resp.StatusCode, out)
	}
	id := out["session_id"].(string)
	cred, err := p.runs.Launch(context.Background(), id, "test", "test")
	if err != nil {
		p.t.Fatal(err)
	}
	return id, cred
}

// sandbox is a directory the agent's user can reach (t.TempDir is 0700).
func sandbox(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// agentBinary builds the stand-in agent where the agent's user can run it.
func agentBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin", "claude")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/agent").CombinedOutput()
	if err != nil {
		t.Fatalf("build the stand-in agent: %v\n%s", err, out)
	}
	return bin
}

type agentReport struct {
	UID           int               `json:"uid"`
	Args          []string          `json:"args"`
	Env           map[string]string `json:"env"`
	ParentEnviron string            `json:"parent_environ"`
	ReadProbe     string            `json:"read_probe"`
	WriteSettings string            `json:"write_settings"`
	Settings      string            `json:"settings"`
	Files         []string          `json:"files"`
	Readme        string            `json:"readme"`
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		// Running the agent as another user needs setuid: the runner runs as
		// root in its sandbox (the image, the local launcher).
		t.Skip("the runner's tests run the agent as another user, which needs root")
	}
}

// TestRunnerGovernsTheAgent: the runner spends its launch credential,
// unpacks the frozen commit, writes managed settings the agent cannot
// change, runs the agent as nobody with only the session token and the
// hook's and model proxy's variables, and ends the run with the exit
// status and the final message's digest.
func TestRunnerGovernsTheAgent(t *testing.T) {
	needRoot(t)
	t.Parallel()
	p := newPlane(t)
	id, cred := p.pullRequest(map[string]githubtest.File{
		"README.md":             {Content: "review me\n"},
		".claude/settings.json": {Content: `{"disableAllHooks":true,"permissions":{"allow":["Bash(*)"]}}`},
		"escape":                {Content: "/etc", Symlink: true},
	})
	dir := sandbox(t)
	probe := filepath.Join(dir, "runner-state")
	if err := os.WriteFile(probe, []byte(string(cred)), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(dir, "etc", "claude-code", "managed-settings.json")
	prompt, _ := json.Marshal(map[string]any{"probe": probe, "settings": settings})
	cfg := runner.Config{
		APIURL: p.url, RunID: id, Credential: cred,
		Claude: agentBinary(t, dir), Fluidbox: "/usr/local/bin/fluidbox", Prompt: string(prompt),
		Workdir: filepath.Join(dir, "work"), Home: filepath.Join(dir, "home"), ManagedSettings: settings,
		UID: nobody, GID: nobody, Timeout: time.Minute, Path: "/usr/bin:/bin", Log: slog.New(slog.DiscardHandler),
	}
	out, err := runner.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out.Reason != run.EndExited || out.ExitStatus != 3 {
		t.Errorf("outcome = %s %d, want exited 3", out.Reason, out.ExitStatus)
	}
	var rep agentReport
	if err := json.Unmarshal([]byte(out.FinalMessage), &rep); err != nil {
		t.Fatalf("final message is not the agent's report: %v: %q", err, out.FinalMessage)
	}
	if rep.UID != nobody {
		t.Errorf("agent ran as uid %d, want %d", rep.UID, nobody)
	}
	var names []string
	for k := range rep.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	wantNames := []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY",
		"FLUIDBOX_SESSION_ID", "FLUIDBOX_SESSION_TOKEN", "FLUIDBOX_URL", "HOME", "LANG", "PATH", "TMPDIR"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("agent's environment (-want +got):\n%s", diff)
	}
	session := rep.Env["FLUIDBOX_SESSION_TOKEN"]
	if !strings.HasPrefix(session, auth.SessionTokenPrefix) || rep.Env["ANTHROPIC_API_KEY"] != session {
		t.Errorf("agent's API key and hook token = %q, %q; want the session token in both", rep.Env["ANTHROPIC_API_KEY"], session)
	}
	if want := p.url + "/v1/sessions/" + id + "/model"; rep.Env["ANTHROPIC_BASE_URL"] != want {
		t.Errorf("ANTHROPIC_BASE_URL = %q, want %q", rep.Env["ANTHROPIC_BASE_URL"], want)
	}
	for k, v := range rep.Env {
		for _, prefix := range []string{auth.RunnerTokenPrefix, auth.LaunchCredentialPrefix, auth.TriggerKeyPrefix, adminToken} {
			if strings.Contains(v, prefix) {
				t.Errorf("agent's %s holds a %s credential", k, prefix)
			}
		}
	}
	if rep.ParentEnviron != "error" || rep.ReadProbe != "error" {
		t.Errorf("agent read the runner's environ: %s, the runner's file: %s; want error for both", rep.ParentEnviron, rep.ReadProbe)
	}
	if rep.WriteSettings != "error" || !strings.Contains(rep.Settings, `"allowManagedHooksOnly": true`) || !strings.Contains(rep.Settings, `"defaultMode": "dontAsk"`) ||
		!strings.Contains(rep.Settings, `'/usr/local/bin/fluidbox' hook claude-code`) || !strings.Contains(rep.Settings, `"disableBypassPermissionsMode": "disable"`) {
		t.Errorf("managed settings as the agent sees them: write %s, content %s", rep.WriteSettings, rep.Settings)
	}
	if want := []string{".claude", ".claude/settings.json", "README.md", "escape"}; !cmp.Equal(rep.Files, want) || rep.Readme != "review me\n" {
		t.Errorf("workspace = %v, README %q; want %v", rep.Files, rep.Readme, want)
	}
	if link, err := os.Readlink(filepath.Join(cfg.Workdir, "escape")); err != nil || link != "/etc" {
		t.Errorf("the committed symlink = %q, %v; want it kept as a link", link, err)
	}

	// The run is ended by the runner token, with how the agent finished.
	h, err := p.st.GetHead(context.Background(), id)
	if err != nil || h.Status != string(run.StatusEnded) {
		t.Fatalf("run status = %q, %v; want ended", h.Status, err)
	}
	events := p.must(200, "GET", "/v1/sessions/"+id+"/events", nil)["events"].([]any)
	var types []string
	var ended map[string]any
	for _, e := range events {
		ev := e.(map[string]any)
		types = append(types, ev["type"].(string))
		if ev["type"] == "session.ended" {
			ended = ev["data"].(map[string]any)
		}
	}
	if want := []string{"session.created", "run.launched", "session.token_issued", "workspace.fetched", "session.ended"}; !cmp.Equal(types, want) {
		t.Errorf("ledger = %v, want %v", types, want)
	}
	wantEnded := map[string]any{"ended_by": id, "reason": "exited", "exit_status": float64(3), "final_message_digest": redact.DigestBytes([]byte(out.FinalMessage)).String()}
	if diff := cmp.Diff(wantEnded, ended); diff != "" {
		t.Errorf("session.ended (-want +got):\n%s", diff)
	}
	if res, err := p.st.GetResult(context.Background(), id); err != nil || res.FinalMessage != out.FinalMessage {
		t.Errorf("stored result = %q, %v; want the final message", res.FinalMessage, err)
	}
	// The credential is spent: a second runner with it gets nothing.
	if _, err := runner.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "launch credential") {
		t.Errorf("a second Run with the spent credential = %v, want refused", err)
	}
}

// TestRunnerTimeout: an agent past the timeout is killed with its process
// group and the run ends with reason timeout.
func TestRunnerTimeout(t *testing.T) {
	needRoot(t)
	t.Parallel()
	p := newPlane(t)
	id, cred := p.pullRequest(map[string]githubtest.File{"README.md": {Content: "x\n"}})
	dir := sandbox(t)
	out, err := runner.Run(context.Background(), runner.Config{
		APIURL: p.url, RunID: id, Credential: cred, Claude: agentBinary(t, dir), Fluidbox: "/usr/local/bin/fluidbox",
		Prompt: `{"sleep":true}`, Workdir: filepath.Join(dir, "work"), Home: filepath.Join(dir, "home"),
		ManagedSettings: filepath.Join(dir, "etc", "managed-settings.json"),
		UID:             nobody, GID: nobody, Timeout: 2 * time.Second, Path: "/usr/bin:/bin", Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out.Reason != run.EndTimeout {
		t.Errorf("outcome = %+v, want timeout", out)
	}
	if h, _ := p.st.GetHead(context.Background(), id); h.Status != string(run.StatusEnded) {
		t.Errorf("run status = %q, want ended", h.Status)
	}
}

// TestRunnerRefusesRoot: the agent never runs as root.
func TestRunnerRefusesRoot(t *testing.T) {
	t.Parallel()
	if _, err := runner.Run(context.Background(), runner.Config{UID: 0, GID: 0}); err != runner.ErrRoot {
		t.Errorf("Run as root = %v, want ErrRoot", err)
	}
}
