package function

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
