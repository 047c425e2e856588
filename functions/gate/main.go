// Command gate is the Lambda function that answers the runner: permission
// requests and budget admissions (route.Table, Function Gate). It holds
// DynamoDB permissions and states:StartExecution on the expiry state
// machine, no KMS; it links no MCP, OIDC or KMS code (main_test.go checks).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/runner"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/expiry"
	"github.com/fluidbox/fluidbox/shared/function"
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
	h, err := handler(d)
	if err != nil {
		return err
	}
	function.ServeAPI(ctx, h)
	return nil
}

// handler serves the gate's rows of the route table.
func handler(d function.Deps) (*route.Server, error) {
	prices, err := admission.LoadPrices(d.Config.PricesFile)
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	// The gate creates approvals, so it starts each one's expiry timer;
	// without a state machine, lazy expiry and the sweep expire.
	var sched approval.Scheduler = approval.Lazy{}
	if d.Config.StateMachineARN != "" {
		sched = expiry.NewStepFunctions(sfn.NewFromConfig(d.AWS), d.Config.StateMachineARN)
	}
	return route.New(route.ConfigFrom(d.Config, d.Ledger, d.Logger), route.Target{Function: route.Gate, Via: route.APIGateway},
		runner.New(runner.Config{Config: route.ConfigFrom(d.Config, d.Ledger, d.Logger), Scheduler: sched, Prices: prices, MaxPendingApprovals: d.Config.MaxPendingApprovals}))
}
