// Package function wires an HTTP Lambda function: configuration from the
// environment, AWS clients built once per cold start, and the shared API
// handler behind API Gateway's REST proxy integration.
package function

import (
	"context"
	"fmt"
	"log/slog"
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

// sseWindow bounds an event-stream response in Lambda: API Gateway REST
// buffers the whole response, so a stream returns what it has and the
// client resumes with Last-Event-ID.
const sseWindow = 5 * time.Second

// ServeHTTP runs the API handler as a Lambda function until the runtime
// stops it. The SDK reads AWS_ENDPOINT_URL_DYNAMODB itself, which is how a
// local invoke points the function at a local table.
func ServeHTTP(ctx context.Context, getenv func(string) string) error {
	cfg, err := config.Load(getenv, config.Lambda)
	if err != nil {
		return err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("function: aws config: %w", err)
	}
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.Table)
	h := api.New(api.Config{
		AdminToken:     cfg.AdminToken,
		Ledger:         ledger.New(st, time.Now),
		Logger:         slog.New(lambdacontext.NewLogHandler()),
		SSEMaxDuration: sseWindow,
	})
	lambda.StartWithOptions(httpadapter.New(h).ProxyWithContext, lambda.WithContext(ctx))
	return nil
}
