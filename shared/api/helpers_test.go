package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

const adminToken = "test-admin-token-0123456789"

// stack is the API on the local stack: a real HTTP server in front of the
// handler, minidyn behind it.
type stack struct {
	t   *testing.T
	url string
	st  *store.Store
	db  *devstack.DynamoDB
	led *ledger.Ledger
	// runners holds each run's runner token, by run id.
	runners sync.Map
}

func newStack(t *testing.T) *stack {
	t.Helper()
	// Each route's table requests are made in its function's IAM role
	// (template.yaml), as on AWS.
	st, db := roleStore(t)
	// Events are numbered when read, not by a goroutine after each
	// append: a test that places a fault on a run's next recording meets
	// no sequencer's transaction in between.
	led := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead)
	// Tests of other properties send a run's requests by the dozen at
	// once; TestRunOpenRequests holds the bound on open requests.
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, RunMaxOpenRequests: 1000})))
	t.Cleanup(srv.Close)
	return &stack{t: t, url: srv.URL, st: st, db: db, led: led}
}

type response struct {
	status int
	body   map[string]any
	raw    []byte
}

func (s *stack) do(method, path, token string, body any) response {
	s.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewBufferString(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := response{status: resp.StatusCode, raw: raw}
	_ = json.Unmarshal(raw, &out.body)
	return out
}

// must is do, failing the test unless the status is want.
func (s *stack) must(want int, method, path, token string, body any) map[string]any {
	s.t.Helper()
	r := s.do(method, path, token, body)
	if r.status != want {
		s.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.raw, want)
	}
	return r.body
}

func (s *stack) policy(doc string) string {
	s.t.Helper()
	return s.must(201, "POST", "/v1/policies", adminToken, doc)["id"].(string)
}

// session creates a run and returns its id and token.
func (s *stack) session(body map[string]any) (string, string) {
	s.t.Helper()
	out := s.must(201, "POST", "/v1/sessions", adminToken, body)
	if rt, ok := out["runner_token"].(string); ok {
		s.runners.Store(out["id"], rt)
	}
	return out["id"].(string), out["token"].(string)
}

// runner returns the runner token issued with run id.
func (s *stack) runner(id string) string {
	s.t.Helper()
	rt, ok := s.runners.Load(id)
	if !ok {
		s.t.Fatalf("run %s was created without a runner token", id)
	}
	return rt.(string)
}

// items scans the whole table: what a test expects to find stored.
func (s *stack) items() []map[string]string {
	s.t.Helper()
	db := devstack.DynamoClient(s.db.URL)
	var out []map[string]string
	in := &dynamodb.ScanInput{TableName: aws.String(s.st.Table())}
	for {
		page, err := db.Scan(context.Background(), in)
		if err != nil {
			s.t.Fatalf("scan: %v", err)
		}
		for _, it := range page.Items {
			flat := map[string]string{}
			for k, v := range it {
				b, _ := json.Marshal(v)
				flat[k] = string(b)
			}
			out = append(out, flat)
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

const basicPolicy = `{"name":"basic","default_verdict":"require_approval","rules":[
 {"id":"git-read","tool":"Bash","match":{"command_prefix":["git status","git diff"]},"verdict":"allow"},
 {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"}]}`

// roleStore is testenv.StoreOn whose requests made while serving a route
// (through roles.Serve) are checked against the IAM role template.yaml
// gives that route's function.
func roleStore(t *testing.T, opts ...func(*dynamodb.Options)) (*store.Store, *devstack.DynamoDB) {
	t.Helper()
	st, db := testenv.StoreOn(t, append([]func(*dynamodb.Options){roles.Client}, opts...)...)
	roles.Enforce(t, db, st.Table())
	return st, db
}
