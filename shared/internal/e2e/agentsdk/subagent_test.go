//go:build e2e

package agentsdk

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestSubagentGoverned is the CLI suite's subagent run through the Agent
// SDK and @fluidbox/claude-agent-sdk: the Agent call is allowed by a rule
// on /subagent_type, the subagent's model requests go through the run's
// proxy, its git diff is allowed and its rm denied by a rule matching
// agent_type, both recorded with the subagent's agent_id and agent_type;
// an Explore subagent is denied by policy.
func TestSubagentGoverned(t *testing.T) {
	t.Parallel()
	const policy = `{"name":"subagents","default_verdict":"deny","rules":[
 {"id":"general-only","tool":"Agent","match":{"input":{"/subagent_type":["general-purpose"]}},"verdict":"allow"},
 {"id":"no-explore","tool":"Agent","match":{"input":{"/subagent_type":["Explore"]}},"verdict":"deny"},
 {"id":"sub-no-rm","tool":"Bash","match":{"agent_type":["general-purpose"],"command_prefix":["rm"]},"verdict":"deny"},
 {"id":"diff","tool":"Bash","match":{"command_prefix":["git diff"]},"verdict":"allow"}]}`
	dir := project(t, map[string]string{"keep.txt": "keep\n"})
	s := newStack(t,
		call("toolu_explore", "Agent", map[string]any{"description": "Explore", "prompt": "Look around", "subagent_type": "Explore"}),
		then("toolu_agent", "Agent", map[string]any{"description": "Review the diff", "prompt": "Show the diff, then clean up keep.txt", "subagent_type": "general-purpose", "run_in_background": false}),
		scriptedmodel.SayText("done"),
	)
	isSubagent := func(r scriptedmodel.Request) bool { return strings.Contains(r.System, "cc_is_subagent=true") }
	s.Model.Route(isSubagent, scriptedmodel.Sequence(
		call("toolu_sub_diff", "Bash", bash("git diff")),
		then("toolu_sub_rm", "Bash", bash("rm keep.txt")),
		scriptedmodel.SayText("subagent done"),
	))
	r := s.NewRun(t, policy, nil)
	s.query(t, r, dir, "review the diff with a subagent", opts{})

	v := s.Ledger(t, r)
	for id, w := range map[string]decision{
		"toolu_explore":  {ToolName: "Agent", Decision: vocab.Deny, Source: "policy", RuleID: "no-explore"},
		"toolu_agent":    {ToolName: "Agent", Decision: vocab.Allow, RuleID: "general-only"},
		"toolu_sub_diff": {ToolName: "Bash", Decision: vocab.Allow, RuleID: "diff"},
		"toolu_sub_rm":   {ToolName: "Bash", Decision: vocab.Deny, Source: "policy", RuleID: "sub-no-rm"},
	} {
		got := v.Decisions[id]
		if got.ToolName != w.ToolName || got.Decision != w.Decision || got.RuleID != w.RuleID || got.Source != w.Source {
			t.Errorf("%s: tool.decision %+v, want %+v", id, got, w)
		}
	}
	type requested struct {
		ToolCallID string `json:"tool_call_id"`
		AgentID    string `json:"agent_id"`
		AgentType  string `json:"agent_type"`
	}
	reqs := map[string]requested{}
	for _, e := range s.Events(t, r) {
		if e.Type == "tool.requested" {
			var q requested
			if err := json.Unmarshal(e.Data, &q); err != nil {
				t.Fatal(err)
			}
			reqs[q.ToolCallID] = q
		}
	}
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
	sub := 0
	for _, q := range s.Model.Requests() {
		if isSubagent(q) {
			sub++
		}
	}
	if sub < 3 {
		t.Errorf("the upstream saw %d subagent requests, want its three turns through the run's proxy", sub)
	}
	s.CheckModelTraffic(t, r, v)
}
