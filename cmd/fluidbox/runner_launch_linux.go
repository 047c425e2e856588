package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fluidbox/fluidbox/shared/launcher"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/report"
	runsvc "github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

// devLauncher is `fluidbox dev --launcher`: none (runs wait for a runner
// started by hand) or local (a runner per triggered run, as root, in a
// loopback-only network namespace; its log's path is printed; a run its
// runner left is ended and reported through reports).
func devLauncher(name, claude, apiAddr string, led *ledger.Ledger, reports *report.Service, stdout io.Writer, log *slog.Logger) (launcher.Launcher, func(), error) {
	switch name {
	case "", "none":
		return launcher.None{}, func() {}, nil
	case "local":
	default:
		return nil, nil, usagef("--launcher must be local or none, not %q", name)
	}
	if os.Geteuid() != 0 {
		return nil, nil, launcher.ErrNotRoot
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	l := &launcher.Local{
		Runs: runsvc.NewService(led, time.Now), Store: led.Store(), Reports: reports, Fluidbox: self, Claude: claude, API: apiAddr,
		Dir: filepath.Join(os.TempDir(), "fluidbox-runs"), User: "nobody", Out: stdout, Log: log,
	}
	return l, l.Stop, nil
}

// launchOnCreate tells l of each run a trigger created, after notify.
func launchOnCreate(notify func(context.Context, store.Head), l launcher.Launcher, log *slog.Logger) func(context.Context, store.Head) {
	return func(ctx context.Context, h store.Head) {
		notify(ctx, h)
		if err := l.Launch(ctx, h); err != nil {
			log.ErrorContext(ctx, "launch", "run", h.RunID, "err", err)
		}
	}
}
