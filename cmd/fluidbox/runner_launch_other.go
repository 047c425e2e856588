//go:build !linux

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/fluidbox/fluidbox/shared/launcher"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/store"
)

// devLauncher: the local launcher needs Linux namespaces; elsewhere only
// none.
func devLauncher(name, _, _ string, _ *ledger.Ledger, _ *report.Service, _ io.Writer, _ *slog.Logger) (launcher.Launcher, func(), error) {
	if name == "" || name == "none" {
		return launcher.None{}, func() {}, nil
	}
	return nil, nil, errors.New("--launcher local needs Linux (network namespaces); use none here")
}

func launchOnCreate(notify func(context.Context, store.Head), _ launcher.Launcher, _ *slog.Logger) func(context.Context, store.Head) {
	return notify
}
