// Command export delivers the ledger to the ledger bucket, woken by the
// table's stream: for each run whose numbered events (RUN#<id>/EV#...) a
// batch inserts, it writes the events after the run's checkpoint as
// objects of schema fluidbox.ledger.v1, each created only if absent, then
// moves the checkpoint (docs/ledger-export.md, "Delivery"). It may read
// the stream and a run's items, read and write the runs' export
// checkpoints (EXPORT#<run>), create and read objects under ledger/ in
// that bucket, and send its failures to its own queue; nothing else.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/export"
	"github.com/fluidbox/fluidbox/shared/export/objects"
	"github.com/fluidbox/fluidbox/shared/function"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("export: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	bucket := getenv("FLUIDBOX_LEDGER_BUCKET")
	if bucket == "" {
		return errors.New("export: FLUIDBOX_LEDGER_BUCKET is not set")
	}
	d, err := function.Load(ctx, getenv, config.Task)
	if err != nil {
		return err
	}
	x := export.New(d.Store, objects.NewS3(s3.NewFromConfig(d.AWS), bucket), time.Now, d.Logger)
	lambda.StartWithOptions(x.Stream, lambda.WithContext(ctx))
	return nil
}
