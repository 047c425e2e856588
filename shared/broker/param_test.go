package broker_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluidbox/fluidbox/shared/broker"
)

// TestCallSetsParamHeaders: a 2026-07-28 tool whose input schema binds an
// argument to a header (x-mcp-header) is called with that header equal to
// the argument, even on a session that has not listed its tools (a call
// after the broker's cached look, or after an OAuth refresh): the SDK takes
// the binding from the session's list, and the server refuses a call
// without it. On the old code such a call failed (HTTP 400, JSON-RPC
// -32020).
func TestCallSetsParamHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	u := newUpstream(t, upstreamOpts{versions: []string{"2026-07-28"}, stateless: true,
		check: func(h http.Header, body []byte) error {
			if v := h.Get("Mcp-Param-Repo"); v != "" {
				mu.Lock()
				got = append(got, v)
				mu.Unlock()
			}
			return nil
		},
		tools: func(s *mcp.Server) {
			rawTool(s, "get", "Gets a repository.", `{"type":"object","properties":{"repo":{"type":"string","x-mcp-header":"Repo"}}}`)
		}})
	res, err := broker.CallTool(t.Context(), loopback, u.srv.URL, goodCred, "get", map[string]any{"repo": "octo/hello"})
	if err != nil || res.IsError {
		t.Fatalf("CallTool(get) = %s, %v; want the tool's answer", res.Content, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "octo/hello" {
		t.Errorf("Mcp-Param-Repo headers = %q, want one, equal to the argument", got)
	}
}
