// Command github is the Lambda function behind POST /v1/triggers/github,
// the one route the internet reaches without a bearer token (a route row of
// Function GitHub). It is apart from the control function so that it holds
// only what a delivery needs: the webhook secret and the DynamoDB actions
// that claim a delivery and create a run. It has no admin token and no KMS
// permission, and the control function never sees the webhook secret.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/triggers"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/function"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("github: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	d, err := function.Load(ctx, getenv, config.GitHub)
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

// handler serves the github row of the route table.
func handler(d function.Deps) (*route.Server, error) {
	base := route.ConfigFrom(d.Config, d.Ledger, d.Logger)
	return route.New(base, route.Target{Function: route.GitHub, Via: route.APIGateway},
		triggers.New(triggers.Config{Config: base, GitHubWebhookSecret: d.Config.GitHubWebhookSecret}))
}
