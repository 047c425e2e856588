package launcher

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/runner"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Local starts `fluidbox runner` as a subprocess per triggered run, under
// `unshare --net --mount`: the runner and its agent see one network
// interface, a loopback of their own, so the only thing they can reach is
// the forwarder the runner serves there, which leads through a unix
// socket (a file in a root-only directory, which network namespaces do
// not separate) to the control plane. Each run gets its own directory
// under Dir: runner/ (root only: the credential file, which the runner
// deletes once read, the socket and the runner's log), work/ and home/
// (the agent's).
type Local struct {
	Runs  *run.Service
	Store *store.Store
	// Reports asks for a run's report once its runner is gone.
	Reports *report.Service
	// Fluidbox is this binary; Claude the Claude Code CLI the agent runs.
	Fluidbox, Claude string
	// API is the control plane's listen address (127.0.0.1:port).
	API string
	// Dir holds the runs' directories; User is the agent's user.
	Dir, User string
	// Out is told where each runner's log is.
	Out io.Writer
	Log *slog.Logger

	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[*exec.Cmd]bool
}

// Launch starts the runner of h's run if its trigger has a prompt.
func (l *Local) Launch(ctx context.Context, h store.Head) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	launch, ok, err := Prepare(ctx, l.Runs, l.Store, h, "local", "fluidbox dev")
	if err != nil || !ok {
		// Not ours (no trigger prompt; driven by hand or ended), or an error.
		return err
	}
	runDir := filepath.Join(l.Dir, h.RunID)
	private := filepath.Join(runDir, "runner")
	for _, d := range []string{l.Dir, runDir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	if err := (runner.Layout{Private: private}).Make(); err != nil {
		return err
	}
	credFile := filepath.Join(private, "launch-credential")
	if err := os.WriteFile(credFile, []byte(launch.Credential), 0o600); err != nil {
		return err
	}
	sock := filepath.Join(private, "api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	go forward(ln, func() (net.Conn, error) { return net.Dial("tcp", l.API) })
	logPath := filepath.Join(private, "runner.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		ln.Close()
		return err
	}
	cmd := exec.Command("unshare", "--net", "--mount", "--fork", "--kill-child",
		l.Fluidbox, "runner", "--run", h.RunID, "--credential-file", credFile, "--prompt", launch.Prompt,
		"--claude", l.Claude, "--workdir", filepath.Join(runDir, "work"), "--home", filepath.Join(runDir, "home"),
		"--user", l.User, "--timeout", strconv.Itoa(launch.TimeoutSeconds), "--sandbox-unix", sock)
	// The runner's environment is built from nothing too: no variable of
	// the control plane (its admin token) reaches it.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		ln.Close()
		logf.Close()
		return fmt.Errorf("launcher: start the runner of %s: %w", h.RunID, err)
	}
	fmt.Fprintf(l.Out, "runner of %s started: log at %s\n", h.RunID, logPath)
	l.mu.Lock()
	if l.running == nil {
		l.running = map[*exec.Cmd]bool{}
	}
	l.running[cmd] = true
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		err := cmd.Wait()
		l.mu.Lock()
		delete(l.running, cmd)
		l.mu.Unlock()
		ln.Close()
		logf.Close()
		l.Log.Info("runner finished", "run", h.RunID, "err", err, "log", logPath)
		l.finish(context.WithoutCancel(ctx), h.RunID, logPath)
	}()
	return nil
}

// finish does what the AWS launcher's Finish does once a runner is gone:
// a runner that died left its run open, so it ends it, and then asks for
// the run's report, which such a runner never did. Its own request may be
// long gone.
func (l *Local) finish(ctx context.Context, runID, logPath string) {
	ctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	ended, err := EndIfOpen(ctx, l.Runs, l.Store, runID, run.EndFailed)
	if err != nil {
		l.Log.Error("launcher: could not end the run its runner left open", "run", runID, "err", err)
		return
	}
	if ended {
		l.Log.Warn("launcher: the runner left its run open; ended it as failed", "run", runID, "log", logPath)
	}
	kind, err := ReportIfDue(ctx, l.Reports, runID, l.Log)
	if err != nil {
		l.Log.Error("launcher: could not report the run", "run", runID, "err", err)
	} else if kind != "" {
		l.Log.Info("launcher: reported the run its runner did not", "run", runID, "kind", kind)
	}
}

// finishTimeout bounds ending and reporting a run once its runner is gone.
const finishTimeout = 30 * time.Second

// Wait waits for every runner started so far.
func (l *Local) Wait() { l.wg.Wait() }

// Stop kills every runner still running (unshare --kill-child takes the
// runner with it, and the runner's agent dies with the runner) and waits
// for them: a control plane that stops leaves no agent behind.
func (l *Local) Stop() {
	l.mu.Lock()
	for cmd := range l.running {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	l.mu.Unlock()
	l.wg.Wait()
}
