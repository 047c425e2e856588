// Command broker is the Lambda function that holds the operator's secrets:
// it serves the model proxy (POST /v1/sessions/{id}/model/v1/messages)
// through a Lambda function URL with response streaming, so server-sent
// events reach the sandbox as the model writes them. It is the only
// function whose role may call kms:Decrypt; the session token authenticates
// every request (the URL's own auth type is NONE), and nothing but the
// model proxy is routed there. Through API Gateway it also serves the two
// routes that open a connection's credential: POST
// /v1/connections/{id}/tools/refresh and POST /v1/sessions/{id}/tools/call.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/seal"
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
	cfg := d.Config
	prices, err := admission.LoadPrices(cfg.PricesFile)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	apiCfg := api.Config{
		AdminToken:       cfg.AdminToken,
		Ledger:           d.Ledger,
		Logger:           d.Logger,
		Prices:           prices,
		Sealer:           seal.NewKMS(kms.NewFromConfig(d.AWS), cfg.KMSKeyID),
		UpstreamToolsTTL: time.Duration(cfg.UpstreamToolsTTLSeconds) * time.Second,

		MaxPendingApprovals:  cfg.MaxPendingApprovals,
		RunRequestsPerMinute: cfg.RunRequestsPerMinute,
		ConnectionAllowCIDRs: cfg.ConnectionAllowCIDRs,
	}
	// The function URL's InvokeMode is RESPONSE_STREAM: lambdaurl streams
	// each write of the model proxy to the client. API Gateway brings the
	// brokered-tool routes (refresh, tools/call) as REST proxy events.
	model := lambdaurl.Wrap(api.NewModelProxy(apiCfg))
	tools := httpadapter.New(api.New(apiCfg)).ProxyWithContext
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
