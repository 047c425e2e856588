// Command schedule runs every minute on an EventBridge rule and fires the
// scheduled triggers that are due (shared/schedule/firing): for each, once, it
// reads the head of the trigger's branch through the GitHub App and
// creates the run, which the notify function announces as session.created
// from the table's stream, as it does a pull request's run. It may open
// the GitHub App's key and no other sealed value (template.yaml).
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/schedule/firing"
	"github.com/fluidbox/fluidbox/shared/seal"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("schedule: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	// The table and the key service, as the broker needs them.
	d, err := function.Load(ctx, getenv, config.Broker)
	if err != nil {
		return err
	}
	s := firing.New(firing.Config{
		Config: route.ConfigFrom(d.Config, d.Ledger, d.Logger),
		Sealer: seal.NewKMS(kms.NewFromConfig(d.AWS), d.Config.KMSKeyID),
		Egress: egress.New(d.Config.ConnectionAllowCIDRs),
	})
	// The tick's time is the function's clock, not the event's: a retried
	// invocation fires what is due now, and the claims keep every due time
	// to one run.
	lambda.StartWithOptions(func(ctx context.Context, _ events.EventBridgeEvent) (firing.Ticked, error) {
		return s.Tick(ctx, time.Now())
	}, lambda.WithContext(ctx))
	return nil
}
