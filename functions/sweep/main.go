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
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/expiry"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/store"
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
	svc := approval.NewService(d.Ledger, time.Now)
	log := d.Logger
	h := expiry.NewHandler(svc, log)
	// Budget reservations nobody reconciled in time are settled as spent in
	// full (their stored price is used; the price table is not needed).
	reservations := admission.New(d.Ledger, nil, time.Now)
	// The approvals still pending after the sweep, a CloudWatch gauge
	// every five minutes (PendingApprovals, an EMF line of the log).
	metrics := telemetry.WithCloudWatch(nil, os.Stdout, getenv)
	inputs := elicitation.NewService(d.Ledger, time.Now, log)
	lambda.StartWithOptions(func(ctx context.Context, ev events.EventBridgeEvent) (sweepResult, error) {
		res, err := h.Sweep(ctx, ev)
		n, rerr := reservations.SweepReservations(ctx, time.Now().Add(-d.Config.ReservationSweepAfter))
		log.InfoContext(ctx, "sweep reservations", "settled", n)
		var pending int64
		if perr := d.Store.EachPendingApproval(ctx, func(store.Approval) error { pending++; return nil }); perr != nil {
			// A gauge missing one point; the sweep's own work is done.
			log.ErrorContext(ctx, "sweep: count pending approvals", "err", perr)
		} else {
			metrics.PendingApprovals(ctx, pending)
		}
		in, ierr := inputs.Sweep(ctx)
		closed, cerr := inputs.SweepClosedRuns(ctx)
		log.InfoContext(ctx, "sweep input requests", "expired", in, "declined_for_run", closed)
		return sweepResult{SweepResult: res, SettledReservations: n, ExpiredInputRequests: in, DeclinedInputRequests: closed}, errors.Join(err, rerr, ierr, cerr)
	}, lambda.WithContext(ctx))
	return nil
}

// sweepResult is what one sweep did: approvals expired or denied for
// their run, reservations settled, input requests expired or declined for
// their run.
type sweepResult struct {
	expiry.SweepResult
	SettledReservations   int `json:"settled_reservations"`
	ExpiredInputRequests  int `json:"expired_input_requests"`
	DeclinedInputRequests int `json:"declined_input_requests"`
}
