// Command notify reads the table's stream and puts approval.requested and
// approval.decided on EventBridge (docs/api.md, "Notifications"): a notification
// exists only for a committed transition. It also starts each new pending
// approval's expiry timer (an execution of the expiry state machine), so
// the functions that create approvals hold no Step Functions permission,
// and it is the runs' sequencer: it numbers the ledger events the stream
// shows inserted unsequenced. It may read the stream, put events on the
// fluidbox bus, start executions of that state machine, and read and
// number a run's ledger items, nothing else.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/expiry"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/notify"
	"github.com/fluidbox/fluidbox/shared/notify/eventbus"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("notify: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	d, err := function.Load(ctx, getenv, config.Notify)
	if err != nil {
		return err
	}
	pub := eventbus.New(eventbridge.NewFromConfig(d.AWS), d.Config.EventBus)
	// Without a state machine no timer starts; lazy expiry and the sweep
	// expire overdue approvals.
	var timers approval.Scheduler
	if d.Config.StateMachineARN != "" {
		timers = expiry.NewStepFunctions(sfn.NewFromConfig(d.AWS), d.Config.StateMachineARN)
	}
	h := notify.NewHandler(pub, timers, d.Logger)
	// The runs' sequencer: each insert of an unsequenced ledger event
	// wakes it (docs/architecture.md, "Ledger").
	h.Sequence(d.Ledger)
	lambda.StartWithOptions(h.Stream, lambda.WithContext(ctx))
	return nil
}
