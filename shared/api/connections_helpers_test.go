package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
)

// Canaries: the upstream's credentials. None may ever appear in a stored
// item, an event, a response, an error body or a log line.
const (
	canary  = "CANARY-upstream-token-7f3a91"
	canary2 = "CANARY-rotated-token-c04e2b"
)

// syncBuffer collects the server's log output.
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

// brokerStack is the API with a sealer and a captured log, on minidyn.
type brokerStack struct {
	*stack
	logs      *syncBuffer
	responses *syncBuffer
	// jar is the member's browser's cookies (the OAuth authorize
	// redirect's nonce).
	jar http.CookieJar
}

func newBrokerStack(t *testing.T, sealer seal.Sealer, ttl time.Duration) *brokerStack {
	t.Helper()
	return newBrokerStackUnder(t, sealer, ttl, "", false)
}

// newBrokerStackUnder is newBrokerStack with the API served under the
// path prefix (as API Gateway serves it under its stage, "/api"): its URL
// and public URL (FLUIDBOX_PUBLIC_URL) end in prefix. With https, the
// public URL is https:// (what a browser would reach through a TLS
// front), while the test server itself answers http.
func newBrokerStackUnder(t *testing.T, sealer seal.Sealer, ttl time.Duration, prefix string, https bool) *brokerStack {
	t.Helper()
	st, db := roleStore(t)
	led := ledger.New(st, time.Now, ledger.SequenceOnlyWhenRead) // as newStack
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var public string
	h := http.NewServeMux()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if prefix != "" || https {
		public = srv.URL + prefix
	}
	if https {
		public = "https://" + strings.TrimPrefix(public, "http://")
	}
	a := roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, Logger: log, Sealer: sealer, UpstreamToolsTTL: ttl, Egress: testenv.Loopback, PublicURL: public}))
	h.Handle("/", http.StripPrefix(prefix, a))
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &brokerStack{stack: &stack{t: t, url: srv.URL + prefix, st: st, db: db, led: led}, logs: logs, responses: &syncBuffer{}, jar: jar}
}

// call is do, keeping every response body for the canary check.
func (s *brokerStack) call(method, path, token string, body any) response {
	s.t.Helper()
	r := s.do(method, path, token, body)
	_, _ = s.responses.Write(r.raw)
	return r
}

func (s *brokerStack) want(status int, method, path, token string, body any) map[string]any {
	s.t.Helper()
	r := s.call(method, path, token, body)
	if r.status != status {
		s.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.raw, status)
	}
	return r.body
}

func (s *brokerStack) toolsCall(id, tok, call, tool string, input any) response {
	s.t.Helper()
	return s.call("POST", "/v1/sessions/"+id+"/tools/call", tok, map[string]any{"tool_call_id": call, "tool_name": tool, "input": input})
}

// assertNoCanary checks every place a credential could leak to.
func (s *brokerStack) assertNoCanary() {
	s.t.Helper()
	places := map[string]string{"log": s.logs.String(), "responses": s.responses.String()}
	var stored strings.Builder
	for _, it := range s.items() {
		b, _ := json.Marshal(it)
		stored.Write(b)
	}
	places["stored items (events included)"] = stored.String()
	for where, text := range places {
		for _, c := range []string{canary, canary2, "CANARY"} {
			if strings.Contains(text, c) {
				s.t.Errorf("a canary credential appears in the %s", where)
			}
		}
	}
}

func localSealer(t *testing.T) seal.Sealer {
	t.Helper()
	l, err := seal.NewLocal(filepath.Join(t.TempDir(), "keys", "dev-seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mcpUpstream is a real MCP server (official Go SDK, Streamable HTTP) on
// 127.0.0.1 that requires Authorization: Bearer <one of its tokens>. Its
// tools can be changed while it runs, as a rug-pulling upstream would.
type mcpUpstream struct {
	srv      *httptest.Server
	server   *mcp.Server
	mu       sync.Mutex
	tokens   map[string]bool
	requests atomic.Int64 // every HTTP request
	calls    atomic.Int64 // tools/call requests
	lists    atomic.Int64 // tools/list requests
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text"`
}

type issueIn struct {
	Title string `json:"title" jsonschema:"the issue's title"`
}

func newMCPUpstream(t *testing.T, tokens ...string) *mcpUpstream {
	t.Helper()
	u := &mcpUpstream{tokens: map[string]bool{}}
	for _, tok := range tokens {
		u.tokens[tok] = true
	}
	u.server = mcp.NewServer(&mcp.Implementation{Name: "jira-like", Version: "1"}, nil)
	u.addEcho("Echoes text.")
	mcp.AddTool(u.server, &mcp.Tool{Name: "create_issue", Description: "Creates an issue."},
		func(_ context.Context, _ *mcp.CallToolRequest, in issueIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created " + in.Title}}}, nil, nil
		})
	mcp.AddTool(u.server, &mcp.Tool{Name: "whoami", Description: "Echoes the Authorization header (a misbehaving upstream)."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are " + req.Extra.Header.Get("Authorization")}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, nil)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				u.calls.Add(1)
			}
			if bytes.Contains(body, []byte(`"tools/list"`)) {
				u.lists.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		u.mu.Lock()
		good := ok && u.tokens[tok]
		u.mu.Unlock()
		if !good {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *mcpUpstream) url() string { return u.srv.URL }

func (u *mcpUpstream) accept(tokens ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.tokens)
	for _, tok := range tokens {
		u.tokens[tok] = true
	}
}

func (u *mcpUpstream) addEcho(desc string) {
	mcp.AddTool(u.server, &mcp.Tool{Name: "echo", Description: desc},
		func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
}

// brokerPolicy allows echo, asks for create_issue, denies the rest.
const brokerPolicy = `{"name":"broker","default_verdict":"deny","rules":[
 {"id":"echo","tool":"mcp__jira__echo","verdict":"allow"},
 {"id":"whoami","tool":"mcp__jira__whoami","verdict":"allow"},
 {"id":"issues","tool":"mcp__jira__create_issue","verdict":"require_approval"}]}`

func (s *brokerStack) connection(name, url, kind, token string) string {
	s.t.Helper()
	out := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": name, "url": url, "kind": kind,
		"credential":   map[string]any{"type": "bearer", "token": token},
		"tool_classes": map[string]string{"echo": "read", "create_issue": "write"},
	})
	return out["id"].(string)
}

func (s *brokerStack) brokeredRun(pol, con, tier string) (string, string) {
	s.t.Helper()
	body := map[string]any{"policy_id": pol, "capabilities": []string{"claude-code"}, "connections": []string{con}, "budget": map[string]any{"limit_usd": 1}}
	if tier != "" {
		body["trust_tier"] = tier
	}
	out := s.want(201, "POST", "/v1/sessions", adminToken, body)
	return out["id"].(string), out["token"].(string)
}

func resultText(t *testing.T, r response) string {
	t.Helper()
	res, ok := r.body["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result in %s", r.raw)
	}
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("empty result content in %s", r.raw)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text
}
