package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/seal"
)

// canary is the upstream's expected bearer token; wrongCanary a token it refuses. Neither
// may ever appear in an error.
const (
	canary      = "CANARY-broker-token-5e1d"
	wrongCanary = "WRONG-CANARY-token-9b2c"
)

var goodCred = seal.Credential{Type: seal.TypeBearer, Token: canary}

// loopback lets the broker reach the test upstreams, which listen on
// 127.0.0.1, as `fluidbox dev` does.
var loopback = egress.New(egress.Loopback)

// upstream is a real MCP server (official Go SDK, Streamable HTTP) on 127.0.0.1 behind a
// middleware requiring Authorization: Bearer <canary>.
type upstream struct {
	srv       *httptest.Server
	listCalls atomic.Int64 // tools/list requests seen
	posts     atomic.Int64 // POST requests seen
}

type upstreamOpts struct {
	pageSize int
	tools    func(s *mcp.Server)
	// echoAuthOn401: refuse with a JSON-RPC error body that echoes the Authorization header.
	echoAuthOn401 bool
	// tsUnknownTool: answer calls to unknown tools the way TypeScript SDK servers do, with
	// an isError result instead of a protocol error.
	tsUnknownTool bool
	// echoAuthInProtocolError: fail tools/call for "boom" with a protocol error whose
	// message echoes the Authorization header.
	echoAuthInProtocolError bool
	// versions, when set, are the only protocol revisions the server offers
	// (ServerOptions.SupportedProtocolVersions).
	versions []string
	// stateless serves without sessions, as the SDK's handler must for a
	// server to offer 2026-07-28.
	stateless bool
	// cache, when set, is the ttlMs and cacheScope of every cacheable
	// result (2026-07-28).
	cache *mcp.Cacheable
	// check, when set, sees every POST's headers and body before the SDK
	// does; an error refuses the request with HTTP 400.
	check func(h http.Header, body []byte) error
}

func newUpstream(t testing.TB, o upstreamOpts) *upstream {
	t.Helper()
	sopts := &mcp.ServerOptions{PageSize: o.pageSize, SupportedProtocolVersions: o.versions}
	if o.cache != nil {
		sopts.SetCacheable = func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { *c = *o.cache }
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, sopts)
	// release unblocks the slow tool: the SDK server does not cancel a tool handler when
	// the client gives up, and httptest.Server.Close waits for running handlers.
	release := make(chan struct{})
	if o.tools != nil {
		o.tools(server)
	} else {
		addStandardTools(server, release)
	}
	if o.tsUnknownTool {
		server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method != "tools/call" {
					return next(ctx, method, req)
				}
				res, err := next(ctx, method, req)
				var wire *jsonrpc.Error
				if errors.As(err, &wire) && strings.Contains(wire.Message, "unknown tool") {
					name := req.(*mcp.CallToolRequest).Params.Name
					return &mcp.CallToolResult{
						IsError: true,
						Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("MCP error -32602: Tool %s not found", name)}},
					}, nil
				}
				return res, err
			}
		})
	}
	if o.echoAuthInProtocolError {
		server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/call" && req.(*mcp.CallToolRequest).Params.Name == "boom" {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "backend rejected " + req.GetExtra().Header.Get("Authorization")}
				}
				return next(ctx, method, req)
			}
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: o.stateless})
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			u.posts.Add(1)
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "read", http.StatusBadRequest)
				return
			}
			if strings.Contains(string(body), `"tools/list"`) {
				u.listCalls.Add(1)
			}
			if o.check != nil {
				if err := o.check(r.Header, body); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+canary {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			msg := "unauthorized"
			if o.echoAuthOn401 {
				msg = "unauthorized: you sent " + got
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"jsonrpc": "2.0", "id": 1,
				"error": map[string]any{"code": -32001, "message": msg, "data": map[string]string{"authorization": got}},
			})
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return u
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type echoOut struct {
	Echo string `json:"echo"`
}

func boolPtr(b bool) *bool { return &b }

// addStandardTools registers, deliberately out of name order: echo, fail, whoami, slow.
func addStandardTools(s *mcp.Server, release <-chan struct{}) {
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Echoes the caller's Authorization header (a misbehaving upstream)."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are " + req.Extra.Header.Get("Authorization")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo",
		Description: "Echoes text.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, echoOut{Echo: in.Text}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails as a tool execution error."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the backend said no")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Blocks until the request is cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-release:
				return nil, nil, errors.New("released")
			}
		})
}

// rawTool adds a tool with a literal input schema.
func rawTool(s *mcp.Server, name, desc, schema string) {
	s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(schema)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil
		})
}

// assertNoSecret fails if err's text (or any wrapped error's) contains a token.
func assertNoSecret(t *testing.T, err error) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		for _, s := range []string{canary, wrongCanary, "CANARY"} {
			if strings.Contains(e.Error(), s) || strings.Contains(fmt.Sprintf("%+v", e), s) {
				t.Errorf("error leaks a token: %v", e)
				return
			}
		}
	}
}
