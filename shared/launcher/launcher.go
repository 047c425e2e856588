// Package launcher starts the runner of each triggered run: the step
// between "a pull request created a run" and "an agent works on it".
//
// A launcher records the launch (run.launched) and hands the runner a
// single-use launch credential, never a token: the runner spends it on
// the run's tokens itself, so nothing that carried the credential (a
// process table, an ECS task) holds anything usable afterwards. Which
// launcher runs is configuration, one value per deployment: `fluidbox dev
// --launcher none|local` (None: runs wait for whoever drives them; Local:
// a subprocess per run in a loopback-only network namespace), and on AWS
// the template's Launcher parameter (none, or aws: the Step Functions
// state machine of template.yaml, whose two Lambda steps are Steps). Every
// launcher decides the same way which runs it starts (Prepare) and issues
// the credential the same way (run.Service.Launch).
package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/githubapp"
	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// Launcher starts the runner of a run a trigger created.
type Launcher interface {
	Launch(ctx context.Context, h store.Head) error
}

// None launches nothing: a triggered run waits for a runner started by
// hand (`fluidbox runs token`, or `fluidbox runner` with a credential).
type None struct{}

// Launch does nothing.
func (None) Launch(context.Context, store.Head) error { return nil }

// DefaultTimeoutSeconds is how long an agent may run when its trigger says
// nothing.
const DefaultTimeoutSeconds = 3600

// Launch is what a launcher needs to start one run's runner: its trigger's
// prompt and timeout, and the single-use launch credential.
type Launch struct {
	RunID          string
	Prompt         string
	TimeoutSeconds int
	Credential     auth.Token
}

// Prepare decides whether a launcher starts h's runner and, if so, issues
// the launch credential (run.launched, by launcher and by). ok is false,
// with no error, for a run that is not a launcher's: not created by a
// trigger, its trigger has no prompt, or launched, ended or handed its
// tokens already (a second launcher noticing the same run, or a run driven
// by hand).
func Prepare(ctx context.Context, runs *run.Service, st *store.Store, h store.Head, launcher, by string) (Launch, bool, error) {
	if h.GitHub == nil {
		return Launch{}, false, nil
	}
	t, err := st.GetTrigger(ctx, h.GitHub.TriggerID)
	if err != nil {
		return Launch{}, false, fmt.Errorf("launcher: read trigger %s: %w", h.GitHub.TriggerID, err)
	}
	if t.Prompt == "" {
		return Launch{}, false, nil
	}
	timeout := t.TimeoutSeconds
	if timeout == 0 {
		timeout = DefaultTimeoutSeconds
	}
	cred, err := runs.Launch(ctx, h.RunID, launcher, by)
	if errors.Is(err, run.ErrLaunched) || errors.Is(err, run.ErrRunEnded) || errors.Is(err, run.ErrTokensIssued) {
		return Launch{}, false, nil
	}
	if err != nil {
		return Launch{}, false, err
	}
	return Launch{RunID: h.RunID, Prompt: t.Prompt, TimeoutSeconds: timeout, Credential: cred}, true, nil
}

// EndedBy is who session.ended names when a launcher ends a run its runner
// left open.
const EndedBy = "fluidbox:launcher"

// EndIfOpen is what a launcher does once a run's runner is gone, however
// it went: it ends the run with reason (exit status -1, by EndedBy) unless
// it has ended, and reports whether it ended it. A runner that finished
// its work ended the run itself; one that died (killed, out of memory,
// never started) left it open, and nothing else would end it.
func EndIfOpen(ctx context.Context, runs *run.Service, st *store.Store, runID string, reason run.EndReason) (bool, error) {
	h, err := st.GetHead(ctx, runID)
	if err != nil {
		return false, fmt.Errorf("launcher: read run %s: %w", runID, err)
	}
	if h.Status == vocab.Ended {
		return false, nil
	}
	if err := runs.EndWithResult(ctx, auth.Principal{Subject: EndedBy}, runID, run.Result{Reason: reason, ExitStatus: -1}); err != nil {
		return false, fmt.Errorf("launcher: end run %s: %w", runID, err)
	}
	return true, nil
}

// ReportIfDue is what a launcher does after EndIfOpen: it asks for the
// run's report, as its runner does once it has ended the run. A runner
// that died never asked; one whose report failed (GitHub unavailable) has
// it tried again. It returns the kind posted, "" when nothing was: the run
// reported already (its runner did), it has no pull request or commit to
// report on, its trigger asks for none, or the GitHub App is gone from the
// deployment or the repository (logged to log: no retry would post it).
// Any other failure is an error, worth retrying.
//
// The runner's own report and this one are not taken in turn: were the
// runner's request still being served when its process was gone (a task
// stopped mid-request), both could post; one records run.reported.
func ReportIfDue(ctx context.Context, reports *report.Service, runID string, log *slog.Logger) (string, error) {
	out, err := reports.Report(ctx, runID)
	switch {
	case errors.Is(err, report.ErrReported), errors.Is(err, report.ErrNoPullRequest):
		return "", nil
	case errors.Is(err, githubapp.ErrNoApp), errors.Is(err, githubapp.ErrNotInstalled):
		log.WarnContext(ctx, "launcher: the run's report cannot be posted", "run", runID, "err", err)
		return "", nil
	case err != nil:
		return "", fmt.Errorf("launcher: report run %s: %w", runID, err)
	case out.Kind == report.None:
		return "", nil
	}
	return out.Kind, nil
}
