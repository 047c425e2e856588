package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestRunRateLimit: past FLUIDBOX_RUN_REQUESTS_PER_MINUTE a run's session
// token is answered 429 rate_limited with Retry-After, before any handler
// runs (the refused permission call records nothing); another run, the
// runner token and the operator are not limited by it.
func TestRunRateLimit(t *testing.T) {
	t.Parallel()
	st, db := roleStore(t)
	testenv.Calm(t, db)
	led := ledger.New(st, time.Now)
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, RunRequestsPerMinute: 4, Now: testenv.MinuteStart()})))
	t.Cleanup(srv.Close)
	s := &stack{t: t, url: srv.URL, st: st, db: db, led: led}
	body := map[string]any{"policy_id": s.policy(basicPolicy), "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
	a, tokA := s.session(body)
	b, tokB := s.session(body)

	get := func(path, tok string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 4 {
		if r := get("/v1/sessions/"+a, tokA); r.StatusCode != 200 {
			t.Fatalf("request %d of run a = %d, want 200", i+1, r.StatusCode)
		}
	}
	r := get("/v1/sessions/"+a+"/events", tokA)
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if r.StatusCode != 429 || err != nil || secs < 1 || secs > 60 {
		t.Errorf("5th request = %d Retry-After %q, want 429 with 1..60 s", r.StatusCode, r.Header.Get("Retry-After"))
	}
	before := len(s.ledger(a))
	p := s.do("POST", "/v1/sessions/"+a+"/permission", tokA, map[string]any{"tool_call_id": "t1", "tool_name": "Bash", "input": map[string]any{"command": "ls"}})
	if p.status != 429 || errCode(p) != "rate_limited" || !strings.Contains(string(p.raw), "nothing was done") {
		t.Errorf("permission past the limit = %d %s, want 429 rate_limited", p.status, p.raw)
	}
	if after := len(s.ledger(a)); after != before {
		t.Errorf("a refused permission call appended %d events", after-before)
	}
	if r := get("/v1/sessions/"+b, tokB); r.StatusCode != 200 {
		t.Errorf("run b = %d, want 200: limits are per run", r.StatusCode)
	}
	if r := get("/v1/sessions/"+a, adminToken); r.StatusCode != 200 {
		t.Errorf("the operator on run a = %d, want 200", r.StatusCode)
	}
	if rt := s.runner(a); rt != "" {
		u := s.do("POST", "/v1/sessions/"+a+"/end", rt, nil)
		if u.status == 429 {
			t.Errorf("the runner token = 429; only the session token is limited")
		}
	}
}

// TestRunOpenRequests is issue 25 item 8: one session token held 100
// concurrent 25-second long polls. With FLUIDBOX_RUN_MAX_OPEN_REQUESTS at
// 3, three long polls of a run are held open and the requests beside them
// are answered 429 at once; another run is not affected, and once the
// polls end the run gets its slots back.
func TestRunOpenRequests(t *testing.T) {
	t.Parallel()
	st, db := roleStore(t)
	testenv.Calm(t, db)
	led := ledger.New(st, time.Now)
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, RunMaxOpenRequests: 3})))
	t.Cleanup(srv.Close)
	s := &stack{t: t, url: srv.URL, st: st, db: db, led: led}
	body := map[string]any{"policy_id": s.policy(basicPolicy), "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
	a, tokA := s.session(body)
	b, tokB := s.session(body)
	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	// Three polls wait for events that never come (seq 10^6).
	var wg sync.WaitGroup
	polls := make([]int, 3)
	for i := range polls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			polls[i], _ = get("/v1/sessions/"+a+"/events?after=1000000&wait_seconds=2", tokA)
		}()
	}
	// Once all three hold their slots, every other request of the run is
	// refused.
	for deadline := time.Now().Add(10 * time.Second); ; {
		held, err := st.Leases(t.Context(), store.OpenKey(a))
		if err != nil {
			t.Fatal(err)
		}
		if len(held) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the three long polls hold %d slots", len(held))
		}
	}
	if code, raw := get("/v1/sessions/"+a, tokA); code != 429 || !strings.Contains(raw, "rate_limited") || !strings.Contains(raw, "FLUIDBOX_RUN_MAX_OPEN_REQUESTS") {
		t.Errorf("a request beside three open long polls = %d %s, want 429 rate_limited", code, raw)
	}
	// A decision answered at once holds no slot (the route takes it only
	// to wait): it is answered beside the polls. One that would wait for
	// an approval is refused before it waits; its pending answer is
	// recorded, and a retry once a slot is free waits for it.
	if r := s.ask(a, tokA, "now", "Bash", bash("git status")); r.status != 200 || r.body["decision"] != "allow" {
		t.Errorf("a decision beside three open long polls = %d %s, want 200 allow", r.status, r.raw)
	}
	wait := map[string]any{"tool_call_id": "later", "tool_name": "Bash", "input": bash("rm -rf build")}
	if r := s.do("POST", "/v1/sessions/"+a+"/permission?wait_seconds=5", tokA, wait); r.status != 429 || !strings.Contains(string(r.raw), "FLUIDBOX_RUN_MAX_OPEN_REQUESTS") {
		t.Errorf("a decision waiting beside three open long polls = %d %s, want 429 rate_limited", r.status, r.raw)
	}
	if code, _ := get("/v1/sessions/"+b, tokB); code != 200 {
		t.Errorf("run b beside run a's polls = %d, want 200", code)
	}
	if code, _ := get("/v1/sessions/"+a, adminToken); code != 200 {
		t.Errorf("the operator on run a = %d, want 200", code)
	}
	wg.Wait()
	for i, code := range polls {
		if code != 200 {
			t.Errorf("long poll %d = %d, want 200", i, code)
		}
	}
	for i := range 3 {
		if code, raw := get("/v1/sessions/"+a, tokA); code != 200 {
			t.Errorf("request %d after the polls ended = %d %s, want 200", i, code, raw)
		}
	}
	if r := s.do("POST", "/v1/sessions/"+a+"/permission?wait_seconds=1", tokA, wait); r.status != 200 || r.body["decision"] != "pending" {
		t.Errorf("the waiting decision retried once slots are free = %d %s, want 200 pending after its wait", r.status, r.raw)
	}
	if held, err := st.Leases(t.Context(), store.OpenKey(a)); err != nil || len(held) != 0 {
		t.Errorf("leases after every request ended = %v, %v; want none", held, err)
	}
}
