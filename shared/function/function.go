// Package function wires fluidbox's Lambda functions: configuration from
// the environment and the clients every function needs, built once per cold
// start (Load), and the shared API handler behind API Gateway's REST proxy
// integration (ServeHTTP).
package function

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
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
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/store"
)

// sseWindow bounds an event-stream response in Lambda: API Gateway REST
// buffers the whole response, so a stream returns what it has and the
// client resumes with Last-Event-ID.
const sseWindow = 5 * time.Second

// oidcTimeout bounds one request to the OIDC issuer (discovery or keys),
// well inside API Gateway's 29 s.
const oidcTimeout = 5 * time.Second

// Deps is what every function builds once per cold start: its
// configuration, the AWS SDK's configuration, the store and ledger over
// the table, and a logger that carries Lambda request ids. Building them
// does no I/O; a function with no table (notify) leaves Store and Ledger
// unused.
type Deps struct {
	Config config.Config
	AWS    aws.Config
	Store  *store.Store
	Ledger *ledger.Ledger
	Logger *slog.Logger
}

// Load reads the configuration for mode through getenv and builds the
// common dependencies. The SDK reads AWS_ENDPOINT_URL_DYNAMODB itself,
// which is how a local invoke points a function at a local table.
func Load(ctx context.Context, getenv func(string) string, mode config.Mode) (Deps, error) {
	cfg, err := config.Load(getenv, mode)
	if err != nil {
		return Deps{}, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return Deps{}, fmt.Errorf("function: aws config: %w", err)
	}
	st := store.New(dynamodb.NewFromConfig(awsCfg), cfg.Table)
	return Deps{
		Config: cfg,
		AWS:    awsCfg,
		Store:  st,
		Ledger: ledger.New(st, time.Now),
		Logger: slog.New(lambdacontext.NewLogHandler()),
	}, nil
}

// ServeHTTP runs the API handler as a Lambda function until the runtime
// stops it.
func ServeHTTP(ctx context.Context, getenv func(string) string) error {
	d, err := Load(ctx, getenv, config.Lambda)
	if err != nil {
		return err
	}
	cfg, awsCfg := d.Config, d.AWS
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
	slackCfg, err := SlackConfig(cfg)
	if err != nil {
		return err
	}
	h := api.New(api.Config{
		Slack:          slackCfg,
		AdminToken:     cfg.AdminToken,
		Ledger:         d.Ledger,
		Logger:         d.Logger,
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

// SlackConfig is the Slack part of cfg.
func SlackConfig(cfg config.Config) (slackbot.Config, error) {
	users, err := slackbot.ParseUsers(cfg.SlackUsers)
	if err != nil {
		return slackbot.Config{}, fmt.Errorf("function: %w", err)
	}
	return slackbot.Config{
		BotToken:      slackbot.Secret(cfg.SlackBotToken),
		SigningSecret: slackbot.Secret(cfg.SlackSigningSecret),
		Channel:       cfg.SlackChannel,
		APIURL:        cfg.SlackAPIURL,
		Users:         users,
	}, nil
}
