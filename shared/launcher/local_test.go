//go:build linux

package launcher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/internal/runnertest"
	"github.com/fluidbox/fluidbox/shared/launcher"
	"github.com/fluidbox/fluidbox/shared/run"
)

// TestLocalLauncher: a triggered run's runner starts in a network
// namespace holding only its own loopback: the agent reaches the control
// plane through the runner's forwarder and nothing else (a dial elsewhere
// fails in the kernel, no route, before any packet exists: the agent dials
// only after seeing that loopback is its only interface); the managed
// settings live on the namespace's private /etc/claude-code; the launch
// credential's file is gone; the run is ended.
func TestLocalLauncher(t *testing.T) {
	runnertest.NeedRoot(t)
	t.Parallel()
	prompt, _ := json.Marshal(map[string]any{"dial": "192.0.2.1:80", "settings": "/etc/claude-code/managed-settings.json"})
	p := runnertest.New(t, runnertest.DenyAll, map[string]any{"prompt": string(prompt), "timeout_seconds": 120})
	dir := runnertest.Sandbox(t)
	_, hostSettingsBefore := os.Stat("/etc/claude-code/managed-settings.json")
	var out bytes.Buffer
	l := &launcher.Local{
		Runs: p.Runs, Store: p.Store, Reports: p.Reports, API: p.Addr, Dir: filepath.Join(dir, "runs"), User: "nobody", Out: &out,
		Fluidbox: runnertest.Build(t, dir, "fluidbox", "github.com/fluidbox/fluidbox/cmd/fluidbox"),
		Claude:   runnertest.Build(t, dir, "claude", "github.com/fluidbox/fluidbox/shared/runner/testdata/agent"),
		Log:      slog.New(slog.DiscardHandler),
	}
	h := p.Deliver(map[string]githubtest.File{"README.md": {Content: "hi\n"}})
	if err := l.Launch(context.Background(), h); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	l.Wait()
	logPath := filepath.Join(dir, "runs", h.RunID, "runner", "runner.log")
	runnerLog, _ := os.ReadFile(logPath)
	if !strings.Contains(out.String(), "log at "+logPath) {
		t.Errorf("launcher printed %q, want the log's path %s", out.String(), logPath)
	}
	res, err := p.Store.GetResult(context.Background(), h.RunID)
	if err != nil {
		t.Fatalf("no result for the run: %v\nrunner log:\n%s", err, runnerLog)
	}
	var rep struct {
		UID           int               `json:"uid"`
		Env           map[string]string `json:"env"`
		Interfaces    []string          `json:"interfaces"`
		Dial          string            `json:"dial"`
		ControlPlane  string            `json:"control_plane"`
		Settings      string            `json:"settings"`
		WriteSettings string            `json:"write_settings"`
		ParentEnviron string            `json:"parent_environ"`
	}
	if err := json.Unmarshal([]byte(res.FinalMessage), &rep); err != nil {
		t.Fatalf("final message %q: %v\nrunner log:\n%s", res.FinalMessage, err, runnerLog)
	}
	if !cmp.Equal(rep.Interfaces, []string{"lo"}) || !strings.Contains(rep.Dial, "network is unreachable") {
		t.Errorf("agent's namespace: interfaces %v, dial elsewhere %q; want only lo, and network is unreachable", rep.Interfaces, rep.Dial)
	}
	if rep.ControlPlane != "200 OK" || !strings.HasPrefix(rep.Env["FLUIDBOX_URL"], "http://127.0.0.1:") {
		t.Errorf("agent reached the control plane at %q: %q, want 200 OK", rep.Env["FLUIDBOX_URL"], rep.ControlPlane)
	}
	if rep.UID != runnertest.Nobody || rep.ParentEnviron != "error" || rep.WriteSettings != "error" || !strings.Contains(rep.Settings, "allowManagedHooksOnly") {
		t.Errorf("agent: uid %d, read runner environ %s, wrote settings %s, settings %q", rep.UID, rep.ParentEnviron, rep.WriteSettings, rep.Settings)
	}
	for k, v := range rep.Env {
		if strings.Contains(v, auth.RunnerTokenPrefix) || strings.Contains(v, auth.LaunchCredentialPrefix) {
			t.Errorf("agent's %s holds a runner or launch credential", k)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "runs", h.RunID, "runner", "launch-credential")); !os.IsNotExist(err) {
		t.Errorf("the launch credential's file is still there (%v)", err)
	}
	if _, err := os.Stat("/etc/claude-code/managed-settings.json"); os.IsNotExist(hostSettingsBefore) && !os.IsNotExist(err) {
		t.Errorf("the runner wrote the host's /etc/claude-code (%v): it must stay in the namespace", err)
	}
	types, data := p.EventTypes(h.RunID)
	if want := []string{"session.created", "run.launched", "session.token_issued", "workspace.fetched", "session.ended", "run.reported"}; !cmp.Equal(types, want) {
		t.Errorf("ledger = %v, want %v\nrunner log:\n%s", types, want, runnerLog)
	}
	if data["run.launched"]["launcher"] != "local" || data["session.ended"]["reason"] != string(run.EndExited) {
		t.Errorf("run.launched %v, session.ended %v", data["run.launched"], data["session.ended"])
	}
	if posts := p.GitHub.Posts(); len(posts) != 1 {
		t.Errorf("pull request posts = %+v, want the runner's one report (the launcher's finds it reported)", posts)
	}
	// A second notice of the same run launches nothing.
	if err := l.Launch(context.Background(), h); err != nil {
		t.Errorf("second Launch = %v, want nil (launched already)", err)
	}
}

// TestLocalRunnerThatDies: a runner that exits without ending its run
// (here it is not even a runner) leaves the run open; the launcher ends it
// as failed, by fluidbox:launcher, and reports it to the pull request, as
// the AWS launcher's Finish does.
func TestLocalRunnerThatDies(t *testing.T) {
	runnertest.NeedRoot(t)
	t.Parallel()
	p := runnertest.New(t, runnertest.DenyAll, map[string]any{"prompt": "anything", "timeout_seconds": 120})
	dir := runnertest.Sandbox(t)
	l := &launcher.Local{
		Runs: p.Runs, Store: p.Store, Reports: p.Reports, API: p.Addr, Dir: filepath.Join(dir, "runs"), User: "nobody", Out: io.Discard,
		Fluidbox: "/bin/false", Claude: "/bin/false", Log: slog.New(slog.DiscardHandler),
	}
	h := p.Deliver(map[string]githubtest.File{"README.md": {Content: "hi\n"}})
	if err := l.Launch(context.Background(), h); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	l.Wait()
	types, data := p.EventTypes(h.RunID)
	if want := []string{"session.created", "run.launched", "session.ended", "run.reported"}; !cmp.Equal(types, want) {
		t.Fatalf("ledger = %v, want %v", types, want)
	}
	if data["session.ended"]["reason"] != string(run.EndFailed) || data["session.ended"]["ended_by"] != launcher.EndedBy {
		t.Errorf("session.ended = %v, want failed by %s", data["session.ended"], launcher.EndedBy)
	}
	checkFailureReported(t, p, h.RunID, "failed")
}
