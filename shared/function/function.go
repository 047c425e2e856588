// Package function wires an HTTP Lambda function: configuration from the
// environment, AWS clients built once per cold start, and the shared API
// handler behind API Gateway's REST proxy integration.
package function

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/expiry"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// sseWindow bounds an event-stream response in Lambda: API Gateway REST
// buffers the whole response, so a stream returns what it has and the
// client resumes with Last-Event-ID.
const sseWindow = 5 * time.Second

// oidcTimeout bounds one request to the OIDC issuer (discovery or keys),
// well inside API Gateway's 29 s.
const oidcTimeout = 5 * time.Second

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
	prices, err := admission.LoadPrices(cfg.PricesFile)
	if err != nil {
		return fmt.Errorf("function: %w", err)
	}
	// With a key (the control function), PUT /v1/model-upstream seals the
	// operator's model key; this role may Encrypt, never Decrypt.
	var sealer seal.Sealer
	if cfg.KMSKeyID != "" {
		sealer = seal.NewKMS(kms.NewFromConfig(awsCfg), cfg.KMSKeyID)
	}
	// A function that creates approvals (the gate) starts each one's expiry
	// timer; without a state machine, lazy expiry and the sweep expire.
	var sched approval.Scheduler = approval.Lazy{}
	if cfg.StateMachineARN != "" {
		sched = expiry.NewStepFunctions(sfn.NewFromConfig(awsCfg), cfg.StateMachineARN)
	}
	var verifier *auth.OIDC
	if cfg.RequireSSO {
		// Discovery happens once per cold start; the issuer's keys are
		// fetched on first use and cached for the life of the process.
		verifier, err = auth.NewOIDC(ctx, auth.OIDCConfig{
			Issuer:     cfg.OIDCIssuer,
			Audience:   cfg.OIDCAudience,
			RolesClaim: cfg.OIDCRolesClaim,
			Client:     &http.Client{Timeout: oidcTimeout},
		})
		if err != nil {
			return fmt.Errorf("function: %w", err)
		}
	}
	h := api.New(api.Config{
		AdminToken:     cfg.AdminToken,
		Ledger:         ledger.New(st, time.Now),
		Logger:         slog.New(lambdacontext.NewLogHandler()),
		SSEMaxDuration: sseWindow,
		Scheduler:      sched,
		OIDC:           verifier,
		Prices:         prices,
		Sealer:         sealer,

		GitHubWebhookSecret: cfg.GitHubWebhookSecret,
		UpstreamToolsTTL:    time.Duration(cfg.UpstreamToolsTTLSeconds) * time.Second,
	})
	lambda.StartWithOptions(httpadapter.New(h).ProxyWithContext, lambda.WithContext(ctx))
	return nil
}
