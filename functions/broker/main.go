// Command broker is the Lambda function that holds the operator's secrets
// (the route rows of Function Broker): it serves the model proxy
// (POST /v1/sessions/{id}/model/v1/messages) and a run's workspace through
// a Lambda function URL with response streaming, so server-sent events
// reach the sandbox as the model writes them, and through API Gateway every
// route that seals, opens or spends a credential: connections (their
// credentials, tools, brokered calls and OAuth), the model upstream, the
// GitHub App and a run's report. It is the only function whose role may
// call KMS, and the only one that links the MCP client, the OAuth token
// exchange and the model proxy. The function URL's auth type is NONE: the session
// token authenticates every model request, and only the model proxy's rows
// are routed there; API Gateway's events reach only the brokered rows.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api/connections"
	"github.com/fluidbox/fluidbox/shared/api/members"
	"github.com/fluidbox/fluidbox/shared/api/model"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/workspaces"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/sso"
	"github.com/fluidbox/fluidbox/shared/telemetry"
	"github.com/fluidbox/fluidbox/shared/telemetry/otlp"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("broker: start", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	d, err := function.Load(ctx, getenv, config.Broker)
	if err != nil {
		return err
	}
	// Refresh is a people route: in SSO mode its callers are verified.
	verifier, err := sso.Load(ctx, d.Config)
	if err != nil {
		return err
	}
	sealer := seal.NewKMS(kms.NewFromConfig(d.AWS), d.Config.KMSKeyID)
	tel, err := otlp.FromEnv(ctx, getenv, "fluidbox-broker")
	if err != nil {
		return err
	}
	// CloudWatch metrics (EMF lines in the log) always; OpenTelemetry when an endpoint is set.
	api, url, err := handlers(d, verifier, sealer, telemetry.WithCloudWatch(tel.Telemetry(), os.Stdout, getenv))
	if err != nil {
		return err
	}
	// The function URL's InvokeMode is RESPONSE_STREAM: lambdaurl streams
	// each write of the model proxy to the client. API Gateway brings the
	// broker's other routes as REST proxy events.
	model := lambdaurl.Wrap(function.Flushed(url, tel.Flush, d.Logger))
	tools := httpadapter.New(function.Flushed(api, tel.Flush, d.Logger)).ProxyWithContext
	lambda.StartWithOptions(func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			HTTPMethod string `json:"httpMethod"`
		}
		if err := json.Unmarshal(raw, &probe); err == nil && probe.HTTPMethod != "" {
			var ev events.APIGatewayProxyRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("broker: decode API Gateway event: %w", err)
			}
			return tools(ctx, ev)
		}
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("broker: decode function URL event: %w", err)
		}
		return model(ctx, &ev)
	}, lambda.WithContext(ctx))
	return nil
}

// handlers serves the broker's rows of the route table: those through API
// Gateway, and those on its function URL.
func handlers(d function.Deps, verifier *sso.Verifier, sealer seal.Sealer, t *telemetry.Telemetry) (api, url *route.Server, err error) {
	prices, err := admission.LoadPrices(d.Config.PricesFile)
	if err != nil {
		return nil, nil, fmt.Errorf("broker: %w", err)
	}
	base := route.ConfigFrom(d.Config, d.Ledger, d.Logger)
	base.Telemetry = t
	// Every dial to an upstream (MCP or model) goes through the guard.
	guard := egress.New(d.Config.ConnectionAllowCIDRs)
	if verifier != nil {
		base.Users = members.New(members.Config{Config: base, OIDC: verifier})
	}
	// The model and workspace packages serve rows on both ways in; one
	// instance of each serves both, so they share what they cache.
	models := model.New(model.Config{Config: base, Sealer: sealer, Prices: prices, Egress: guard})
	code := workspaces.New(workspaces.Config{Config: base, Sealer: sealer, Egress: guard})
	api, err = route.New(base, route.Target{Function: route.Broker, Via: route.APIGateway},
		connections.New(connections.Config{
			Config:              base,
			Sealer:              sealer,
			UpstreamToolsTTL:    time.Duration(d.Config.UpstreamToolsTTLSeconds) * time.Second,
			MaxPendingApprovals: d.Config.MaxPendingApprovals,
			BaseURL:             baseURL(d.Config.PublicURL),
			Egress:              guard,
		}),
		models, code)
	if err != nil {
		return nil, nil, err
	}
	url, err = route.New(base, route.Target{Function: route.Broker, Via: route.FunctionURL}, models, code)
	if err != nil {
		return nil, nil, err
	}
	return api, url, nil
}

// baseURL is the API's public base URL, under which the OAuth redirect URI
// (<ApiUrl>/v1/oauth/callback) and the client metadata document live: the
// configured public URL (a custom domain), else the API's domain and stage
// as API Gateway reports them (not the Host header).
func baseURL(public string) func(*http.Request) string {
	return func(r *http.Request) string {
		if public != "" {
			return public
		}
		if gw, ok := core.GetAPIGatewayContextFromContext(r.Context()); ok && gw.DomainName != "" && gw.Stage != "" {
			return "https://" + gw.DomainName + "/" + gw.Stage
		}
		return "https://" + r.Host
	}
}
