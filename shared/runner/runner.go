//go:build linux

// Package runner runs one run's agent: it is `fluidbox runner`, the
// process inside the sandbox's boundary but outside the agent's reach.
//
// It starts from a run id and the run's single-use launch credential,
// which it spends at once on the run's tokens (POST /v1/sessions/{id}/
// token). It keeps the runner token; the agent gets only the session token.
// It downloads the workspace the control plane fetched (the frozen
// commit), writes Claude Code's managed settings (the fluidbox hook on
// every tool, managed hooks and permission rules only, bypass disabled,
// default mode dontAsk) where only root can write, and runs the pinned
// Claude Code CLI headless as an unprivileged user, in a fresh environment
// holding only the model proxy's URL, the session token as the API key and
// the hook's variables. When the agent exits, fails or runs past the
// timeout, it ends the run with the runner token, saying why, the exit
// status and the final message (whose digest the ledger keeps), and asks
// the control plane to report the result to the pull request.
//
// Guarantees: nothing the runner holds besides the session token reaches
// the agent: not its environment (the agent's is built from nothing), not
// /proc/<runner>/environ (another user's, and the runner is not dumpable),
// not its files (the credential is read and deleted before the agent
// starts; the runner keeps nothing else on disk). The runner refuses to run
// the agent as root. Every failure after the tokens are issued still ends
// the run, with reason "failed": a run is never left running without its
// runner.
package runner

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/run"
)

// ManagedSettingsPath is where Claude Code reads managed settings on
// Linux: a system location the agent's user cannot write, which outranks
// every settings file in the repository and the user's home.
const ManagedSettingsPath = "/etc/claude-code/managed-settings.json"

// Config is one runner's setting.
type Config struct {
	// APIURL is the control plane; ModelURL the model proxy's base (the
	// broker's function URL on AWS), APIURL when empty. WorkspaceURL serves
	// GET /v1/sessions/{id}/workspace, ModelURL when empty.
	APIURL, ModelURL, WorkspaceURL string
	RunID                          string
	Credential                     auth.Token
	// Claude is the Claude Code CLI; Fluidbox this binary (the hook).
	Claude, Fluidbox string
	Prompt           string
	// Workdir receives the workspace; Home is the agent's HOME. Both are
	// created for the agent's user.
	Workdir, Home string
	// ManagedSettings is where the managed settings are written
	// (ManagedSettingsPath when empty).
	ManagedSettings string
	// UID and GID are the agent's user; 0 is refused.
	UID, GID int
	Timeout  time.Duration
	// Path is the agent's PATH.
	Path string
	Log  *slog.Logger
}

// Outcome is how the agent finished.
type Outcome struct {
	Reason       run.EndReason
	ExitStatus   int
	FinalMessage string
}

// ErrRoot: the agent would run as root.
var ErrRoot = errors.New("runner: the agent must not run as root (set an unprivileged user)")

// tokens is the answer of POST /v1/sessions/{id}/token.
type tokens struct {
	SessionID   string `json:"session_id"`
	Token       string `json:"token"`
	RunnerToken string `json:"runner_token"`
}

// Run runs the agent of cfg.RunID and ends the run. It returns the outcome
// it reported, or an error if the run could not even be started (the
// tokens were not issued: nothing to end) or could not be ended.
func Run(ctx context.Context, cfg Config) (Outcome, error) {
	if cfg.UID == 0 || cfg.GID == 0 {
		return Outcome{}, ErrRoot
	}
	if cfg.ModelURL == "" {
		cfg.ModelURL = cfg.APIURL
	}
	if cfg.WorkspaceURL == "" {
		cfg.WorkspaceURL = cfg.ModelURL
	}
	if cfg.ManagedSettings == "" {
		cfg.ManagedSettings = ManagedSettingsPath
	}
	launch, err := client.New(cfg.APIURL, string(cfg.Credential))
	if err != nil {
		return Outcome{}, err
	}
	var tok tokens
	if err := launch.Do(ctx, http.MethodPost, "/v1/sessions/"+cfg.RunID+"/token", nil, &tok); err != nil {
		return Outcome{}, fmt.Errorf("runner: spend the launch credential: %w", err)
	}
	out := agent(ctx, cfg, tok)
	ender, err := client.New(cfg.APIURL, tok.RunnerToken)
	if err != nil {
		return out, err
	}
	// The run ends even when ctx is done: a runner told to stop still
	// closes its run.
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	body := map[string]any{"reason": out.Reason, "exit_status": out.ExitStatus, "final_message": out.FinalMessage}
	if err := ender.Do(endCtx, http.MethodPost, "/v1/sessions/"+cfg.RunID+"/end", body, nil); err != nil {
		return out, fmt.Errorf("runner: end the run: %w", err)
	}
	// The report is the control plane's act from what it stored; the
	// runner only asks. A run whose report fails is still ended.
	// (404: the run did not come from a pull request.)
	var ae *client.APIError
	if err := ender.Do(endCtx, http.MethodPost, "/v1/sessions/"+cfg.RunID+"/report", nil, nil); err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusNotFound) {
		cfg.Log.WarnContext(ctx, "runner: report", "run", cfg.RunID, "err", err)
	}
	return out, nil
}

// agent prepares the sandbox and runs the agent; every failure is an
// outcome with reason failed.
func agent(ctx context.Context, cfg Config, tok tokens) Outcome {
	failed := func(step string, err error) Outcome {
		cfg.Log.ErrorContext(ctx, "runner: "+step, "run", cfg.RunID, "err", err)
		return Outcome{Reason: run.EndFailed, ExitStatus: -1}
	}
	layout := Layout{Workdir: cfg.Workdir, Home: cfg.Home, SettingsDir: filepath.Dir(cfg.ManagedSettings), UID: cfg.UID, GID: cfg.GID}
	if err := layout.Make(); err != nil {
		return failed("layout", err)
	}
	commit, err := fetchWorkspace(ctx, cfg, tok.Token)
	if err != nil {
		return failed("workspace", err)
	}
	cfg.Log.InfoContext(ctx, "runner: workspace", "run", cfg.RunID, "commit", commit)
	if err := writeManagedSettings(cfg.ManagedSettings, cfg.Fluidbox); err != nil {
		return failed("managed settings", err)
	}
	return runAgent(ctx, cfg, tok.Token)
}

// fetchWorkspace downloads and unpacks the run's workspace; a run with none
// (404) runs in an empty directory. It returns the commit.
func fetchWorkspace(ctx context.Context, cfg Config, sessionToken string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.WorkspaceURL, "/")+"/v1/sessions/"+cfg.RunID+"/workspace", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+sessionToken)
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		return "", fmt.Errorf("runner: GET workspace: %w", errors.Unwrap(err))
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return "", nil
	default:
		return "", fmt.Errorf("runner: GET workspace: %s", resp.Status)
	}
	commit := resp.Header.Get("X-Fluidbox-Commit")
	return commit, Unpack(io.LimitReader(resp.Body, maxArchive), cfg.Workdir, cfg.UID, cfg.GID)
}

// maxArchive bounds the compressed workspace the runner reads.
const maxArchive = 512 << 20

// maxUnpacked bounds what it writes.
const maxUnpacked = 1 << 30

// Unpack writes a gzip'd tar into dir, owned by uid/gid, through an
// os.Root: no entry can write outside dir, even through a symbolic link an
// earlier entry made. Only regular files, directories and symbolic links
// are written; an unsafe name refuses the whole archive.
func Unpack(r io.Reader, dir string, uid, gid int) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("runner: workspace is not gzip: %w", err)
	}
	tr := tar.NewReader(zr)
	var written int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("runner: workspace tar: %w", err)
		}
		name := h.Name
		if !localName(name) {
			return fmt.Errorf("runner: workspace entry %q is not a local path", name)
		}
		if d := path.Dir(name); d != "." {
			if err := mkdirAll(root, d, uid, gid); err != nil {
				return err
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := mkdirAll(root, name, uid, gid); err != nil {
				return err
			}
		case tar.TypeReg:
			written += h.Size
			if written > maxUnpacked {
				return errors.New("runner: workspace too large")
			}
			mode := os.FileMode(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return err
			}
			_, err = io.CopyN(f, tr, h.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if err := root.Lchown(name, uid, gid); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := root.Symlink(h.Linkname, name); err != nil {
				return err
			}
			if err := root.Lchown(name, uid, gid); err != nil {
				return err
			}
		default:
			return fmt.Errorf("runner: workspace entry %q has type %q", name, h.Typeflag)
		}
	}
}

func mkdirAll(root *os.Root, dir string, uid, gid int) error {
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		err := root.Mkdir(p, 0o755)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := root.Lchown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

func localName(p string) bool {
	if p == "" || path.Clean(p) != p || path.IsAbs(p) || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || strings.EqualFold(part, ".git") {
			return false
		}
	}
	return true
}

// managedSettings are Claude Code's managed settings for a governed run.
// allowManagedHooksOnly: no hook from the repository or the user's home
// runs, and none of theirs can be removed (a repository's disableAllHooks
// cannot turn off a managed hook); allowManagedPermissionRulesOnly: their
// allow rules are ignored; bypass mode cannot be entered; dontAsk: what the
// hook does not allow is refused, never prompted for;
// disableSkillShellExecution: a workspace skill's shell lines, which
// Claude Code would run while loading it without asking any hook, are not
// run (the repository cannot turn it back on: managed settings win).
func managedSettings(fluidbox string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"allowManagedHooksOnly":           true,
		"allowManagedPermissionRulesOnly": true,
		"disableSkillShellExecution":      true,
		"permissions": map[string]any{
			"defaultMode":                  "dontAsk",
			"disableBypassPermissionsMode": "disable",
		},
		"hooks": map[string]any{
			"PreToolUse": []any{map[string]any{
				"matcher": "*",
				"hooks": []any{map[string]any{
					"type": "command", "command": shellQuote(fluidbox) + " hook claude-code", "timeout": 600,
				}},
			}},
		},
	}, "", "  ")
}

// shellQuote quotes p for the hook's command line (Claude Code runs it
// with a shell).
func shellQuote(p string) string { return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'" }

// writeManagedSettings writes the settings root-owned and read-only for
// everyone else, in the layout's root-owned directory, replacing whatever
// was there.
func writeManagedSettings(file, fluidbox string) error {
	b, err := managedSettings(fluidbox)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".managed-settings-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// agentEnv is the agent's whole environment.
func agentEnv(cfg Config, sessionToken string) []string {
	return []string{
		"PATH=" + cfg.Path,
		"HOME=" + cfg.Home,
		"TMPDIR=" + cfg.Home,
		"LANG=C.UTF-8",
		"ANTHROPIC_BASE_URL=" + strings.TrimRight(cfg.ModelURL, "/") + "/v1/sessions/" + cfg.RunID + "/model",
		"ANTHROPIC_API_KEY=" + sessionToken,
		"FLUIDBOX_URL=" + cfg.APIURL,
		"FLUIDBOX_SESSION_ID=" + cfg.RunID,
		"FLUIDBOX_SESSION_TOKEN=" + sessionToken,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		// Tool search needs an anthropic-beta the model proxy does not
		// forward; without this Claude Code's first request is refused.
		"ENABLE_TOOL_SEARCH=false",
	}
}

// maxOutput bounds what the runner keeps of the agent's stdout.
const maxOutput = 8 << 20

// runAgent runs `claude -p` as the agent's user and reads its JSON result.
func runAgent(ctx context.Context, cfg Config, sessionToken string) Outcome {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	cmd := exec.Command(cfg.Claude, "-p", cfg.Prompt, "--output-format", "json")
	cmd.Dir = cfg.Workdir
	cmd.Env = agentEnv(cfg, sessionToken)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.GID), Groups: []uint32{}},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	var stdout bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &stdout, n: maxOutput}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		cfg.Log.ErrorContext(ctx, "runner: start the agent", "run", cfg.RunID, "err", err)
		return Outcome{Reason: run.EndFailed, ExitStatus: -1}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	timedOut := false
	select {
	case err = <-done:
	case <-ctx.Done():
		timedOut = true
		// The agent and everything it started: its process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	status := -1
	if cmd.ProcessState != nil {
		status = cmd.ProcessState.ExitCode()
	}
	out := Outcome{Reason: run.EndExited, ExitStatus: status, FinalMessage: finalMessage(stdout.Bytes())}
	if timedOut {
		out.Reason = run.EndTimeout
	}
	cfg.Log.InfoContext(ctx, "runner: agent finished", "run", cfg.RunID, "reason", out.Reason, "exit_status", status, "err", err)
	return out
}

// finalMessage is the result of Claude Code's JSON output, bounded; "" when
// the output is not its result object.
func finalMessage(b []byte) string {
	var res struct {
		Type   string `json:"type"`
		Result string `json:"result"`
	}
	if json.Unmarshal(b, &res) != nil || res.Type != "result" {
		return ""
	}
	return truncate(res.Result, run.MaxFinalMessage)
}

// truncate cuts s to at most n bytes, dropping a rune cut in half.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// limitedWriter keeps the first n bytes and discards the rest, so a
// flooding agent cannot exhaust the runner.
type limitedWriter struct {
	w io.Writer
	n int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(int64(len(p)), l.n)
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
		l.n -= k
	}
	return len(p), nil
}
