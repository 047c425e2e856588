// Package function wires fluidbox's Lambda functions: configuration from
// the environment and the clients every function needs, built once per cold
// start (Load), and an HTTP handler behind API Gateway's REST proxy
// integration (ServeAPI). It imports no handler package and no KMS, MCP or
// OIDC code: each functions/<name>/main.go builds the handler of its own
// routes (its route rows), so each links only what those routes need.
package function

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

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
// common dependencies.
func Load(_ context.Context, getenv func(string) string, mode config.Mode) (Deps, error) {
	cfg, err := config.Load(getenv, mode)
	if err != nil {
		return Deps{}, err
	}
	awsCfg, err := AWSConfig(getenv)
	if err != nil {
		return Deps{}, err
	}
	st := store.New(dynamodb.NewFromConfig(awsCfg, store.RetryConflicts), cfg.Table)
	return Deps{
		Config: cfg,
		AWS:    awsCfg,
		Store:  st,
		// The notify function numbers events, woken by the table's
		// stream; readers number what is pending before they read. A
		// goroutine after the answer would be frozen with the instance.
		Ledger: ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead),
		Logger: slog.New(lambdacontext.NewLogHandler()),
	}, nil
}

// ServeAPI serves h to API Gateway's REST proxy events until the runtime
// stops the function.
func ServeAPI(ctx context.Context, h http.Handler) {
	lambda.StartWithOptions(httpadapter.New(h).ProxyWithContext, lambda.WithContext(ctx))
}

// FlushTimeout bounds the export after each request (Flushed).
const FlushTimeout = time.Second

// Flushed is h followed, on every request, by flush (the telemetry
// provider's): Lambda freezes the sandbox once the answer is returned, so
// spans and metrics still buffered would leave only at the next thaw, or
// never. A failed flush loses telemetry, never the answer, and an
// unreachable collector costs at most FlushTimeout a request.
func Flushed(h http.Handler, flush func(context.Context) error, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), FlushTimeout)
		defer cancel()
		if err := flush(ctx); err != nil {
			log.WarnContext(r.Context(), "telemetry: flush", "err", err)
		}
	})
}

// AWSConfig is the SDK configuration of a function, read from what Lambda
// puts in every function's environment: the region and the function role's
// credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN).
// It deliberately is not the SDK's config.LoadDefaultConfig: that links the
// whole credential chain (STS, SSO, SSO-OIDC, sign-in, IMDS, shared config
// files), some 1 MiB of code and a slower cold start, none of which a
// Lambda function uses. Missing credentials or region fail the start
// (closed), never fall back to another source. AWS_ENDPOINT_URL_<SERVICE>
// (the SDK's own variables) still points a client elsewhere, which is how a
// local invoke reaches a local table.
func AWSConfig(getenv func(string) string) (aws.Config, error) {
	var missing []string
	need := func(name string) string {
		v := getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	}
	region := need("AWS_REGION")
	key := need("AWS_ACCESS_KEY_ID")
	secret := need("AWS_SECRET_ACCESS_KEY")
	if len(missing) > 0 {
		return aws.Config{}, fmt.Errorf("function: aws config: %s not set", strings.Join(missing, ", "))
	}
	return aws.Config{
		Region:        region,
		Credentials:   aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(key, secret, getenv("AWS_SESSION_TOKEN"))),
		ConfigSources: []any{serviceEndpoints(getenv)},
		// Every client (KMS, Secrets Manager, Step Functions, ...) keeps
		// from closing its own connection under an answer.
		APIOptions: []func(*middleware.Stack) error{store.BodyWithoutWriteTo},
	}, nil
}

// serviceEndpoints gives a service client its AWS_ENDPOINT_URL_<SERVICE>,
// as the SDK's environment source would: the SDK's service clients ask
// every value of aws.Config.ConfigSources that has this method.
type serviceEndpoints func(string) string

func (e serviceEndpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	v := e("AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_"))
	return v, v != "", nil
}

// Offline is Deps whose store has no client, for building a function's
// handlers without I/O (each function's test does, to check its routes).
func Offline() Deps {
	st := store.New(nil, "unused")
	return Deps{Store: st, Ledger: ledger.New(st, time.Now)}
}
