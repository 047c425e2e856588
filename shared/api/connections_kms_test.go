package api_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	lkmsconfig "github.com/nsmithuk/local-kms/src/config"
	"github.com/nsmithuk/local-kms/src/data"
	"github.com/nsmithuk/local-kms/src/handler"
	"github.com/sirupsen/logrus"

	"github.com/fluidbox/fluidbox/shared/seal"
)

// localKMS is one in-process local-kms for the package's tests (its
// configuration is package globals of local-kms), set up as shared/seal's
// tests do.
var localKMS struct {
	once sync.Once
	db   *data.Database
	err  error
}

func kmsDatabase(t *testing.T) *data.Database {
	t.Helper()
	localKMS.once.Do(func() {
		dir, err := os.MkdirTemp("", "fluidbox-api-local-kms-*")
		if err != nil {
			localKMS.err = err
			return
		}
		lkmsconfig.DatabasePath = dir
		lkmsconfig.AWSRegion = "eu-west-1"
		lkmsconfig.AWSAccountId = "111122223333"
		localKMS.db = data.NewDatabase(dir)
	})
	if localKMS.err != nil {
		t.Fatalf("local-kms database: %v", localKMS.err)
	}
	return localKMS.db
}

var quietKMSLogger = func() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}()

// newKMSSealer serves local-kms on 127.0.0.1 (the operations a sealer
// uses, dispatched as lkms.HandleRequest does, with a silent logger),
// creates a key and returns a KMS sealer on it and the server.
func newKMSSealer(t *testing.T) (*seal.KMS, *httptest.Server) {
	t.Helper()
	db := kmsDatabase(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" || r.Method != http.MethodPost || !strings.Contains(r.Header.Get("Content-Type"), "json") {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		h := handler.NewRequestHandler(r, quietKMSLogger, db)
		var resp handler.Response
		switch strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "TrentService.") {
		case "CreateKey":
			resp = h.CreateKey()
		case "Encrypt":
			resp = h.Encrypt()
		case "Decrypt":
			resp = h.Decrypt()
		default:
			http.Error(w, "not implemented", http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(resp.Code)
		_, _ = io.WriteString(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	client := kms.New(kms.Options{
		Region:           "eu-west-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint:     aws.String(srv.URL),
		RetryMaxAttempts: 1,
		HTTPClient:       &http.Client{Timeout: 2 * time.Second},
	})
	out, err := client.CreateKey(context.Background(), &kms.CreateKeyInput{Description: aws.String("fluidbox api test")})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	return seal.NewKMS(client, aws.ToString(out.KeyMetadata.KeyId)), srv
}

// TestBrokeredCallWithKMS is the end-to-end path with KMS (local-kms)
// sealing: create, refresh, run, call, result. Then local-kms stops: the
// call is refused 503 unavailable, nothing is recorded and the upstream
// sees no request.
func TestBrokeredCallWithKMS(t *testing.T) {
	t.Parallel()
	sealer, kmsSrv := newKMSSealer(t)
	up := newMCPUpstream(t, canary)
	s := newBrokerStack(t, sealer, 0)
	pol := s.policy(brokerPolicy)
	con := s.connection("jira", up.url(), "shared", canary)
	s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
	run, tok := s.brokeredRun(pol, con, "")

	r := s.toolsCall(run, tok, "k1", "mcp__jira__echo", map[string]any{"text": "sealed by kms"})
	if r.body["decision"] != "allow" || resultText(t, r) != "sealed by kms" {
		t.Fatalf("call with KMS = %d %s", r.status, r.raw)
	}

	kmsSrv.Close()
	requests := up.requests.Load()
	lastSeq := s.want(200, "GET", "/v1/sessions/"+run, adminToken, nil)["last_seq"]
	r = s.toolsCall(run, tok, "k2", "mcp__jira__echo", map[string]any{"text": "x"})
	if r.status != 503 || !strings.Contains(string(r.raw), `"unavailable"`) {
		t.Errorf("call with KMS down = %d %s, want 503 unavailable", r.status, r.raw)
	}
	if up.requests.Load() != requests {
		t.Errorf("the upstream saw %d requests while KMS was down", up.requests.Load()-requests)
	}
	if got := s.want(200, "GET", "/v1/sessions/"+run, adminToken, nil)["last_seq"]; got != lastSeq {
		t.Errorf("last_seq moved from %v to %v: something was recorded", lastSeq, got)
	}
	// Refresh and credential replacement fail closed the same way.
	if r := s.call("POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil); r.status != 503 {
		t.Errorf("refresh with KMS down = %d %s, want 503", r.status, r.raw)
	}
	if r := s.call("PUT", "/v1/connections/"+con+"/credential", adminToken, map[string]any{"credential": map[string]any{"type": "bearer", "token": canary2}}); r.status != 503 {
		t.Errorf("replace with KMS down = %d %s, want 503", r.status, r.raw)
	}
	// Revoking needs no key: the emergency brake works with KMS down.
	if r := s.call("DELETE", "/v1/connections/"+con, adminToken, nil); r.status != 200 {
		t.Errorf("revoke with KMS down = %d %s, want 200", r.status, r.raw)
	}
	s.assertNoCanary()
}

// TestNoSealerFailsClosed: a server without a key service refuses to
// create connections and to broker calls, and still lists connections.
func TestNoSealerFailsClosed(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, nil, 0)
	if r := s.call("POST", "/v1/connections", adminToken, map[string]any{
		"name": "jira", "url": "http://127.0.0.1:1/mcp", "kind": "shared", "credential": map[string]any{"type": "bearer", "token": canary},
	}); r.status != 503 {
		t.Errorf("create without sealer = %d %s, want 503", r.status, r.raw)
	}
	if r := s.call("GET", "/v1/connections", adminToken, nil); r.status != 200 {
		t.Errorf("list without sealer = %d %s, want 200", r.status, r.raw)
	}
	s.assertNoCanary()
}
