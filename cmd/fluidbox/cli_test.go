package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

// The tests here run the commands in-process (run, as main calls it)
// against the real stack: the API handler `fluidbox dev` serves, over
// minidyn, on a loopback httptest server. cmd/ cannot import
// shared/internal/testenv, so the few lines that start it are repeated
// here with the exported packages dev.go itself uses.

const adminToken = "cli-test-admin-token-0123456789"

// testPolicy: git status allowed, git push denied, rm asks a human, Read
// allowed, anything else denied.
const testPolicy = `{"name":"cli","default_verdict":"deny","approval":{"scope":"once","ttl_seconds":900},"rules":[
 {"id":"git-read","tool":"Bash","match":{"command_prefix":["git status"]},"verdict":"allow"},
 {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"},
 {"id":"ask-rm","tool":"Bash","match":{"command_prefix":["rm"]},"verdict":"require_approval"},
 {"id":"reads","tool":"Read","verdict":"allow"}]}`

var tables atomic.Int64

type stack struct {
	url   string
	admin *client.Client
	led   *ledger.Ledger
}

// newStack starts minidyn, a fresh table and the API on 127.0.0.1; wrap,
// if set, sits in front of the handler.
func newStack(t testing.TB, wrap func(http.Handler) http.Handler) *stack {
	t.Helper()
	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start minidyn: %v", err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		for _, r := range db.Layer.Refused() {
			t.Errorf("DynamoDB on AWS refuses this request: %s", r)
		}
	})
	st := store.New(devstack.DynamoClient(db.URL), fmt.Sprintf("cli%d", tables.Add(1)))
	if err := st.CreateTable(context.Background()); err != nil {
		t.Fatalf("create table: %v", err)
	}
	led := ledger.New(st, time.Now)
	var h http.Handler = api.New(api.Config{AdminToken: adminToken, Ledger: led})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	admin, err := client.New(srv.URL, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	return &stack{url: srv.URL, admin: admin, led: led}
}

// newRun creates the test policy and a run with Claude Code's tools and
// returns the run's id and session token.
func (s *stack) newRun(t testing.TB) (string, string) {
	t.Helper()
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	var ses struct{ ID, Token string }
	body := map[string]any{"policy_id": pol.ID, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 5}}
	if err := s.admin.Do(ctx, "POST", "/v1/sessions", body, &ses); err != nil {
		t.Fatalf("create session: %v", err)
	}
	return ses.ID, ses.Token
}

// ask has the runner ask the gate once, without waiting.
func (s *stack) ask(t testing.TB, ses, token, callID, command string) client.Answer {
	t.Helper()
	c, err := client.New(s.url, token)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]string{"command": command})
	ans, err := c.Permission(context.Background(), ses, client.PermissionRequest{ToolCallID: callID, ToolName: "Bash", Input: in}, 0)
	if err != nil {
		t.Fatalf("ask %s: %v", callID, err)
	}
	return ans
}

// env is a getenv over a map.
func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func (s *stack) env(extra ...string) map[string]string {
	m := map[string]string{"FLUIDBOX_URL": s.url, "FLUIDBOX_ADMIN_TOKEN": adminToken}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

type result struct {
	code           int
	stdout, stderr string
}

// fluidbox runs one command line in-process, as main would.
func fluidbox(ctx context.Context, vars map[string]string, stdin string, args ...string) result {
	var out, errb bytes.Buffer
	code := run(ctx, args, env(vars), strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// pendingFor waits until the run has a pending approval and returns it.
func (s *stack) pendingFor(t testing.TB, ses string) client.Approval {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		list, err := s.admin.Approvals(context.Background())
		if err != nil {
			t.Fatalf("list approvals: %v", err)
		}
		for _, a := range list {
			if a.SessionID == ses {
				return a
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no pending approval for run %s", ses)
	return client.Approval{}
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitFor polls until f holds or fails the test after d.
func waitFor(t testing.TB, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var oneLine = regexp.MustCompile(`^fluidbox [a-z]+: [^\n]+\n$`)

// The failures a human meets first: no server, a wrong token, no token.
// Each is one line on stderr and exit 1, and never echoes a token.
func TestCLIErrorsAreOneClearLine(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	const wrong = "wrong-token-0123456789abcdef"
	tests := []struct {
		name string
		vars map[string]string
		args []string
		want []string
	}{
		{"unreachable", map[string]string{"FLUIDBOX_URL": deadURL, "FLUIDBOX_ADMIN_TOKEN": wrong}, []string{"approvals"}, []string{"cannot reach fluidbox at " + deadURL, "make run"}},
		{"wrong token", s.env("FLUIDBOX_ADMIN_TOKEN", wrong), []string{"approvals"}, []string{"refused the token", "401", "FLUIDBOX_ADMIN_TOKEN"}},
		{"wrong token flag", s.env(), []string{"events", "ses_x", "--token", wrong}, []string{"refused the token"}},
		{"no token", map[string]string{"FLUIDBOX_URL": s.url}, []string{"approve", "apr_x"}, []string{"no token", "FLUIDBOX_ADMIN_TOKEN"}},
		{"unknown approval", s.env(), []string{"deny", "apr_nope"}, []string{"404 not_found"}},
		{"unknown run", s.env(), []string{"events", "ses_nope"}, []string{"404 not_found"}},
		{"follow wrong token", s.env("FLUIDBOX_ADMIN_TOKEN", wrong), []string{"events", "--follow", "ses_x"}, []string{"refused the token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := fluidbox(context.Background(), tt.vars, "", tt.args...)
			if r.code != 1 || r.stdout != "" || !oneLine.MatchString(r.stderr) {
				t.Fatalf("fluidbox %v = exit %d, stdout %q, stderr %q; want exit 1 and one line on stderr", tt.args, r.code, r.stdout, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("fluidbox %v: stderr %q lacks %q", tt.args, r.stderr, w)
				}
			}
			if strings.Contains(r.stderr, wrong) || strings.Contains(r.stderr, adminToken) {
				t.Errorf("fluidbox %v: stderr %q shows a token", tt.args, r.stderr)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	r := fluidbox(context.Background(), nil, "", "help")
	for _, cmd := range []string{"dev", "approvals", "approve ID [--session]", "deny ID", "events RUN [--follow]", "hook claude-code", "--json"} {
		if !strings.Contains(r.stdout, cmd) {
			t.Errorf("usage lacks %q:\n%s", cmd, r.stdout)
		}
	}
	if r := fluidbox(context.Background(), nil, "", "approve", "-h"); r.code != 0 || !strings.Contains(r.stdout, "--session") {
		t.Errorf("approve -h = %d %q, want 0 and the flags", r.code, r.stdout)
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"git status", 60, "git status"},
		{"rm -rf /\n\necho \x1b[2Jpwned", 60, "rm -rf / echo [2Jpwned"},
		{"a\u202eb\u200bc", 60, "abc"},
		{"abcdefghij", 4, "abcd…"},
		{"  lead  ", 10, "lead"},
	}
	for _, tt := range tests {
		if got := clean(tt.in, tt.max); got != tt.want {
			t.Errorf("clean(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

// TestAdminTokenNeverPrinted: with FLUIDBOX_ADMIN_TOKEN set, no command's
// help, usage error or failure prints it (a flag default would).
func TestAdminTokenNeverPrinted(t *testing.T) {
	t.Parallel()
	const secret = "the-operators-admin-token-must-not-print"
	vars := map[string]string{"FLUIDBOX_URL": "http://127.0.0.1:1", "FLUIDBOX_ADMIN_TOKEN": secret}
	for _, args := range [][]string{
		{"--help"}, {"help"},
		{"approvals", "--help"}, {"approvals", "-h"}, {"approvals", "--bogus"},
		{"approvals", "show", "--help"}, {"approve", "--help"}, {"approve", "--bogus", "apr_x"},
		{"deny", "--help"}, {"events", "--help"}, {"events", "--bogus"},
		{"approvals"}, {"events", "ses_x"},
	} {
		r := fluidbox(context.Background(), vars, "", args...)
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("fluidbox %s printed the admin token:\n%s%s", strings.Join(args, " "), r.stdout, r.stderr)
		}
	}
}
