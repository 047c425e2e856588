// Package function wires fluidbox's Lambda functions: configuration from
// the environment and the clients every function needs, built once per cold
// start (Load), and an HTTP handler behind API Gateway's REST proxy
// integration (ServeAPI). It imports no handler package and no KMS, MCP or
// OIDC code: each functions/<name>/main.go builds the handler of its own
// routes (route.Table), so each links only what those routes need.
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
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

// SSEWindow bounds an event-stream response in Lambda: API Gateway REST
// buffers the whole response, so a stream returns what it has and the
// client resumes with Last-Event-ID.
const SSEWindow = 5 * time.Second

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

// Route is the configuration every handler package shares.
func (d Deps) Route() route.Config {
	return route.Config{AdminToken: d.Config.AdminToken, Ledger: d.Ledger, Logger: d.Logger, Now: time.Now}
}

// ServeAPI serves h to API Gateway's REST proxy events until the runtime
// stops the function.
func ServeAPI(ctx context.Context, h http.Handler) {
	lambda.StartWithOptions(httpadapter.New(h).ProxyWithContext, lambda.WithContext(ctx))
}
