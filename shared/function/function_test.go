package function

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fluidbox/fluidbox/shared/store"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestAWSConfigFailsClosed: without the region or the role's credentials
// the function does not start, and says which variables are missing.
func TestAWSConfigFailsClosed(t *testing.T) {
	t.Parallel()
	_, err := AWSConfig(env(map[string]string{"AWS_ACCESS_KEY_ID": "k"}))
	if err == nil || !strings.Contains(err.Error(), "AWS_REGION, AWS_SECRET_ACCESS_KEY") {
		t.Fatalf("AWSConfig(no region, no secret) = %v, want an error naming both", err)
	}
}

// TestAWSConfigReadsLambdaEnvironment: the region, the session
// credentials, and AWS_ENDPOINT_URL_<SERVICE> as the SDK's clients read it.
func TestAWSConfigReadsLambdaEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := AWSConfig(env(map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "tok",
		"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "AKID" || creds.SecretAccessKey != "secret" || creds.SessionToken != "tok" || cfg.Region != "eu-west-1" {
		t.Errorf("AWSConfig = region %q, credentials %+v (%v)", cfg.Region, creds, err)
	}
	if got := dynamodb.NewFromConfig(cfg).Options().BaseEndpoint; got == nil || *got != "http://127.0.0.1:8000" {
		t.Errorf("DynamoDB BaseEndpoint = %v, want AWS_ENDPOINT_URL_DYNAMODB", got)
	}
}

// TestFlushedAfterTheAnswer: the flush runs once the handler has written
// its answer, within FlushTimeout, and its failure changes nothing the
// caller sees.
func TestFlushedAfterTheAnswer(t *testing.T) {
	t.Parallel()
	var order []string
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		order = append(order, "handler")
		w.WriteHeader(http.StatusTeapot)
	})
	flush := func(ctx context.Context) error {
		order = append(order, "flush")
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the flush has no deadline")
		}
		return errors.New("collector down")
	}
	rec := httptest.NewRecorder()
	Flushed(h, flush, slog.New(slog.DiscardHandler)).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusTeapot || len(order) != 2 || order[0] != "handler" || order[1] != "flush" {
		t.Errorf("Flushed: status %d, order %v; want 418, handler then flush", rec.Code, order)
	}
}

// TestClientsSendBodiesWithoutWriteTo: every client built from AWSConfig
// (KMS here, DynamoDB with store.RetryConflicts on top, which adds the
// same step again) hands net/http a request body without WriteTo, so it
// never closes its own connection under an answer
// (store.BodyWithoutWriteTo).
func TestClientsSendBodiesWithoutWriteTo(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	cfg, err := AWSConfig(env(map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_ENDPOINT_URL_KMS": srv.URL, "AWS_ENDPOINT_URL_DYNAMODB": srv.URL,
	}))
	if err != nil {
		t.Fatal(err)
	}
	// What reaches the transport, seen at the last step before it.
	var sent []any
	seen := func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("SeeBody", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			sent = append(sent, in.Request.(*smithyhttp.Request).GetStream())
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
	}
	ctx := context.Background()
	_, _ = kms.NewFromConfig(cfg, func(o *kms.Options) { o.APIOptions = append(o.APIOptions, seen) }).ListKeys(ctx, &kms.ListKeysInput{})
	_, _ = dynamodb.NewFromConfig(cfg, store.RetryConflicts, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, seen)
		o.RetryMaxAttempts = 1
	}).ListTables(ctx, &dynamodb.ListTablesInput{})
	if len(sent) != 2 {
		t.Fatalf("saw %d requests, want 2", len(sent))
	}
	for i, body := range sent {
		if _, ok := body.(io.WriterTo); ok || body == nil {
			t.Errorf("request %d's body is a %T, with WriteTo", i, body)
		}
	}
}
