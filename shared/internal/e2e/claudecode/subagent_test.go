//go:build e2e

package claudecode

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// subagentPolicy lets the model start general-purpose subagents only, and
// keeps a subagent from removing files while allowing it to read a diff.
const subagentPolicy = `{"name":"subagents","default_verdict":"deny","rules":[
 {"id":"general-only","tool":"Agent","match":{"input":{"/subagent_type":["general-purpose"]}},"verdict":"allow"},
 {"id":"no-explore","tool":"Agent","match":{"input":{"/subagent_type":["Explore"]}},"verdict":"deny"},
 {"id":"sub-no-rm","tool":"Bash","match":{"agent_type":["general-purpose"],"command_prefix":["rm"]},"verdict":"deny"},
 {"id":"diff","tool":"Bash","match":{"command_prefix":["git diff"]},"verdict":"allow"}]}`

// isSubagent tells a subagent's model requests from its parent's: Claude
// Code marks them in the billing line it puts first in the system prompt.
func isSubagent(r scriptedmodel.Request) bool {
	return strings.Contains(r.System, "cc_is_subagent=true")
}

// requested is a tool.requested event as the suite reads it.
type requested struct {
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	AgentID    string `json:"agent_id"`
	AgentType  string `json:"agent_type"`
}

func (s *stack) requestedEvents(t *testing.T, r run) map[string]requested {
	t.Helper()
	out := map[string]requested{}
	for _, e := range s.Events(t, r) {
		if e.Type != "tool.requested" {
			continue
		}
		var q requested
		if err := json.Unmarshal(e.Data, &q); err != nil {
			t.Fatal(err)
		}
		out[q.ToolCallID] = q
	}
	return out
}

// TestSubagentGoverned: the model starts a general-purpose subagent (the
// Agent call, allowed by a policy rule on /subagent_type); the subagent's
// own model requests come through the run's proxy and budget (each one
// reserved and reconciled), and each of its tool
// calls reaches the hook and the gate with its identity: git diff is
// allowed, rm is denied by a rule that matches agent_type, and both are
// recorded on tool.requested with the subagent's agent_id and agent_type.
// The Agent call itself is the main agent's.
func TestSubagentGoverned(t *testing.T) {
	t.Parallel()
	dir := project(t, map[string]string{"keep.txt": "keep\n"})
	s := newStack(t,
		call("toolu_agent", "Agent", map[string]any{"description": "Review the diff", "prompt": "Show the diff, then clean up keep.txt", "subagent_type": "general-purpose", "run_in_background": false}),
		scriptedmodel.SayText("done"),
	)
	s.Model.Route(isSubagent, scriptedmodel.Sequence(
		call("toolu_sub_diff", "Bash", bash("git diff")),
		then("toolu_sub_rm", "Bash", bash("rm keep.txt")),
		scriptedmodel.SayText("subagent done"),
	))
	r := s.NewRun(t, subagentPolicy, nil)
	res := s.claude(t, r, dir, "review the diff with a subagent", cliOpts{})

	v := s.Ledger(t, r)
	for id, w := range map[string]decision{
		"toolu_agent":    {ToolName: "Agent", Decision: vocab.Allow, RuleID: "general-only"},
		"toolu_sub_diff": {ToolName: "Bash", Decision: vocab.Allow, RuleID: "diff"},
		"toolu_sub_rm":   {ToolName: "Bash", Decision: vocab.Deny, Source: "policy", RuleID: "sub-no-rm"},
	} {
		got := v.Decisions[id]
		if got.ToolName != w.ToolName || got.Decision != w.Decision || got.RuleID != w.RuleID || got.Source != w.Source {
			t.Errorf("%s: tool.decision %+v, want %+v", id, got, w)
		}
	}
	reqs := s.requestedEvents(t, r)
	if a := reqs["toolu_agent"]; a.AgentID != "" || a.AgentType != "" {
		t.Errorf("the Agent call is recorded as a subagent's: %+v", a)
	}
	diff, rm := reqs["toolu_sub_diff"], reqs["toolu_sub_rm"]
	if diff.AgentID == "" || diff.AgentType != "general-purpose" || rm.AgentID != diff.AgentID || rm.AgentType != "general-purpose" {
		t.Errorf("tool.requested of the subagent's calls: git diff %+v, rm %+v; want both with the same agent_id and agent_type general-purpose", diff, rm)
	}
	if !exists(dir, "keep.txt") {
		t.Error("keep.txt is gone: the subagent's denied rm ran")
	}
	if tr := s.ToolResult(t, "toolu_sub_rm"); !tr.IsError || !strings.Contains(tr.Content, "rule sub-no-rm") {
		t.Errorf("the subagent's rm: tool_result %+v, want fluidbox's denial", tr)
	}
	sub := 0
	for _, q := range s.Model.Requests() {
		if isSubagent(q) {
			sub++
		}
	}
	if sub < 3 {
		t.Errorf("the upstream saw %d subagent requests, want its three turns, through the run's proxy", sub)
	}
	if res.Result != "done" {
		t.Errorf("result = %q, want done", res.Result)
	}
	s.CheckModelTraffic(t, r, v)
}

// TestAgentDeniedByPolicy: an Agent call is decided like any other tool
// call: a rule on /subagent_type denies an Explore subagent, so none
// starts and no model request is made for it.
func TestAgentDeniedByPolicy(t *testing.T) {
	t.Parallel()
	s := newStack(t,
		call("toolu_explore", "Agent", map[string]any{"description": "Explore", "prompt": "Look around", "subagent_type": "Explore"}),
		scriptedmodel.SayToolResult(),
	)
	r := s.NewRun(t, subagentPolicy, nil)
	res := s.claude(t, r, project(t, nil), "explore with a subagent", cliOpts{})
	v := s.Ledger(t, r)
	if d := v.Decisions["toolu_explore"]; d.Decision != vocab.Deny || d.Source != "policy" || d.RuleID != "no-explore" {
		t.Errorf("Agent Explore: tool.decision %+v, want deny by policy rule no-explore", d)
	}
	if _, ok := res.denied()["toolu_explore"]; !ok {
		t.Errorf("permission_denials = %+v, want the Agent call", res.PermissionDenials)
	}
	if n := len(s.Model.Requests()); n != 2 {
		t.Errorf("the upstream saw %d requests, want 2 (the call, then its denial): no subagent ran", n)
	}
	s.CheckModelTraffic(t, r, v)
}

// TestAgentReadOnly: Agent is class execute, so a read_only run starts no
// subagent, whatever its policy allows; a read_only run's subagents are
// therefore never less than read_only (and its own calls, under the same
// run, keep its trust tier).
func TestAgentReadOnly(t *testing.T) {
	t.Parallel()
	s := newStack(t,
		call("toolu_agent", "Agent", map[string]any{"description": "Explore", "prompt": "Look around", "subagent_type": "Explore"}),
		scriptedmodel.SayToolResult(),
	)
	r := s.NewRun(t, `{"name":"allow-all","default_verdict":"allow","rules":[]}`, map[string]any{"trust_tier": "read_only"})
	s.claude(t, r, project(t, nil), "explore with a subagent", cliOpts{})
	v := s.Ledger(t, r)
	if d := v.Decisions["toolu_agent"]; d.Decision != vocab.Deny || d.Source != "trust_tier" {
		t.Errorf("Agent in a read_only run: tool.decision %+v, want deny by trust_tier", d)
	}
	for _, q := range s.Model.Requests() {
		if isSubagent(q) {
			t.Fatal("a subagent of the read_only run made a model request")
		}
	}
	s.CheckModelTraffic(t, r, v)
}

// TestAgentRemoteDenied: a subagent launched with isolation "remote" would
// run in a cloud environment, where neither the run's hook nor its proxy
// sees it. The bundle's Agent schema leaves "remote" out
// (claude-code-narrowed.json), so the schema stage denies it even under a
// policy that allows every Agent call.
func TestAgentRemoteDenied(t *testing.T) {
	t.Parallel()
	s := newStack(t,
		call("toolu_remote", "Agent", map[string]any{"description": "Work remotely", "prompt": "Do it in the cloud", "subagent_type": "general-purpose", "isolation": "remote"}),
		scriptedmodel.SayToolResult(),
	)
	r := s.NewRun(t, `{"name":"agents","default_verdict":"deny","rules":[{"id":"agents","tool":"Agent","verdict":"allow"}]}`, nil)
	res := s.claude(t, r, project(t, nil), "work in the cloud", cliOpts{})
	v := s.Ledger(t, r)
	if d := v.Decisions["toolu_remote"]; d.Decision != vocab.Deny || d.Source != "schema" {
		t.Errorf("Agent isolation remote: tool.decision %+v, want deny by schema", d)
	}
	if _, ok := res.denied()["toolu_remote"]; !ok {
		t.Errorf("permission_denials = %+v, want the Agent call", res.PermissionDenials)
	}
	for _, q := range s.Model.Requests() {
		if isSubagent(q) {
			t.Fatal("a subagent made a model request")
		}
	}
	s.CheckModelTraffic(t, r, v)
}
