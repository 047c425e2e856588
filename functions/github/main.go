// Command github is the Lambda function behind POST /v1/triggers/github,
// the one route the internet reaches without a bearer token. It is apart
// from the control function so that it holds only what a delivery needs:
// the webhook secret and the DynamoDB actions that claim a delivery and
// create a run. It has no admin token and no KMS permission, and the
// control function never sees the webhook secret.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fluidbox/fluidbox/shared/api"
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
	h := api.New(api.Config{
		Ledger:              d.Ledger,
		Logger:              d.Logger,
		GitHubWebhookSecret: d.Config.GitHubWebhookSecret,
	})
	lambda.StartWithOptions(httpadapter.New(h).ProxyWithContext, lambda.WithContext(ctx))
	return nil
}
