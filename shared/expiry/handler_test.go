package expiry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/expiry"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const adminToken = "expiry-test-admin-token-0123456789"

// clock is a settable time, shared by the API that creates approvals and
// the service the handler expires them with.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type env struct {
	t     *testing.T
	url   string
	clock *clock
	h     *expiry.Handler
	svc   *approval.Service
}

// newEnv is the API on minidyn, to create approvals the way the gate does,
// and the expire/sweep handler over the same table.
func newEnv(t *testing.T) *env {
	t.Helper()
	st := testenv.Store(t)
	c := &clock{t: time.Now().UTC()}
	led := ledger.New(st, c.now)
	srv := httptest.NewServer(api.New(api.Config{AdminToken: adminToken, Ledger: led, Now: c.now}))
	t.Cleanup(srv.Close)
	svc := approval.NewService(led, c.now)
	return &env{t: t, url: srv.URL, clock: c, svc: svc, h: expiry.NewHandler(svc, slog.New(slog.DiscardHandler))}
}

func (e *env) post(path string, body string, token string) map[string]any {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.url+path, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode >= 300 {
		e.t.Fatalf("POST %s = %d %v", path, resp.StatusCode, out)
	}
	return out
}

// pending creates a run and a call that waits for a human (TTL 60 s), and
// returns the approval id.
func (e *env) pending(call string) string {
	e.t.Helper()
	pol := e.post("/v1/policies", `{"name":"ask","default_verdict":"require_approval","approval":{"ttl_seconds":60},"rules":[]}`, adminToken)["id"].(string)
	run := e.post("/v1/sessions", `{"policy_id":"`+pol+`","capabilities":["claude-code"],"budget":{"limit_usd":1}}`, adminToken)
	ans := e.post("/v1/sessions/"+run["id"].(string)+"/permission", `{"tool_call_id":"`+call+`","tool_name":"Bash","input":{"command":"make deploy"}}`, run["token"].(string))
	if ans["decision"] != "pending" {
		e.t.Fatalf("permission = %v, want pending", ans)
	}
	return ans["approval_id"].(string)
}

func TestExpire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	apr := e.pending("c1")

	// Early (the function's clock behind the state machine's): an error, so
	// that the state machine retries, and nothing changes.
	if _, err := e.h.Expire(ctx, expiry.Task{ApprovalID: apr}); !errors.Is(err, expiry.ErrNotDue) {
		t.Fatalf("Expire before expires_at = %v, want ErrNotDue", err)
	}
	e.clock.add(61 * time.Second)
	got, err := e.h.Expire(ctx, expiry.Task{ApprovalID: apr})
	if err != nil || got != (expiry.Result{ApprovalID: apr, Expired: true, Status: vocab.ApprovalExpired}) {
		t.Fatalf("Expire(%q) = %+v, %v, want expired", apr, got, err)
	}
	// The timer firing again (a retry after a lost response) changes nothing.
	got, err = e.h.Expire(ctx, expiry.Task{ApprovalID: apr})
	if err != nil || got != (expiry.Result{ApprovalID: apr, Status: vocab.ApprovalExpired}) {
		t.Fatalf("Expire(%q) again = %+v, %v, want already expired", apr, got, err)
	}
	a, err := e.svc.Get(ctx, apr)
	if err != nil || a.Status != vocab.ApprovalExpired || a.DecidedBy != approval.ExpiredBy {
		t.Fatalf("approval after expiry = %+v, %v", a, err)
	}
}

// TestExpireSampleEvents decodes the expire function's sample events: an
// approval that does not exist is answered, not failed (retrying cannot
// make it appear), and a malformed id is an error.
func TestExpireSampleEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var task expiry.Task
	decodeFile(t, "../../events/expire/unknown.json", &task)
	got, err := e.h.Expire(context.Background(), task)
	if err != nil || !got.NotFound || got.Expired {
		t.Fatalf("Expire(%q) = %+v, %v, want not_found and no error", task.ApprovalID, got, err)
	}
	decodeFile(t, "../../events/expire/overdue.json", &task)
	if task.ApprovalID == "" {
		t.Fatal("events/expire/overdue.json has no approval_id")
	}
	if _, err := e.h.Expire(context.Background(), expiry.Task{ApprovalID: "RUN#x"}); err == nil {
		t.Fatal("Expire of a malformed id = nil error")
	}
}

func decodeFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
