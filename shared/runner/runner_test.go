//go:build linux

package runner_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/internal/runnertest"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/runner"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

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

// TestRunnerGovernsTheAgent: the runner spends its launch credential,
// unpacks the frozen commit, writes managed settings the agent cannot
// change, runs the agent as runnertest.Nobody with only the session token and the
// hook's and model proxy's variables, and ends the run with the exit
// status and the final message's digest.
func TestRunnerGovernsTheAgent(t *testing.T) {
	runnertest.NeedRoot(t)
	t.Parallel()
	p := runnertest.New(t, runnertest.DenyAll, nil)
	id, cred := p.Launch(map[string]githubtest.File{
		"README.md":             {Content: "review me\n"},
		".claude/settings.json": {Content: `{"disableAllHooks":true,"permissions":{"allow":["Bash(*)"]}}`},
		"escape":                {Content: "/etc", Symlink: true},
	})
	dir := runnertest.Sandbox(t)
	probe := filepath.Join(dir, "runner-state")
	if err := os.WriteFile(probe, []byte(string(cred)), 0o600); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(dir, "etc", "claude-code", "managed-settings.json")
	prompt, _ := json.Marshal(map[string]any{"probe": probe, "settings": settings})
	cfg := runner.Config{
		APIURL: p.URL, RunID: id, Credential: cred,
		Claude: runnertest.Build(t, dir, "claude", "./testdata/agent"), Fluidbox: "/usr/local/bin/fluidbox", Prompt: string(prompt),
		Workdir: filepath.Join(dir, "work"), Home: filepath.Join(dir, "home"), ManagedSettings: settings,
		UID: runnertest.Nobody, GID: runnertest.Nobody, Timeout: time.Minute, Path: "/usr/bin:/bin", Log: slog.New(slog.DiscardHandler),
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
	if rep.UID != runnertest.Nobody {
		t.Errorf("agent ran as uid %d, want %d", rep.UID, runnertest.Nobody)
	}
	checkAgentEnv(t, rep, p.URL, id)
	checkAgentConfined(t, rep, cfg.Workdir)
	checkRunEnded(t, p, id, out)
	// The credential is spent: a second runner with it gets nothing.
	if _, err := runner.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "launch credential") {
		t.Errorf("a second Run with the spent credential = %v, want refused", err)
	}
}

// checkAgentEnv: the agent's environment is exactly the hook's and the
// model proxy's variables, with the session token as both its hook token
// and its API key, and no other credential.
func checkAgentEnv(t *testing.T, rep agentReport, url, id string) {
	t.Helper()
	var names []string
	for k := range rep.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	wantNames := []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY",
		"ENABLE_TOOL_SEARCH", "FLUIDBOX_SESSION_ID", "FLUIDBOX_SESSION_TOKEN", "FLUIDBOX_URL", "HOME", "LANG", "PATH", "TMPDIR"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("agent's environment (-want +got):\n%s", diff)
	}
	session := rep.Env["FLUIDBOX_SESSION_TOKEN"]
	if !strings.HasPrefix(session, auth.SessionTokenPrefix) || rep.Env["ANTHROPIC_API_KEY"] != session {
		t.Errorf("agent's API key and hook token = %q, %q; want the session token in both", rep.Env["ANTHROPIC_API_KEY"], session)
	}
	if want := url + "/v1/sessions/" + id + "/model"; rep.Env["ANTHROPIC_BASE_URL"] != want {
		t.Errorf("ANTHROPIC_BASE_URL = %q, want %q", rep.Env["ANTHROPIC_BASE_URL"], want)
	}
	for k, v := range rep.Env {
		for _, prefix := range []string{auth.RunnerTokenPrefix, auth.LaunchCredentialPrefix, auth.TriggerKeyPrefix, runnertest.AdminToken} {
			if strings.Contains(v, prefix) {
				t.Errorf("agent's %s holds a %s credential", k, prefix)
			}
		}
	}
}

// checkAgentConfined: the agent could read neither the runner's environ
// nor its file, nor write the managed settings, which hold the hook; the
// workspace is the commit, its symlink kept as a link.
func checkAgentConfined(t *testing.T, rep agentReport, workdir string) {
	t.Helper()
	if rep.ParentEnviron != "error" || rep.ReadProbe != "error" {
		t.Errorf("agent read the runner's environ: %s, the runner's file: %s; want error for both", rep.ParentEnviron, rep.ReadProbe)
	}
	if rep.WriteSettings != "error" || !strings.Contains(rep.Settings, `"allowManagedHooksOnly": true`) || !strings.Contains(rep.Settings, `"defaultMode": "dontAsk"`) ||
		!strings.Contains(rep.Settings, `'/usr/local/bin/fluidbox' hook claude-code`) || !strings.Contains(rep.Settings, `"disableBypassPermissionsMode": "disable"`) || !strings.Contains(rep.Settings, `"disableSkillShellExecution": true`) {
		t.Errorf("managed settings as the agent sees them: write %s, content %s", rep.WriteSettings, rep.Settings)
	}
	if want := []string{".claude", ".claude/settings.json", "README.md", "escape"}; !cmp.Equal(rep.Files, want) || rep.Readme != "review me\n" {
		t.Errorf("workspace = %v, README %q; want %v", rep.Files, rep.Readme, want)
	}
	if link, err := os.Readlink(filepath.Join(workdir, "escape")); err != nil || link != "/etc" {
		t.Errorf("the committed symlink = %q, %v; want it kept as a link", link, err)
	}
}

// checkRunEnded: the run is ended by the runner token, with how the agent
// finished.
func checkRunEnded(t *testing.T, p *runnertest.Plane, id string, out runner.Outcome) {
	t.Helper()
	h, err := p.Store.GetHead(context.Background(), id)
	if err != nil || h.Status != vocab.Ended {
		t.Fatalf("run status = %q, %v; want ended", h.Status, err)
	}
	types, data := p.EventTypes(id)
	ended := data["session.ended"]
	if want := []string{"session.created", "run.launched", "session.token_issued", "workspace.fetched", "session.ended", "run.reported"}; !cmp.Equal(types, want) {
		t.Errorf("ledger = %v, want %v", types, want)
	}
	wantEnded := map[string]any{"ended_by": id, "reason": "exited", "exit_status": float64(3), "final_message_digest": redact.DigestBytes([]byte(out.FinalMessage)).String()}
	if diff := cmp.Diff(wantEnded, ended); diff != "" {
		t.Errorf("session.ended (-want +got):\n%s", diff)
	}
	if res, err := p.Store.GetResult(context.Background(), id); err != nil || res.FinalMessage != out.FinalMessage {
		t.Errorf("stored result = %q, %v; want the final message", res.FinalMessage, err)
	}
}

// TestRunnerTimeout: an agent past the timeout is killed with its process
// group and the run ends with reason timeout.
func TestRunnerTimeout(t *testing.T) {
	runnertest.NeedRoot(t)
	t.Parallel()
	p := runnertest.New(t, runnertest.DenyAll, nil)
	id, cred := p.Launch(map[string]githubtest.File{"README.md": {Content: "x\n"}})
	dir := runnertest.Sandbox(t)
	out, err := runner.Run(context.Background(), runner.Config{
		APIURL: p.URL, RunID: id, Credential: cred, Claude: runnertest.Build(t, dir, "claude", "./testdata/agent"), Fluidbox: "/usr/local/bin/fluidbox",
		Prompt: `{"sleep":true}`, Workdir: filepath.Join(dir, "work"), Home: filepath.Join(dir, "home"),
		ManagedSettings: filepath.Join(dir, "etc", "managed-settings.json"),
		UID:             runnertest.Nobody, GID: runnertest.Nobody, Timeout: 2 * time.Second, Path: "/usr/bin:/bin", Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out.Reason != run.EndTimeout {
		t.Errorf("outcome = %+v, want timeout", out)
	}
	if h, _ := p.Store.GetHead(context.Background(), id); h.Status != vocab.Ended {
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
