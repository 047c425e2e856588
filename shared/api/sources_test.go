package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestGateReachesEverySource is one table over HTTP on the local stack that
// reaches every deny source of docs/api.md, each with its exact answer and the
// exact events the ledger gained for the call.
func TestGateReachesEverySource(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	up := newMCPUpstream(t, canary)
	pol := s.policy(`{"name":"sources","default_verdict":"deny","rules":[
 {"id":"read-cmds","tool":"Bash","match":{"command_prefix":["git status"]},"verdict":"allow"},
 {"id":"no-push","tool":"Bash","match":{"command_prefix":["git push"]},"verdict":"deny"},
 {"id":"ask","tool":"Bash","match":{"command_prefix":["make deploy"]},"verdict":"require_approval"},
 {"id":"ask-briefly","tool":"Bash","match":{"command_prefix":["make release"]},"verdict":"require_approval","ttl_seconds":1},
 {"id":"echo","tool":"mcp__jira__echo","verdict":"allow"}]}`)
	con := s.connection("jira", up.url(), "shared", canary)
	s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)

	const decided = "tool.requested tool.decision"
	const human = "tool.requested approval.requested approval.decided tool.decision"
	cases := []struct {
		source string
		// run creates the run to ask in; setup, if any, runs before the
		// final ask with the same tool_call_id.
		run    func() (string, string)
		tool   string
		input  map[string]any
		setup  func(id, tok, call string)
		events string
	}{
		{source: "session", run: func() (string, string) {
			id, tok := s.gateRun(pol, runOpts{budget: 1})
			s.must(200, "POST", "/v1/sessions/"+id+"/end", adminToken, nil)
			return id, tok
		}, tool: "Bash", input: bash("git status"), events: decided},
		{source: "budget", run: func() (string, string) { return s.gateRun(pol, runOpts{budget: 0}) }, tool: "Bash", input: bash("git status"), events: decided},
		{source: "capability", run: func() (string, string) { return s.gateRun(pol, runOpts{budget: 1}) }, tool: "mcp__github__create_issue", input: map[string]any{}, events: decided},
		{source: "binding", run: func() (string, string) {
			id, tok := s.brokeredRun(pol, con, "")
			s.want(200, "DELETE", "/v1/connections/"+con, adminToken, nil)
			return id, tok
		}, tool: "mcp__jira__echo", input: map[string]any{"text": "hi"}, events: decided},
		{source: "schema", run: func() (string, string) { return s.gateRun(pol, runOpts{budget: 1}) }, tool: "Bash", input: map[string]any{"cmd": "ls"}, events: decided},
		{source: "trust_tier", run: func() (string, string) { return s.gateRun(pol, runOpts{budget: 1, tier: "read_only"}) }, tool: "Bash", input: bash("rm -rf build"), events: decided},
		{source: "policy", run: func() (string, string) { return s.gateRun(pol, runOpts{budget: 1}) }, tool: "Bash", input: bash("git -C /repo push"), events: decided},
		{source: "approval_limit", run: func() (string, string) {
			id, tok := s.gateRun(pol, runOpts{budget: 1})
			for i := range 20 { // the default limit of waiting approvals
				s.pending(id, tok, fmt.Sprintf("waiting-%d", i), "make deploy")
			}
			return id, tok
		}, tool: "Bash", input: bash("make deploy"), events: decided},
		{source: "approval", run: func() (string, string) { return s.gateRun(pol, runOpts{budget: 1}) }, tool: "Bash", input: bash("make deploy"),
			setup: func(id, tok, call string) {
				s.decide(s.pending(id, tok, call, "make deploy"), "denied")
			}, events: human},
		{source: "approval_expired", run: func() (string, string) { return s.gateRun(pol, runOpts{budget: 1}) }, tool: "Bash", input: bash("make release"),
			setup: func(id, tok, call string) {
				s.pending(id, tok, call, "make release")
				time.Sleep(1100 * time.Millisecond)
			}, events: human},
	}
	for i, c := range cases {
		id, tok := c.run()
		before := len(s.eventTypes(id, 0))
		call := fmt.Sprintf("call-%d", i)
		if c.setup != nil {
			c.setup(id, tok, call)
		}
		r := s.ask(id, tok, call, c.tool, c.input)
		if r.status != 200 || r.body["decision"] != "deny" || r.body["source"] != c.source || str(r.body["reason"]) == "" {
			t.Errorf("%s: answer %d %s, want deny with source %s and a reason", c.source, r.status, r.raw, c.source)
		}
		got := fmt.Sprint(s.eventTypes(id, before))
		if want := fmt.Sprint(strings.Fields(c.events)); got != want {
			t.Errorf("%s: events %s, want %s", c.source, got, want)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("the upstream saw %d tool calls; no case may reach it", n)
	}
	s.assertNoCanary()
}
