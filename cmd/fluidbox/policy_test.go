package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestPolicyEval: `fluidbox policy eval` prints the decision, the stages
// and Bash's analysis, or the JSON answer with --json.
func TestPolicyEval(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	ctx := context.Background()
	var pol struct{ ID string }
	if err := s.admin.Do(ctx, "POST", "/v1/policies", json.RawMessage(testPolicy), &pol); err != nil {
		t.Fatal(err)
	}

	r := fluidbox(ctx, s.env(), "", "policy", "eval", pol.ID, "--command", "sudo rm -rf build")
	for _, want := range []string{"REQUIRE_APPROVAL", "rule ask-rm", "policy: pass", "approval: require_approval", "commands deny rules see:", "    rm -rf build", "read-only: no"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("policy eval --command = %+v, want %q in the output", r, want)
		}
	}
	r = fluidbox(ctx, s.env(), "", "policy", "eval", pol.ID, "--command", "rm x", "--tier", "read_only")
	if r.code != 0 || !strings.Contains(r.stdout, "DENY") || !strings.Contains(r.stdout, "trust_tier: deny (this run is read_only") {
		t.Errorf("policy eval in read_only = %+v, want a trust_tier deny", r)
	}
	r = fluidbox(ctx, s.env(), "", "policy", "eval", pol.ID, "--command", "rm x", "--autonomous", "--json")
	var out evaluation
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || out.Decision != "deny" || out.Verdict != "require_approval" || out.Trace.Bash == nil {
		t.Errorf("policy eval --autonomous --json = %+v (%v), want deny from require_approval with a Bash trace", r, err)
	}
	r = fluidbox(ctx, s.env(), "", "policy", "eval", pol.ID, "--tool", "mcp__x__y", "--input", `{"a":1}`)
	if r.code != 0 || !strings.Contains(r.stdout, "the schema and trust tier stages were skipped") {
		t.Errorf("policy eval --tool = %+v, want the skipped stages named", r)
	}
	for _, bad := range [][]string{
		{"policy", "eval"},
		{"policy", "eval", pol.ID},
		{"policy", "eval", pol.ID, "--command", "ls", "--tool", "Bash"},
		{"policy", "eval", pol.ID, "--tool", "Read", "--input", "{"},
		{"policy", "eval", "pol_nope", "--command", "ls"},
		{"policy", "frobnicate"},
	} {
		if r := fluidbox(ctx, s.env(), "", bad...); r.code == 0 || r.stderr == "" {
			t.Errorf("fluidbox %v = %+v, want a failure with a message", bad, r)
		}
	}
}
