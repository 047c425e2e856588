package api_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// FuzzGitHubWebhook drives the webhook's whole parse path — signature,
// headers, payload — against a real table. With sign set, the body is
// signed with the right secret so the fuzzer reaches the payload parser;
// otherwise the fuzzed signature header is sent as is. Properties: no
// panic, no 500; a delivery whose signature does not verify is 401 (or 413)
// and writes nothing; a run that is created has the tier the payload
// derives, so a fork never gets a trusted run.
func FuzzGitHubWebhook(f *testing.F) {
	st, db := testenv.StoreOn(f)
	h := api.New(api.Config{AdminToken: adminToken, Ledger: ledger.New(st, time.Now), GitHubWebhookSecret: webhookSecret})
	call := func(method, path, token string, headers map[string]string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := call("POST", "/v1/policies", adminToken, nil, []byte(basicPolicy))
	var pol struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &pol); err != nil || rec.Code != 201 {
		f.Fatalf("create policy = %d %s", rec.Code, rec.Body)
	}
	for _, repo := range []string{"KaTeX/KaTeX", "Codertocat/Hello-World", "bradrydzewski/drone-test-go", "a/b"} {
		body, _ := json.Marshal(map[string]any{"repository": repo, "policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
		if rec := call("POST", "/v1/triggers", adminToken, nil, body); rec.Code != 201 {
			f.Fatalf("create trigger for %s = %d %s", repo, rec.Code, rec.Body)
		}
	}
	dyn := devstack.DynamoClient(db.URL)
	count := func(t *testing.T) int32 {
		t.Helper()
		out, err := dyn.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(st.Table()), Select: "COUNT"})
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		return out.Count
	}

	// Seeds beyond testdata/fuzz: each real payload, signed and not.
	for _, name := range []string{"fork.opened.json", "same_repo.opened.json", "deleted_fork.opened.json"} {
		b := payload(f, name)
		f.Add(b, "", "pull_request", "seed-"+name, true)
		f.Add(b, sign(webhookSecret, b[:len(b)-1]), "pull_request", "seed-bad-"+name, false)
	}

	f.Fuzz(func(t *testing.T, body []byte, signature, event, delivery string, signIt bool) {
		if signIt {
			signature = sign(webhookSecret, body)
		}
		verifies := validForTest(webhookSecret, body, signature)
		before := count(t)
		rec := call("POST", "/v1/triggers/github", "", map[string]string{
			"Content-Type":        "application/json",
			"X-Hub-Signature-256": signature,
			"X-GitHub-Event":      event,
			"X-GitHub-Delivery":   delivery,
		}, body)
		if rec.Code == http.StatusInternalServerError {
			t.Fatalf("delivery = 500 %s", rec.Body)
		}
		if !verifies {
			if rec.Code != 401 && rec.Code != 413 {
				t.Fatalf("delivery with signature %q that does not verify = %d %s, want 401", signature, rec.Code, rec.Body)
			}
			if after := count(t); after != before {
				t.Fatalf("delivery that does not verify wrote %d items", after-before)
			}
			return
		}
		if rec.Code != 201 {
			return
		}
		var out struct {
			SessionID string     `json:"session_id"`
			TrustTier trust.Tier `json:"trust_tier"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("201 body %s: %v", rec.Body, err)
		}
		pr, err := trust.FromPullRequest(body)
		if err != nil {
			t.Fatalf("run %s created from a payload trust refuses: %v", out.SessionID, err)
		}
		if out.TrustTier != pr.Tier || (pr.Fork && out.TrustTier != trust.ReadOnly) {
			t.Fatalf("run %s tier = %s, payload derives %s (fork %v)", out.SessionID, out.TrustTier, pr.Tier, pr.Fork)
		}
		var run struct {
			TrustTier trust.Tier `json:"trust_tier"`
		}
		got := call("GET", "/v1/sessions/"+out.SessionID, adminToken, nil, nil)
		if err := json.Unmarshal(got.Body.Bytes(), &run); err != nil || run.TrustTier != out.TrustTier {
			t.Fatalf("GET run %s = %d %s, want tier %s", out.SessionID, got.Code, got.Body, out.TrustTier)
		}
	})
}

// validForTest is the webhook's signature rule, written out again.
func validForTest(secret string, body []byte, header string) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}
