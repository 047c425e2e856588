package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// TestLaunchSecretsSendsBodiesWithoutWriteTo: the runner's Secrets Manager
// client, built apart from the functions' shared configuration, also
// hands net/http its request bodies without WriteTo, so it never closes
// its own connection under an answer (store.BodyWithoutWriteTo).
func TestLaunchSecretsSendsBodiesWithoutWriteTo(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_ENDPOINT_URL_SECRETS_MANAGER": srv.URL}
	client, err := launchSecrets(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var body any
	seen := func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("SeeBody", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			body = in.Request.(*smithyhttp.Request).GetStream()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
	}
	_, _ = client.GetSecretValue(context.Background(), &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")}, func(o *secretsmanager.Options) {
		o.APIOptions = append(o.APIOptions, seen)
		o.RetryMaxAttempts = 1
	})
	if _, ok := body.(io.WriterTo); ok || body == nil {
		t.Errorf("the request's body is a %T, with WriteTo", body)
	}
}
