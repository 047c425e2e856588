// Command github is the Lambda function behind POST /v1/triggers/github,
// the one route the internet reaches without a bearer token. It is apart
// from the control function so that it holds only what a delivery needs:
// the webhook secret and the DynamoDB actions that claim a delivery and
// create a run. It has no admin token and no KMS permission, and the
// control function never sees the webhook secret.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("github: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	cfg, err := config.Load(getenv, config.GitHub)
	if err != nil {
		return err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("github: aws config: %w", err)
	}
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.Table)
	h := api.New(api.Config{
		Ledger:              ledger.New(st, time.Now),
		Logger:              slog.New(lambdacontext.NewLogHandler()),
		GitHubWebhookSecret: cfg.GitHubWebhookSecret,
	})
	lambda.StartWithOptions(httpadapter.New(h).ProxyWithContext, lambda.WithContext(ctx))
	return nil
}
