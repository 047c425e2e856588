package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestEvents runs the invoke payloads in events/broker through the same
// streaming function-URL adapter main uses, over minidyn.
func TestEvents(t *testing.T) {
	t.Parallel()
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "k", "key"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		for _, r := range db.Layer.Refused() {
			t.Errorf("DynamoDB on AWS refuses this request: %s", r)
		}
	})
	st := store.New(devstack.DynamoClient(db.URL), "broker")
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, url, err := handlers(function.Deps{Store: st, Ledger: ledger.New(st, time.Now)}, nil, sealer, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := lambdaurl.Wrap(url)
	for _, c := range []struct {
		file   string
		status int
		body   string
	}{
		{"probe.json", 200, ""},
		{"messages-unauthenticated.json", 401, `"authentication_error"`},
	} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "events", "broker", c.file))
		if err != nil {
			t.Fatal(err)
		}
		var req events.LambdaFunctionURLRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		resp, err := h(context.Background(), &req)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.body) {
			t.Errorf("%s: %d %s, want %d containing %s", c.file, resp.StatusCode, body, c.status, c.body)
		}
	}
}

// TestServesItsRows: through API Gateway the broker serves exactly its API
// rows of the route table, on its function URL exactly its URL rows.
func TestServesItsRows(t *testing.T) {
	t.Parallel()
	apiGW, url, err := handlers(function.Offline(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := apiGW.ServesExactly(api.Surface(), route.Target{Function: route.Broker, Via: route.APIGateway}); err != nil {
		t.Error(err)
	}
	if err := url.ServesExactly(api.Surface(), route.Target{Function: route.Broker, Via: route.FunctionURL}); err != nil {
		t.Error(err)
	}
}
