package function

import (
	"context"
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
