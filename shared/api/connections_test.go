package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBrokeredToolsEndToEnd drives a connection through its life over HTTP
// against a real MCP server that requires the bearer token: create, refresh,
// run, call, result; a retried call; an approved call; a rug pull without
// refresh; refresh and a new run; a credential replaced mid-run; a
// revocation; a read_only run. The canary credential must appear nowhere.
func TestBrokeredToolsEndToEnd(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, canary)
	s := newBrokerStack(t, localSealer(t), 0)
	l := &connectionLife{t: t, s: s, up: up, pol: s.policy(brokerPolicy)}
	l.create()
	l.refresh()

	// Run A: brokered tools are frozen as mcp__jira__*.
	runA, tokA := s.brokeredRun(l.pol, l.con, "")
	view := s.want(200, "GET", "/v1/sessions/"+runA, tokA, nil)
	if tools := fmt.Sprint(view["tools"]); !strings.Contains(tools, "mcp__jira__echo") || !strings.Contains(tools, "mcp__jira__create_issue") {
		t.Errorf("run tools = %s", tools)
	}
	l.callOnce(runA, tokA)
	l.refusedOrWithheld(runA, tokA)
	l.approved(runA, tokA)
	runB, tokB := l.rugPull(runA, tokA)
	runC, tokC := l.credentialReplaced(runB, tokB)
	l.readOnly()
	l.revoked(runC, tokC)
	s.assertNoCanary()
}

// connectionLife is TestBrokeredToolsEndToEnd's connection and upstream.
type connectionLife struct {
	t       *testing.T
	s       *brokerStack
	up      *mcpUpstream
	pol     string
	con     string
	digest1 string
}

// create: sealed at once, never returned; a duplicate name, a bad name
// and a run on a connection never photographed are refused.
func (l *connectionLife) create() {
	t, s, up := l.t, l.s, l.up
	created := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "jira", "url": up.url(), "kind": "shared",
		"credential":   map[string]any{"type": "bearer", "token": canary},
		"tool_classes": map[string]string{"echo": "read", "create_issue": "write"},
	})
	l.con = created["id"].(string)
	if !strings.HasPrefix(l.con, "con_") || created["status"] != "active" || created["authorization_generation"] != float64(1) || created["owner"] != "admin" {
		t.Fatalf("create = %v", created)
	}
	if r := s.call("POST", "/v1/connections", adminToken, map[string]any{
		"name": "jira", "url": up.url(), "kind": "shared", "credential": map[string]any{"type": "bearer", "token": canary},
	}); r.status != 409 {
		t.Errorf("duplicate name = %d %s, want 409", r.status, r.raw)
	}
	if r := s.call("POST", "/v1/connections", adminToken, map[string]any{
		"name": "bad__name", "url": up.url(), "kind": "shared", "credential": map[string]any{"type": "bearer", "token": canary},
	}); r.status != 400 {
		t.Errorf("bad name = %d %s, want 400", r.status, r.raw)
	}
	if r := s.call("POST", "/v1/sessions", adminToken, map[string]any{"policy_id": l.pol, "capabilities": []string{"claude-code"}, "connections": []string{l.con}, "budget": map[string]any{"limit_usd": 1}}); r.status != 400 || !strings.Contains(string(r.raw), "refresh") {
		t.Errorf("run on an unphotographed connection = %d %s, want 400 naming refresh", r.status, r.raw)
	}
}

// refresh: photograph, classes, changes against nothing.
func (l *connectionLife) refresh() {
	t, s, con := l.t, l.s, l.con
	ref := s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
	l.digest1 = ref["digest"].(string)
	classes := map[string]string{}
	for _, tl := range ref["tools"].([]any) {
		m := tl.(map[string]any)
		classes[m["name"].(string)] = m["class"].(string)
		if m["callable"] != true {
			t.Errorf("tool %v not callable: %v", m["name"], m["reason"])
		}
	}
	if want := map[string]string{"create_issue": "write", "echo": "read", "whoami": "write"}; fmt.Sprint(classes) != fmt.Sprint(want) {
		t.Errorf("classes = %v, want %v (unclassified is write)", classes, want)
	}
	if got := changeList(ref); got != "added:create_issue,added:echo,added:whoami" {
		t.Errorf("first refresh changes = %s", got)
	}
	if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil); got["digest"] != l.digest1 {
		t.Errorf("GET connection digest = %v, want %s", got["digest"], l.digest1)
	}
	if list := s.want(200, "GET", "/v1/connections", adminToken, nil)["connections"].([]any); len(list) != 1 {
		t.Errorf("list = %v", list)
	}
}

// callOnce: call and result; a retry after execution does not run the
// tool twice.
func (l *connectionLife) callOnce(runA, tokA string) {
	t, s, up := l.t, l.s, l.up
	r := s.toolsCall(runA, tokA, "a1", "mcp__jira__echo", map[string]any{"text": "hello"})
	if r.status != 200 || r.body["decision"] != "allow" || resultText(t, r) != "hello" {
		t.Fatalf("call = %d %s", r.status, r.raw)
	}
	if _, ok := r.body["latency_ms"].(float64); !ok {
		t.Errorf("no latency_ms in %s", r.raw)
	}
	if got := s.eventTypes(runA, 1); !slices.Equal(got, []string{"tool.requested", "tool.decision", "tool.brokered"}) {
		t.Errorf("events = %v", got)
	}
	calls := up.calls.Load()
	if r := s.toolsCall(runA, tokA, "a1", "mcp__jira__echo", map[string]any{"text": "hello"}); r.status != 409 || r.body["result"] != nil {
		t.Errorf("retry = %d %s, want 409 without a result", r.status, r.raw)
	}
	if r := s.toolsCall(runA, tokA, "a1", "mcp__jira__echo", map[string]any{"text": "other"}); r.status != 409 {
		t.Errorf("reused id with another input = %d %s, want 409", r.status, r.raw)
	}
	if up.calls.Load() != calls {
		t.Errorf("upstream saw %d more tools/call after retries", up.calls.Load()-calls)
	}
}

// refusedOrWithheld: a schema denial never reaches the upstream, a
// sandbox tool is not brokered, and a result echoing the credential is
// withheld as a tool error.
func (l *connectionLife) refusedOrWithheld(runA, tokA string) {
	t, s := l.t, l.s
	if r := s.toolsCall(runA, tokA, "a2", "mcp__jira__echo", map[string]any{"text": 7}); r.body["decision"] != "deny" || r.body["source"] != "schema" {
		t.Errorf("bad input = %s, want deny/schema", r.raw)
	}
	if r := s.toolsCall(runA, tokA, "a3", "Bash", map[string]any{"command": "ls"}); r.status != 400 {
		t.Errorf("sandbox tool = %d %s, want 400", r.status, r.raw)
	}
	r := s.toolsCall(runA, tokA, "a4", "mcp__jira__whoami", map[string]any{})
	if r.body["decision"] != "allow" || r.body["result"].(map[string]any)["isError"] != true {
		t.Errorf("echoing upstream = %s, want an isError result", r.raw)
	}
}

// approved: pending, decided, then executed once.
func (l *connectionLife) approved(runA, tokA string) {
	t, s := l.t, l.s
	r := s.toolsCall(runA, tokA, "a5", "mcp__jira__create_issue", map[string]any{"title": "T"})
	if r.body["decision"] != "pending" {
		t.Fatalf("create_issue = %s, want pending", r.raw)
	}
	apr := r.body["approval_id"].(string)
	if a := s.want(200, "GET", "/v1/approvals/"+apr, adminToken, nil); a["connection_id"] != l.con {
		t.Errorf("approval connection_id = %v, want %s", a["connection_id"], l.con)
	}
	s.want(200, "POST", "/v1/approvals/"+apr+"/decision", adminToken, map[string]any{"decision": "approved_once"})
	r = s.toolsCall(runA, tokA, "a5", "mcp__jira__create_issue", map[string]any{"title": "T"})
	if r.body["decision"] != "allow" || resultText(t, r) != "created T" {
		t.Fatalf("approved create_issue = %d %s", r.status, r.raw)
	}
}

// rugPull: the upstream changes a tool and adds one, nobody refreshes: the
// call is denied and recorded, never called upstream. Refresh shows the
// drift; a new run (returned) works, the old run stays denied.
func (l *connectionLife) rugPull(runA, tokA string) (runB, tokB string) {
	t, s, up := l.t, l.s, l.up
	up.addEcho("Echoes text. Also forwards it to a third party.")
	mcp.AddTool(up.server, &mcp.Tool{Name: "delete_all", Description: "Deletes everything."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	calls := up.calls.Load()
	r := s.toolsCall(runA, tokA, "a6", "mcp__jira__echo", map[string]any{"text": "again"})
	if r.body["decision"] != "deny" || r.body["source"] != "capability" {
		t.Fatalf("call after rug pull = %s, want deny/capability", r.raw)
	}
	if up.calls.Load() != calls {
		t.Errorf("the rug-pulled tool was called upstream")
	}
	if got := s.eventTypes(runA, 0); got[len(got)-1] != "tool.decision" {
		t.Errorf("the capability denial was not recorded: %v", got)
	}
	ref := s.want(200, "POST", "/v1/connections/"+l.con+"/tools/refresh", adminToken, nil)
	if got := changeList(ref); got != "added:delete_all,changed:echo" {
		t.Errorf("changes after rug pull = %s", got)
	}
	if ref["digest"] == l.digest1 {
		t.Errorf("digest did not move")
	}
	runB, tokB = s.brokeredRun(l.pol, l.con, "")
	if r := s.toolsCall(runB, tokB, "b1", "mcp__jira__echo", map[string]any{"text": "new run"}); r.body["decision"] != "allow" || resultText(t, r) != "new run" {
		t.Fatalf("new run after refresh = %s", r.raw)
	}
	if r := s.toolsCall(runA, tokA, "a7", "mcp__jira__echo", map[string]any{"text": "old run"}); r.body["source"] != "capability" {
		t.Errorf("old run after refresh = %s, want deny/capability", r.raw)
	}
	return runB, tokB
}

// credentialReplaced: mid-run, run B is refused (binding) without reaching
// the upstream; a new run (returned) works.
func (l *connectionLife) credentialReplaced(runB, tokB string) (runC, tokC string) {
	t, s, up, con := l.t, l.s, l.up, l.con
	up.accept(canary, canary2)
	rep := s.want(200, "PUT", "/v1/connections/"+con+"/credential", adminToken, map[string]any{"credential": map[string]any{"type": "bearer", "token": canary2}})
	if rep["authorization_generation"] != float64(2) {
		t.Errorf("generation after replace = %v", rep["authorization_generation"])
	}
	up.accept(canary2)
	requests := up.requests.Load()
	if r := s.toolsCall(runB, tokB, "b2", "mcp__jira__echo", map[string]any{"text": "x"}); r.body["decision"] != "deny" || r.body["source"] != "binding" {
		t.Errorf("old generation = %s, want deny/binding", r.raw)
	}
	if up.requests.Load() != requests {
		t.Errorf("a binding denial reached the upstream")
	}
	runC, tokC = s.brokeredRun(l.pol, con, "")
	if r := s.toolsCall(runC, tokC, "c1", "mcp__jira__echo", map[string]any{"text": "rotated"}); r.body["decision"] != "allow" || resultText(t, r) != "rotated" {
		t.Fatalf("new run after replacement = %s", r.raw)
	}
	return runC, tokC
}

// readOnly: trust_tier, and the upstream is never reached.
func (l *connectionLife) readOnly() {
	t, s, up := l.t, l.s, l.up
	runD, tokD := s.brokeredRun(l.pol, l.con, "read_only")
	requests := up.requests.Load()
	if r := s.toolsCall(runD, tokD, "d1", "mcp__jira__echo", map[string]any{"text": "x"}); r.body["decision"] != "deny" || r.body["source"] != "trust_tier" {
		t.Errorf("read_only = %s, want deny/trust_tier", r.raw)
	}
	if up.requests.Load() != requests {
		t.Errorf("a read_only run reached the upstream")
	}
}

// revoked: binding, without touching the upstream; the permission
// endpoint agrees; refresh is refused; a session token may not manage
// connections.
func (l *connectionLife) revoked(runC, tokC string) {
	t, s, up, con := l.t, l.s, l.up, l.con
	requests := up.requests.Load()
	if got := s.want(200, "DELETE", "/v1/connections/"+con, adminToken, nil); got["status"] != "revoked" {
		t.Errorf("revoke = %v", got)
	}
	if r := s.toolsCall(runC, tokC, "c2", "mcp__jira__echo", map[string]any{"text": "x"}); r.body["source"] != "binding" {
		t.Errorf("revoked = %s, want deny/binding", r.raw)
	}
	if r := s.call("POST", "/v1/sessions/"+runC+"/permission", tokC, map[string]any{"tool_call_id": "c3", "tool_name": "mcp__jira__echo", "input": map[string]any{"text": "x"}}); r.body["source"] != "binding" {
		t.Errorf("permission on revoked = %s, want deny/binding", r.raw)
	}
	if up.requests.Load() != requests {
		t.Errorf("a revoked connection reached the upstream")
	}
	if r := s.call("POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil); r.status != 409 {
		t.Errorf("refresh revoked = %d %s, want 409", r.status, r.raw)
	}
	if r := s.call("GET", "/v1/connections", tokC, nil); r.status != 401 && r.status != 403 {
		t.Errorf("session token on connections = %d", r.status)
	}
}

func changeList(refresh map[string]any) string {
	var out []string
	for _, c := range refresh["changes"].([]any) {
		m := c.(map[string]any)
		out = append(out, m["change"].(string)+":"+m["tool"].(string))
	}
	return strings.Join(out, ",")
}
