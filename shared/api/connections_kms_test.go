package api_test

import (
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/testenv"
)

// TestBrokeredCallWithKMS is the end-to-end path with KMS (local-kms)
// sealing: create, refresh, run, call, result. Then local-kms stops: the
// call is refused 503 unavailable, nothing is recorded and the upstream
// sees no request.
func TestBrokeredCallWithKMS(t *testing.T) {
	t.Parallel()
	sealer, _, stopKMS := testenv.KMS(t)
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

	stopKMS()
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
