// Command sweep runs on an EventBridge schedule: it expires every overdue
// pending approval, the backstop for expiry timers that were lost, denies
// every pending approval of a run that ended or spent its budget, expires
// every overdue pending input request (shared/elicitation) and declines
// those of such a run, and
// settles as spent every budget reservation left open past
// FLUIDBOX_RESERVATION_SWEEP_AFTER_SECONDS. It holds DynamoDB permissions only.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/sweep"
	"github.com/fluidbox/fluidbox/shared/telemetry"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("sweep: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	d, err := function.Load(ctx, getenv, config.Task)
	if err != nil {
		return err
	}
	// Budget reservations nobody reconciled in time are settled as spent in
	// full (their stored price is used; the price table is not needed).
	sweeper := sweep.Sweeper{
		Approvals: approval.NewService(d.Ledger, time.Now), Inputs: elicitation.NewService(d.Ledger, time.Now, d.Logger),
		Reservations: admission.New(d.Ledger, nil, time.Now), ReservationsAfter: d.Config.ReservationSweepAfter,
		Now: time.Now, Log: d.Logger,
	}
	// The approvals still pending after the sweep, a CloudWatch gauge
	// every five minutes (PendingApprovals, an EMF line of the log),
	// counted by the sweep's own walk.
	metrics := telemetry.WithCloudWatch(nil, os.Stdout, getenv)
	lambda.StartWithOptions(func(ctx context.Context, _ events.EventBridgeEvent) (sweep.Swept, error) {
		swept, err := sweeper.Sweep(ctx)
		if err == nil {
			// A failed round's count is not the table's: a gauge misses a point.
			metrics.PendingApprovals(ctx, int64(swept.PendingApprovals))
		}
		return swept, err
	}, lambda.WithContext(ctx))
	return nil
}
