// Command sweep runs on an EventBridge schedule: it expires every overdue
// pending approval, the backstop for expiry timers that were lost, and
// settles as spent every budget reservation left open past
// FLUIDBOX_RESERVATION_SWEEP_AFTER_SECONDS. It holds DynamoDB permissions only.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/expiry"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("sweep: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	cfg, err := config.Load(getenv, config.Task)
	if err != nil {
		return err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("sweep: aws config: %w", err)
	}
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.Table)
	led := ledger.New(st, time.Now)
	svc := approval.NewService(led, time.Now)
	log := slog.New(lambdacontext.NewLogHandler())
	h := expiry.NewHandler(svc, log)
	// Budget reservations nobody reconciled in time are settled as spent in
	// full (their stored price is used; the price table is not needed).
	reservations := admission.New(led, nil, time.Now)
	lambda.StartWithOptions(func(ctx context.Context, ev events.EventBridgeEvent) (sweepResult, error) {
		res, err := h.Sweep(ctx, ev)
		n, rerr := reservations.SweepReservations(ctx, time.Now().Add(-cfg.ReservationSweepAfter))
		log.InfoContext(ctx, "sweep reservations", "settled", n)
		return sweepResult{SweepResult: res, SettledReservations: n}, errors.Join(err, rerr)
	}, lambda.WithContext(ctx))
	return nil
}

// sweepResult is what one sweep did: approvals expired, reservations settled.
type sweepResult struct {
	expiry.SweepResult
	SettledReservations int `json:"settled_reservations"`
}
