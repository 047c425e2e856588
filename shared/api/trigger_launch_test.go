package api_test

import (
	"strings"
	"testing"
)

// TestTriggerLaunchFields: prompt, report and timeout_seconds are checked
// at creation and update and shown as stored, defaults filled in.
func TestTriggerLaunchFields(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	pol := s.policy(basicPolicy)
	body := func(repo string, extra map[string]any) map[string]any {
		b := map[string]any{"repository": repo, "policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	got := s.must(201, "POST", "/v1/triggers", adminToken, body("acme/a", map[string]any{"prompt": "Review this pull request.", "report": "comment", "timeout_seconds": 600}))
	if got["prompt"] != "Review this pull request." || got["report"] != "comment" || got["timeout_seconds"] != 600.0 {
		t.Errorf("trigger = %v, want the prompt, report comment, timeout 600", got)
	}
	if again := s.must(200, "GET", "/v1/triggers/"+got["id"].(string), adminToken, nil); again["report"] != "comment" || again["timeout_seconds"] != 600.0 {
		t.Errorf("GET trigger = %v", again)
	}
	for i, bad := range []map[string]any{
		{"report": "email"}, {"report": "CHECK_RUN"}, {"timeout_seconds": 59}, {"timeout_seconds": 86401}, {"timeout_seconds": -1},
		{"prompt": strings.Repeat("x", 32<<10+1)}, {"prompt": "a\x00b"},
	} {
		r := s.do("POST", "/v1/triggers", adminToken, body("acme/bad"+string(rune('a'+i)), bad))
		if r.status != 400 {
			t.Errorf("POST /v1/triggers %v = %d %s, want 400", bad, r.status, r.raw)
		}
	}
}
