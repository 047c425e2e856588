// Command control is the Lambda function for the operator's API: runs,
// policies, capability bundles, trigger configurations, members and the
// approvals page (the route rows of Function Control). It holds DynamoDB
// permissions only: it seals nothing and opens nothing, and links no model
// proxy, OAuth token exchange, MCP client or KMS code (infra's
// TestFunctionImports); connections, the model upstream and the GitHub
// App, which seal a credential, are the broker's.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/fluidbox/fluidbox/shared/api/control"
	"github.com/fluidbox/fluidbox/shared/api/members"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/triggers"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/sso"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("control: start", "err", err)
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
	h, err := handler(d, verifier)
	if err != nil {
		return err
	}
	function.ServeAPI(ctx, h)
	return nil
}

// handler serves the control rows.
func handler(d function.Deps, verifier *sso.Verifier) (*route.Server, error) {
	base := route.ConfigFrom(d.Config, d.Ledger, d.Logger)
	people := members.New(members.Config{Config: base, OIDC: verifier})
	if verifier != nil {
		base.Users = people
	}
	return route.New(base, route.Target{Function: route.Control, Via: route.APIGateway},
		control.New(control.Config{Config: base, SSEMaxDuration: function.SSEWindow, Page: control.PageConfig(verifier)}),
		// The webhook secret derives a trigger's own secret
		// (own_webhook_secret), shown once; deliveries are the github
		// function's.
		triggers.New(triggers.Config{Config: base, GitHubWebhookSecret: d.Config.GitHubWebhookSecret}),
		people,
	)
}
