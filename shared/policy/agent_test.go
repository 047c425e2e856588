package policy

import "testing"

// TestMatchAgentType: a rule with match.agent_type applies only to calls a
// subagent of a matching type makes (globs over the type Claude Code
// reports); the main agent's calls, which carry no type, match no such
// rule, for any verdict. Agent calls themselves are matched by input
// (/subagent_type), since the subagent does not exist yet.
func TestMatchAgentType(t *testing.T) {
	t.Parallel()
	p, _, err := Parse([]byte(`{"name":"agents","default_verdict":"allow","rules":[
 {"id":"explore-no-rm","tool":"Bash","match":{"agent_type":["Explore"],"command_prefix":["rm"]},"verdict":"deny"},
 {"id":"reviewers-ask","tool":"Write","match":{"agent_type":["review-*"]},"verdict":"require_approval"},
 {"id":"no-general","tool":"Agent","match":{"input":{"/subagent_type":["general-purpose"]}},"verdict":"deny"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		agent, tool string
		input       map[string]any
		want        Verdict
		rule        string
	}{
		{"Explore", "Bash", map[string]any{"command": "rm -rf x"}, VerdictDeny, "explore-no-rm"},
		{"", "Bash", map[string]any{"command": "rm -rf x"}, VerdictAllow, ""},
		{"Plan", "Bash", map[string]any{"command": "rm -rf x"}, VerdictAllow, ""},
		{"review-go", "Write", map[string]any{"file_path": "/w/a", "content": "x"}, VerdictRequireApproval, "reviewers-ask"},
		{"", "Write", map[string]any{"file_path": "/w/a", "content": "x"}, VerdictAllow, ""},
		{"", "Agent", map[string]any{"subagent_type": "general-purpose", "prompt": "p", "description": "d"}, VerdictDeny, "no-general"},
		{"", "Agent", map[string]any{"subagent_type": "Explore", "prompt": "p", "description": "d"}, VerdictAllow, ""},
	} {
		got := p.EvaluateIn(Env{AgentType: c.agent}, c.tool, c.input)
		if got.Verdict != c.want || got.RuleID != c.rule {
			t.Errorf("EvaluateIn(agent %q, %s %v) = %s %q, want %s %q", c.agent, c.tool, c.input, got.Verdict, got.RuleID, c.want, c.rule)
		}
	}
	// An allow rule keyed on agent_type allows only that subagent's calls.
	q, _, err := Parse([]byte(`{"name":"a","default_verdict":"deny","rules":[{"id":"explore-reads","tool":"Read","match":{"agent_type":["Explore"]},"verdict":"allow"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := q.EvaluateIn(Env{AgentType: "Explore"}, "Read", map[string]any{"file_path": "/a"}); got.Verdict != VerdictAllow {
		t.Errorf("Explore's Read = %s, want allow", got.Verdict)
	}
	if got := q.EvaluateIn(Env{}, "Read", map[string]any{"file_path": "/a"}); got.Verdict != VerdictDeny {
		t.Errorf("the main agent's Read = %s, want deny (the rule is Explore's)", got.Verdict)
	}
	if _, _, err := Parse([]byte(`{"name":"a","default_verdict":"deny","rules":[{"id":"bad","tool":"Read","match":{"agent_type":["[x"]},"verdict":"allow"}]}`)); err == nil {
		t.Error("an agent_type glob that does not compile was accepted")
	}
}
