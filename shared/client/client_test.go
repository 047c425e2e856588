package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

const adminToken = "client-test-admin-token-0123456789"

const policy = `{"name":"client","default_verdict":"deny","rules":[
 {"id":"git-read","tool":"Bash","match":{"command_prefix":["git status"]},"verdict":"allow"},
 {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"},
 {"id":"ask-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval"}]}`

// stack is the real API handler over minidyn behind an httptest server,
// with an optional middleware in front.
type stack struct {
	url   string
	admin *client.Client
}

func newStack(t *testing.T, wrap func(http.Handler) http.Handler) *stack {
	t.Helper()
	st := testenv.Store(t)
	var h http.Handler = api.New(api.Config{AdminToken: adminToken, Ledger: ledger.New(st, time.Now)})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	admin, err := client.New(srv.URL, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	return &stack{url: srv.URL, admin: admin}
}

// run creates a policy and a run, returning the run's id and a client
// holding its session token.
func (s *stack) run(t *testing.T) (string, *client.Client) {
	t.Helper()
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(policy), &pol); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	var ses struct{ ID, Token string }
	body := map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 5}}
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", body, &ses); err != nil {
		t.Fatalf("create session: %v", err)
	}
	runner, err := client.New(s.url, ses.Token)
	if err != nil {
		t.Fatal(err)
	}
	return ses.ID, runner
}

func bash(id, command string) client.PermissionRequest {
	in, _ := json.Marshal(map[string]string{"command": command})
	return client.PermissionRequest{ToolCallID: id, ToolName: "Bash", Input: in}
}

func TestPermissionAnswers(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ses, runner := s.run(t)
	ctx := context.Background()
	tests := []struct {
		req          client.PermissionRequest
		wantDecision vocab.Decision
		wantSource   string
		wantRule     string
	}{
		{bash("t1", "git status"), vocab.Allow, "", "git-read"},
		{bash("t2", "git push origin main"), vocab.Deny, "policy", "no-push"},
		{bash("t3", "rm build.log"), vocab.Pending, "", "ask-rm"},
	}
	for _, tt := range tests {
		got, err := runner.Permission(ctx, ses, tt.req, 0)
		if err != nil {
			t.Fatalf("Permission(%s) error: %v", tt.req.ToolCallID, err)
		}
		if got.Decision != tt.wantDecision || got.RuleID != tt.wantRule || (tt.wantSource != "" && got.Source != tt.wantSource) {
			t.Errorf("Permission(%s) = %+v, want decision %s source %q rule %s", tt.req.ToolCallID, got, tt.wantDecision, tt.wantSource, tt.wantRule)
		}
	}
}

// capWait makes every permission long poll wait at most one second, so a
// test sees the client ask again several times; it counts the asks.
func capWait(asks *atomic.Int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/permission") {
				asks.Add(1)
				q := r.URL.Query()
				if q.Get("wait_seconds") != "" {
					q.Set("wait_seconds", "1")
					r.URL.RawQuery = q.Encode()
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

func TestPermissionWaitsThroughPendingUntilApproved(t *testing.T) {
	t.Parallel()
	var asks atomic.Int64
	s := newStack(t, capWait(&asks))
	ses, runner := s.run(t)
	ctx := context.Background()

	type result struct {
		ans client.Answer
		err error
	}
	done := make(chan result, 1)
	go func() {
		ans, err := runner.Permission(ctx, ses, bash("wait-1", "rm -rf build"), 30*time.Second)
		done <- result{ans, err}
	}()
	apr := waitApproval(t, s.admin, ses)
	// Let the runner ask again, at least twice, before deciding: waited
	// for, not slept for, so a slow machine or chaos only makes it later.
	for deadline := time.Now().Add(30 * time.Second); asks.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	settled, err := s.admin.Decide(ctx, apr.ID, vocab.ChoiceApprovedOnce, "")
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	if settled.Applied == nil || !*settled.Applied || settled.Status != vocab.ApprovedOnce {
		t.Errorf("Decide = %+v, want applied approved_once", settled)
	}
	r := <-done
	if r.err != nil || r.ans.Decision != vocab.Allow {
		t.Fatalf("Permission after approval = %+v, %v; want allow", r.ans, r.err)
	}
	if n := asks.Load(); n < 3 {
		t.Errorf("the runner asked %d times, want at least 3 (first ask and long polls)", n)
	}
	again, err := s.admin.Decide(ctx, apr.ID, vocab.ChoiceDenied, "")
	if err != nil || again.Applied == nil || *again.Applied || again.Status != vocab.ApprovedOnce {
		t.Errorf("second Decide = %+v, %v; want not applied, still approved_once", again, err)
	}
}

func TestPermissionReturnsPendingWhenWaitEnds(t *testing.T) {
	t.Parallel()
	var asks atomic.Int64
	s := newStack(t, capWait(&asks))
	ses, runner := s.run(t)
	start := time.Now()
	ans, err := runner.Permission(context.Background(), ses, bash("w2", "rm x"), 2500*time.Millisecond)
	if err != nil || ans.Decision != vocab.Pending || ans.ApprovalID == "" {
		t.Fatalf("Permission = %+v, %v; want pending with an approval id", ans, err)
	}
	if el := time.Since(start); el < 1500*time.Millisecond || el > 10*time.Second {
		t.Errorf("Permission returned after %v, want about 2.5s", el)
	}
}

func waitApproval(t *testing.T, admin *client.Client, ses string) client.Approval {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := admin.Approvals(context.Background())
		if err != nil {
			t.Fatalf("Approvals: %v", err)
		}
		for _, a := range list {
			if a.SessionID == ses {
				return a
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no pending approval for %s", ses)
	return client.Approval{}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	const secret = "fbx_sess_this-must-never-be-printed"
	t.Run("unreachable", func(t *testing.T) { checkUnreachable(t, secret) })
	t.Run("wrong token", func(t *testing.T) { checkWrongToken(t, s, secret) })
	t.Run("session token", func(t *testing.T) { checkSessionTokenRefused(t, s, secret) })
	t.Run("not found", func(t *testing.T) { checkNotFound(t, s) })
	t.Run("bad gateway", func(t *testing.T) { checkBadGateway(t, secret) })
	t.Run("bad URL", func(t *testing.T) { checkBadURL(t, secret) })
}

// checkUnreachable: a closed port is ErrUnreachable, naming the URL and
// suggesting make run.
func checkUnreachable(t *testing.T, secret string) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	down, _ := client.New(deadURL, secret)
	_, err := down.Approvals(context.Background())
	if !errors.Is(err, client.ErrUnreachable) {
		t.Errorf("Approvals on a closed port = %v, want ErrUnreachable", err)
	}
	if err != nil && (!strings.Contains(err.Error(), deadURL) || !strings.Contains(err.Error(), "make run")) {
		t.Errorf("unreachable error %q should name %s and suggest make run", err, deadURL)
	}
}

// checkWrongToken: a token fluidbox never issued is a 401 that is
// ErrBadToken and says so; the client never prints its token.
func checkWrongToken(t *testing.T, s *stack, secret string) {
	wrong, _ := client.New(s.url, "not-any-token-fluidbox-issues")
	_, err := wrong.Approvals(context.Background())
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Code != "unauthenticated" || !errors.Is(err, client.ErrBadToken) {
		t.Errorf("Approvals with a wrong token = %v, want a 401 unauthenticated APIError that is ErrBadToken", err)
	}
	if err != nil && !strings.Contains(err.Error(), "refused the token") {
		t.Errorf("wrong-token error %q should say the token was refused", err)
	}
	if strings.Contains(wrong.String(), secret) {
		t.Errorf("Client.String() = %q contains the token", wrong.String())
	}
}

// checkSessionTokenRefused: a session token on a route it is never good
// for: 403 with a hint, and the error does not hold the token.
func checkSessionTokenRefused(t *testing.T, s *stack, secret string) {
	sess, _ := client.New(s.url, secret)
	_, err := sess.Approvals(context.Background())
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 403 || !strings.Contains(ae.Message, "session token is good only") || errors.Is(err, client.ErrBadToken) {
		t.Errorf("Approvals with a session token = %v, want 403 with a hint", err)
	}
	if err != nil && strings.Contains(err.Error(), secret) {
		t.Errorf("error %q contains the token", err)
	}
}

func checkNotFound(t *testing.T, s *stack) {
	_, err := s.admin.Approval(context.Background(), "apr_nope")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "not_found" {
		t.Errorf("Approval(unknown) = %v, want 404 not_found", err)
	}
}

// checkBadGateway: an HTML 502 from a proxy is an APIError that asks about
// FLUIDBOX_URL, without the token.
func checkBadGateway(t *testing.T, secret string) {
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer gw.Close()
	proxied, _ := client.New(gw.URL, secret)
	_, err := proxied.Session(context.Background(), "ses_x")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 502 || !strings.Contains(ae.Message, "FLUIDBOX_URL") {
		t.Errorf("Session through a bad gateway = %v, want a 502 APIError that asks about FLUIDBOX_URL", err)
	}
	if err != nil && strings.Contains(err.Error(), secret) {
		t.Errorf("error %q contains the token", err)
	}
}

// checkBadURL: New refuses a scheme other than http(s), and a URL with
// credentials without repeating them.
func checkBadURL(t *testing.T, secret string) {
	if _, err := client.New("ftp://x", ""); err == nil {
		t.Error(`New("ftp://x") succeeded, want an error`)
	}
	if _, err := client.New("http://user:"+secret+"@127.0.0.1:1", ""); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("New(URL with credentials) = %v, want an error without the secret", err)
	}
}

func TestEventsLongPoll(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ses, runner := s.run(t)
	ctx := context.Background()
	page, err := s.admin.Events(ctx, ses, 0, 0, 0)
	if err != nil || len(page.Events) == 0 || page.Events[0].Type != "session.created" {
		t.Fatalf("Events(0) = %+v, %v; want session.created first", page, err)
	}
	last := page.LastSeq
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = runner.Permission(ctx, ses, bash("lp", "git status"), 0)
	}()
	start := time.Now()
	next, err := runner.Events(ctx, ses, last, 10, 5*time.Second)
	if err != nil || len(next.Events) == 0 || next.Events[0].Seq != last+1 {
		t.Fatalf("Events(after %d, wait) = %+v, %v; want seq %d", last, next, err, last+1)
	}
	if time.Since(start) > 4*time.Second {
		t.Errorf("the long poll took %v, want it to return when the event landed", time.Since(start))
	}
	sess, err := runner.Session(ctx, ses)
	if err != nil || sess.ID != ses || sess.LastSeq < next.Events[0].Seq {
		t.Errorf("Session = %+v, %v", sess, err)
	}
}

// dropAfter cuts every event stream after it has written n events, as a
// flaky network or a gateway's time limit would, and records the
// Last-Event-ID each stream asked with.
type dropAfter struct {
	n       int
	mu      sync.Mutex
	resumes []string
}

func (d *dropAfter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			next.ServeHTTP(w, r)
			return
		}
		d.mu.Lock()
		d.resumes = append(d.resumes, r.Header.Get("Last-Event-ID"))
		d.mu.Unlock()
		next.ServeHTTP(&cutWriter{ResponseWriter: w, left: d.n}, r)
	})
}

type cutWriter struct {
	http.ResponseWriter
	left int
}

func (c *cutWriter) Write(b []byte) (int, error) {
	if strings.HasPrefix(string(b), "id: ") {
		if c.left == 0 {
			c.Flush()                   // what was written so far reaches the client
			panic(http.ErrAbortHandler) // then the connection drops mid-stream
		}
		c.left--
	}
	return c.ResponseWriter.Write(b)
}

func (c *cutWriter) Flush() { http.NewResponseController(c.ResponseWriter).Flush() }

func TestFollowResumesExactlyOnce(t *testing.T) {
	t.Parallel()
	drop := &dropAfter{n: 2}
	s := newStack(t, drop.wrap)
	ses, runner := s.run(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 4 {
		if _, err := runner.Permission(ctx, ses, bash("f"+strconv.Itoa(i), "git status"), 0); err != nil {
			t.Fatal(err)
		}
	}
	// 1 session.created + 4 × (tool.requested, tool.decision) = 9 events.
	const want = 9
	var got []int64
	var reconnects atomic.Int64
	err := s.admin.Follow(ctx, ses, 0, func(e client.Event) error {
		got = append(got, e.Seq)
		if len(got) == want {
			return errDone
		}
		return nil
	}, client.FollowOptions{OnReconnect: func(int64, error) { reconnects.Add(1) }})
	if !errors.Is(err, errDone) {
		t.Fatalf("Follow = %v, want the callback's error", err)
	}
	for i, seq := range got {
		if seq != int64(i+1) {
			t.Fatalf("Follow delivered seqs %v, want 1..%d each once in order", got, want)
		}
	}
	if reconnects.Load() < 4 {
		t.Errorf("Follow reconnected %d times, want at least 4 (the stream drops every 2 events)", reconnects.Load())
	}
	drop.mu.Lock()
	defer drop.mu.Unlock()
	wantResumes := []string{"", "2", "4", "6", "8"}
	for i, w := range wantResumes {
		if i >= len(drop.resumes) || drop.resumes[i] != w {
			t.Fatalf("streams asked with Last-Event-ID %q, want %q first", drop.resumes, wantResumes)
		}
	}
}

var errDone = errors.New("done")

func TestFollowStopsOnAPIError(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	bad, _ := client.New(s.url, "wrong-token-wrong-token")
	err := bad.Follow(context.Background(), "ses_x", 0, func(client.Event) error { return nil }, client.FollowOptions{})
	if !errors.Is(err, client.ErrBadToken) {
		t.Errorf("Follow with a wrong token = %v, want ErrBadToken", err)
	}
}

// rateLimited answers the first n requests 429 with Retry-After (as the
// API's rate limit does, before any handler) and passes the rest to h.
func rateLimited(n int32, retryAfter string, seen *atomic.Int32) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/permission") {
				h.ServeHTTP(w, r)
				return
			}
			if seen.Add(1) <= n {
				w.Header().Set("Retry-After", retryAfter)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"error":{"code":"rate_limited","message":"this run made more than 600 requests this minute"}}`))
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// TestRateLimitRetriedThenReported: a 429 is sent again after its
// Retry-After; one that persists past the retries is ErrRateLimited; one
// whose Retry-After is past the caller's deadline is reported at once.
func TestRateLimitRetriedThenReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("retried", func(t *testing.T) {
		t.Parallel()
		var seen atomic.Int32
		s := newStack(t, rateLimited(1, "1", &seen))
		id, runner := s.run(t)
		ans, err := runner.Permission(ctx, id, bash("t1", "git status"), 0)
		if err != nil || ans.Decision != vocab.Allow || seen.Load() != 2 {
			t.Errorf("Permission after one 429 = %+v, %v after %d requests; want allow after 2", ans, err, seen.Load())
		}
	})
	t.Run("persists", func(t *testing.T) {
		t.Parallel()
		var seen atomic.Int32
		s := newStack(t, rateLimited(100, "1", &seen))
		id, runner := s.run(t)
		_, err := runner.Permission(ctx, id, bash("t1", "git status"), 0)
		var ae *client.APIError
		if !errors.Is(err, client.ErrRateLimited) || !errors.As(err, &ae) || ae.RetryAfter != time.Second || seen.Load() != 3 {
			t.Errorf("Permission while rate-limited = %v after %d requests; want ErrRateLimited after 3", err, seen.Load())
		}
	})
	t.Run("past the deadline", func(t *testing.T) {
		t.Parallel()
		var seen atomic.Int32
		s := newStack(t, rateLimited(100, "45", &seen))
		id, runner := s.run(t)
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := runner.Permission(short, id, bash("t1", "git status"), 0)
		if !errors.Is(err, client.ErrRateLimited) || seen.Load() != 1 {
			t.Errorf("Permission with Retry-After past the deadline = %v after %d requests; want ErrRateLimited after 1", err, seen.Load())
		}
	})
}

// TestTraceparent: a well-formed traceparent goes with every request; a
// malformed one (or text smuggled in its place) is never sent.
func TestTraceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct{ given, want string }{
		{tp, tp},
		{"", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX-Evil: 1", ""},
		{"SECRETCANARY", ""},
	} {
		got := make(chan string, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- r.Header.Get("Traceparent")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"decision":"allow"}`))
		}))
		c, err := client.New(srv.URL, "tok", client.WithTraceparent(tc.given))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Permission(context.Background(), "ses_x", bash("t1", "ls"), 0); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if h := <-got; h != tc.want {
			t.Errorf("WithTraceparent(%q): sent %q, want %q", tc.given, h, tc.want)
		}
	}
}
