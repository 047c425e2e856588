package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// consentUpstream is an MCP server (official Go SDK, stateless, so it
// speaks 2026-07-28) that accepts token and whose deploy tool needs a
// person to open a consent link, its state in the query, before it
// deploys.
func consentUpstream(t *testing.T, token string) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "deployer", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	mcp.AddTool(server, &mcp.Tool{Name: "deploy", Description: "Deploys, after consent."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if r, ok := req.Params.InputResponses["consent"].(*mcp.ElicitResult); ok {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "consent " + r.Action}}}, nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
				"consent": &mcp.ElicitParams{Mode: "url", Message: "<b>Approve</b>", URL: "https://deploy.example.com/consent?state=opaque-7", ElicitationID: "el-1"},
			}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestInputRequestRoutes drives the waiting half of elicitation through
// the HTTP API, each function under its IAM role: tools/call answers
// pending with an input request; GET /v1/input-requests lists it for the
// operator with the connection's name and the link (with its query for
// the person, without it for the ledger); a decision that is neither done
// nor decline is 400; done settles it once (applied, then not); the retry
// of the call runs the tool with the consent accepted. A member-less
// stack's other callers are covered by shared/elicitation's tests.
func TestInputRequestRoutes(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	con := s.connection("deployer", consentUpstream(t, canary), "shared", canary)
	s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
	pol := s.policy(`{"name":"deploys","default_verdict":"allow","rules":[]}`)
	run, tok := s.brokeredRun(pol, con, "")

	r := s.toolsCall(run, tok, "d1", "mcp__deployer__deploy", map[string]any{})
	id, _ := r.body["input_request_id"].(string)
	if r.status != 200 || r.body["decision"] != "pending" || r.body["source"] != "input_required" || !strings.HasPrefix(id, "inp_") {
		t.Fatalf("tools/call = %d %s, want pending on an input request", r.status, r.raw)
	}
	list := s.want(200, "GET", "/v1/input-requests", adminToken, nil)["input_requests"].([]any)
	if len(list) != 1 {
		t.Fatalf("GET /v1/input-requests = %v, want the one request", list)
	}
	got := list[0].(map[string]any)
	if got["id"] != id || got["server"] != "deployer" || got["link"] != "https://deploy.example.com/consent" ||
		got["url"] != "https://deploy.example.com/consent?state=opaque-7" || got["session_id"] != run || got["status"] != "pending" {
		t.Errorf("listed input request = %v", got)
	}
	s.want(200, "GET", "/v1/input-requests/"+id, adminToken, nil)
	s.want(404, "GET", "/v1/input-requests/inp_nothere", adminToken, nil)
	s.want(404, "GET", "/v1/input-requests/apr_x", adminToken, nil)
	s.want(400, "GET", "/v1/input-requests?cursor=bm90LWEtY3Vyc29y", adminToken, nil)
	s.want(400, "POST", "/v1/input-requests/"+id+"/decision", adminToken, map[string]any{"decision": "approved_once"})
	// The run's own token decides nothing.
	if r := s.call("POST", "/v1/input-requests/"+id+"/decision", tok, map[string]any{"decision": "done"}); r.status != 403 {
		t.Errorf("decision with the session token = %d %s, want 403", r.status, r.raw)
	}
	if out := s.want(200, "POST", "/v1/input-requests/"+id+"/decision", adminToken, map[string]any{"decision": "done"}); out["applied"] != true || out["status"] != "completed" {
		t.Errorf("done = %v, want applied, completed", out)
	}
	if out := s.want(200, "POST", "/v1/input-requests/"+id+"/decision", adminToken, map[string]any{"decision": "decline"}); out["applied"] != false || out["status"] != "completed" {
		t.Errorf("decline after done = %v, want not applied, completed", out)
	}
	if n := len(s.want(200, "GET", "/v1/input-requests", adminToken, nil)["input_requests"].([]any)); n != 0 {
		t.Errorf("%d input requests listed after done, want 0", n)
	}
	r = s.toolsCall(run, tok, "d1", "mcp__deployer__deploy", map[string]any{})
	if r.status != 200 || r.body["decision"] != "allow" || resultText(t, r) != "consent accept" {
		t.Fatalf("tools/call after done = %d %s, want allow with the consent accepted", r.status, r.raw)
	}
	for _, it := range s.items() {
		for k, v := range it {
			if strings.Contains(v, "opaque-7") && !strings.Contains(it["sk"], `"INP#`) {
				t.Errorf("item %s/%s keeps the link's query in %s", it["pk"], it["sk"], k)
			}
		}
	}
	s.assertNoCanary()
}
