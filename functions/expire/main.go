// Command expire is the approval-expiry state machine's task: it settles one
// overdue approval as expired (deny) with the same compare-and-swap as lazy
// expiry and the sweep. Input {"approval_id"}. It holds DynamoDB permissions
// only.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/expiry"
	"github.com/fluidbox/fluidbox/shared/function"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("expire: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	d, err := function.Load(ctx, getenv, config.Task)
	if err != nil {
		return err
	}
	svc := approval.NewService(d.Ledger, time.Now)
	h := expiry.NewHandler(svc, d.Logger)
	lambda.StartWithOptions(h.Expire, lambda.WithContext(ctx))
	return nil
}
