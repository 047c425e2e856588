// Command launch is the AWS launcher's Lambda steps (launcher.Steps), run
// by the launch state machine (infra/launch.asl.json) around each
// triggered run's ECS task: "start" issues the run's launch credential and
// stores it as a secret the runner's task reads and deletes; "finish"
// deletes the secret and ends the run with the reason when the task
// failed, timed out or left it open, then asks for the run's report (the
// pull request hears of a run whose runner died). It holds the table's
// permissions of a launch, an end and a report, opens the GitHub App's key
// and no other sealed value, and creates and deletes secrets under
// FLUIDBOX_LAUNCH_SECRET_PREFIX, nothing else.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/githubapp"
	"github.com/fluidbox/fluidbox/shared/launcher"
	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/telemetry"
)

func main() {
	if err := start(context.Background(), os.Getenv); err != nil {
		slog.Error("launch: start", "err", err)
		os.Exit(1)
	}
}

func start(ctx context.Context, getenv func(string) string) error {
	steps, err := build(ctx, getenv)
	if err != nil {
		return err
	}
	lambda.StartWithOptions(steps.Handle, lambda.WithContext(ctx))
	return nil
}

// build makes the steps from the environment, without I/O.
func build(ctx context.Context, getenv func(string) string) (*launcher.Steps, error) {
	prefix := getenv("FLUIDBOX_LAUNCH_SECRET_PREFIX")
	if prefix == "" {
		return nil, errors.New("FLUIDBOX_LAUNCH_SECRET_PREFIX is not set (the template's <stack>/launch/)")
	}
	// The table and the key service, as the broker needs them: a report
	// opens the GitHub App's key.
	d, err := function.Load(ctx, getenv, config.Broker)
	if err != nil {
		return nil, err
	}
	sealer := seal.NewKMS(kms.NewFromConfig(d.AWS), d.Config.KMSKeyID)
	apps := githubapp.New(d.Store, sealer, egress.New(d.Config.ConnectionAllowCIDRs), time.Now)
	return &launcher.Steps{
		Runs: run.NewService(d.Ledger, time.Now), Store: d.Store, Reports: report.New(d.Ledger, apps, time.Now),
		Secrets: secretsmanager.NewFromConfig(d.AWS), Prefix: prefix, Log: d.Logger,
		Metrics: telemetry.WithCloudWatch(nil, os.Stdout, getenv),
	}, nil
}
