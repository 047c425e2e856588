// Command slack keeps each approval's and input request's Slack message in
// step with it: subscribed to the fluidbox bus (approval.requested,
// approval.decided, input.requested, input.settled, run.halted), it reads
// the row as committed and posts or updates its message. A notification Lambda's asynchronous retries could
// not deliver reaches it again from the retry queue (the on-failure
// destination of its invocations), until Slack is back. It may read the
// table, write only its own message records and use only its retry
// queue; it never decides anything (the approvals function serves
// Slack's clicks).
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/slackbot"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("slack: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	d, err := function.Load(ctx, getenv, config.Slack)
	if err != nil {
		return err
	}
	cfg, err := slackbot.FromConfig(d.Config)
	if err != nil {
		return err
	}
	n := slackbot.NewNotifier(slackbot.NewClient(cfg), d.Store, cfg.Channel, d.Logger, time.Now).WithUsers(cfg.Users)
	// One entry point for both feeds: the bus's notifications, and the
	// retry queue where those Lambda could not deliver wait for Slack.
	lambda.StartWithOptions(n.Invoke, lambda.WithContext(ctx))
	return nil
}
