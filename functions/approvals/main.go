// Command approvals is the Lambda function for humans deciding approvals:
// list, get, decide, a run's approvals and session grants, and Slack's
// signed clicks on approval messages (the route rows of Function Approvals). It
// holds DynamoDB permissions only.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/fluidbox/fluidbox/shared/api/approvals"
	"github.com/fluidbox/fluidbox/shared/api/members"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/sso"
	"github.com/fluidbox/fluidbox/shared/telemetry"
	"github.com/fluidbox/fluidbox/shared/telemetry/otlp"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("approvals: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	d, err := function.Load(ctx, getenv, config.Lambda)
	if err != nil {
		return err
	}
	verifier, err := sso.Load(ctx, d.Config)
	if err != nil {
		return err
	}
	slack, err := slackbot.FromConfig(d.Config)
	if err != nil {
		return err
	}
	tel, err := otlp.FromEnv(ctx, getenv, "fluidbox-approvals")
	if err != nil {
		return err
	}
	// CloudWatch metrics (EMF lines in the log) always; OpenTelemetry when an endpoint is set.
	h, err := handler(d, verifier, slack, telemetry.WithCloudWatch(tel.Telemetry(), os.Stdout, getenv))
	if err != nil {
		return err
	}
	function.ServeAPI(ctx, function.Flushed(h, tel.Flush, d.Logger))
	return nil
}

// handler serves the approvals rows of the route table; in SSO mode people
// are authenticated by the members package, whose routes are Control's.
func handler(d function.Deps, verifier *sso.Verifier, slack slackbot.Config, t *telemetry.Telemetry) (*route.Server, error) {
	base := route.ConfigFrom(d.Config, d.Ledger, d.Logger)
	base.Telemetry = t
	if verifier != nil {
		base.Users = members.New(members.Config{Config: base, OIDC: verifier})
	}
	return route.New(base, route.Target{Function: route.Approvals, Via: route.APIGateway},
		approvals.New(approvals.Config{Config: base, Slack: slack}))
}
