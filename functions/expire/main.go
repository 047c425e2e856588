// Command expire is the approval-expiry state machine's task: it settles one
// overdue approval as expired (deny) with the same compare-and-swap as lazy
// expiry and the sweep. Input {"approval_id"}. It holds DynamoDB permissions
// only.
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

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/expiry"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("expire: start", "err", err)
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
		return fmt.Errorf("expire: aws config: %w", err)
	}
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.Table)
	svc := approval.NewService(ledger.New(st, time.Now), time.Now)
	h := expiry.NewHandler(svc, slog.New(lambdacontext.NewLogHandler()))
	lambda.StartWithOptions(h.Expire, lambda.WithContext(ctx))
	return nil
}
