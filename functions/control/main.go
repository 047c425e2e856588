// Command control is the Lambda function for the operator's API: runs,
// policies, capability bundles, connections (sealing only), the model
// upstream, trigger configurations, members and the approvals page
// (the route rows of Function Control). It holds DynamoDB permissions and
// kms:Encrypt, never Decrypt.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api/connections"
	"github.com/fluidbox/fluidbox/shared/api/control"
	"github.com/fluidbox/fluidbox/shared/api/members"
	"github.com/fluidbox/fluidbox/shared/api/model"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/triggers"
	"github.com/fluidbox/fluidbox/shared/api/workspaces"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/seal"
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
	// With a key, credentials are sealed here; this role may Encrypt,
	// never Decrypt.
	var sealer seal.Sealer
	if d.Config.KMSKeyID != "" {
		sealer = seal.NewKMS(kms.NewFromConfig(d.AWS), d.Config.KMSKeyID)
	}
	h, err := handler(d, verifier, sealer)
	if err != nil {
		return err
	}
	function.ServeAPI(ctx, h)
	return nil
}

// handler serves the control rows of the route table.
func handler(d function.Deps, verifier *sso.Verifier, sealer seal.Sealer) (*route.Server, error) {
	// Creation refuses connection and model-upstream URLs the broker
	// would never dial.
	guard := egress.New(d.Config.ConnectionAllowCIDRs)
	prices, err := admission.LoadPrices(d.Config.PricesFile)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	base := route.ConfigFrom(d.Config, d.Ledger, d.Logger)
	people := members.New(members.Config{Config: base, OIDC: verifier})
	if verifier != nil {
		base.Users = people
	}
	return route.New(base, route.Target{Function: route.Control, Via: route.APIGateway},
		control.New(control.Config{Config: base, SSEMaxDuration: function.SSEWindow, Page: control.PageConfig(verifier)}),
		connections.New(connections.Config{Config: base, Sealer: sealer, Egress: guard}),
		model.New(model.Config{Config: base, Sealer: sealer, Prices: prices, Egress: guard}),
		// The webhook secret derives a trigger's own secret
		// (own_webhook_secret), shown once; deliveries are the github
		// function's.
		triggers.New(triggers.Config{Config: base, GitHubWebhookSecret: d.Config.GitHubWebhookSecret}),
		// The GitHub App's key is sealed here; workspaces are the broker's.
		workspaces.New(workspaces.Config{Config: base, Sealer: sealer, Egress: guard}),
		people,
	)
}
