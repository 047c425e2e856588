// Package launcher starts the runner of each triggered run: the step
// between "a pull request created a run" and "an agent works on it".
//
// A launcher records the launch (run.launched) and hands the runner a
// single-use launch credential, never a token: the runner spends it on
// the run's tokens itself, so nothing that carried the credential (a
// process table, an ECS task override) holds anything usable afterwards.
// Which launcher runs is configuration: None (runs wait for whoever drives
// them), Local (a subprocess per run in a loopback-only network namespace,
// for `fluidbox dev`), or on AWS the Step Functions state machine of
// template.yaml.
package launcher

import (
	"context"

	"github.com/fluidbox/fluidbox/shared/store"
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
