package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSubagentRuleOverHTTP: a rule limited to a subagent type, created
// through the API, is stored with its agent_type (GET shows it) and
// decides as written: the Explore subagent's Read is allowed, the main
// agent's and another subagent's are denied.
func TestSubagentRuleOverHTTP(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(`{"name":"explore","default_verdict":"deny","rules":[
 {"id":"explore-read","tool":"Read","match":{"path":["/work/**"],"agent_type":["Explore"]},"verdict":"allow"}]}`)
	got := s.must(200, "GET", "/v1/policies/"+pol, adminToken, nil)
	stored, _ := json.Marshal(got["document"])
	if !strings.Contains(string(stored), `"agent_type":["Explore"]`) {
		t.Fatalf("stored document = %s, want its agent_type", stored)
	}
	id, tok := s.gateRun(pol, runOpts{budget: 1})
	for _, tc := range []struct{ call, agent, want string }{
		{"c-explore", "Explore", "allow"},
		{"c-main", "", "deny"},
		{"c-plan", "Plan", "deny"},
	} {
		body := map[string]any{"tool_call_id": tc.call, "tool_name": "Read", "input": map[string]any{"file_path": "/work/repo/a.go"}}
		if tc.agent != "" {
			body["agent_id"], body["agent_type"] = "agent-"+tc.call, tc.agent
		}
		if r := s.must(200, "POST", "/v1/sessions/"+id+"/permission", tok, body); r["decision"] != tc.want {
			t.Errorf("%s (agent %q) = %v, want %s", tc.call, tc.agent, r, tc.want)
		}
	}
}
