// Command gate is the Lambda function that answers the runner: permission
// requests and budget admissions (the route rows of Function Gate). It holds
// DynamoDB permissions only, no KMS; it links no MCP, OIDC, KMS or Step
// Functions code (main_test.go checks).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/runner"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/telemetry"
	"github.com/fluidbox/fluidbox/shared/telemetry/otlp"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("gate: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	d, err := function.Load(ctx, getenv, config.Lambda)
	if err != nil {
		return err
	}
	tel, err := otlp.FromEnv(ctx, getenv, "fluidbox-gate")
	if err != nil {
		return err
	}
	// CloudWatch metrics (EMF lines in the log) always; OpenTelemetry when an endpoint is set.
	h, err := handler(d, telemetry.WithCloudWatch(tel.Telemetry(), os.Stdout, getenv))
	if err != nil {
		return err
	}
	function.ServeAPI(ctx, function.Flushed(h, tel.Flush, d.Logger))
	return nil
}

// handler serves the gate's rows of the route table.
func handler(d function.Deps, t *telemetry.Telemetry) (*route.Server, error) {
	// Without a price file, nil: admission parses the shipped table on the
	// first admission, not in every cold start. A file is read (and a bad
	// one refused) here.
	var prices *budget.Prices
	if d.Config.PricesFile != "" {
		var err error
		if prices, err = admission.LoadPrices(d.Config.PricesFile); err != nil {
			return nil, fmt.Errorf("gate: %w", err)
		}
	}
	// The approvals the gate files get their expiry timers from the notify
	// function, which sees each one's insert on the table's stream; the
	// gate itself only expires lazily (approval.Lazy, runner's default).
	base := route.ConfigFrom(d.Config, d.Ledger, d.Logger)
	base.Telemetry = t
	return route.New(base, route.Target{Function: route.Gate, Via: route.APIGateway},
		runner.New(runner.Config{Config: base, Prices: prices, MaxPendingApprovals: d.Config.MaxPendingApprovals}))
}
