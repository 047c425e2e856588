//go:build e2e

package agentsdk

import (
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// governed is the policy of most cases. The commands write files, so that
// a file's existence shows what ran.
const governed = `{"name":"e2e-agentsdk","default_verdict":"deny","approval":{"scope":"once","ttl_seconds":900},"rules":[
 {"id":"no-denied","tool":"Bash","match":{"command_prefix":["touch denied.txt"]},"verdict":"deny"},
 {"id":"ask","tool":"Bash","match":{"command_prefix":["touch approved.txt"]},"verdict":"require_approval","ttl_seconds":120},
 {"id":"ask-briefly","tool":"Bash","match":{"command_prefix":["touch unanswered.txt"]},"verdict":"require_approval","ttl_seconds":1},
 {"id":"touch","tool":"Bash","match":{"command_prefix":["touch"],"options":"any"},"verdict":"allow"},
 {"id":"reads","tool":"Read","verdict":"allow"}]}`

// TestAllowAndDeny: an allowed command runs, a denied one does not, and the
// model gets fluidbox's reason.
func TestAllowAndDeny(t *testing.T) {
	t.Parallel()
	s := newStack(t,
		call("toolu_allowed", "Bash", bash("touch allowed.txt")),
		then("toolu_denied", "Bash", bash("touch denied.txt")),
		scriptedmodel.SayToolResult(),
	)
	r := s.NewRun(t, governed, nil)
	dir := project(t, nil)
	res := s.query(t, r, dir, "create two files", opts{})

	if !exists(dir, "allowed.txt") || exists(dir, "denied.txt") {
		t.Errorf("allowed.txt exists %v, denied.txt exists %v; want true, false", exists(dir, "allowed.txt"), exists(dir, "denied.txt"))
	}
	if _, ok := res.denied()["toolu_denied"]; !ok || len(res.denied()) != 1 {
		t.Errorf("permission_denials = %+v, want toolu_denied only", res.Result.PermissionDenials)
	}
	const reason = `fluidbox denied (policy, rule no-denied): denied by rule "no-denied"`
	if tr := s.ToolResult(t, "toolu_denied"); !tr.IsError || !strings.Contains(tr.Content, reason) {
		t.Errorf("tool_result = %+v, want is_error with %q", tr, reason)
	}
	v := s.Ledger(t, r)
	if d := v.Decisions["toolu_allowed"]; d.Decision != vocab.Allow || d.RuleID != "touch" {
		t.Errorf("toolu_allowed: %+v", d)
	}
	if d := v.Decisions["toolu_denied"]; d.Decision != vocab.Deny || d.RuleID != "no-denied" {
		t.Errorf("toolu_denied: %+v", d)
	}
	s.CheckModelTraffic(t, r, v)
	// The output limit the adapter sized to the run's budget ($100: its
	// cap) is what Claude Code declares, not its own default of 128000.
	for i, req := range s.Model.Requests() {
		if req.Path == "/v1/messages" && req.MaxTokens != 32000 {
			t.Errorf("model request %d: max_tokens %d, want 32000 (CLAUDE_CODE_MAX_OUTPUT_TOKENS)", i, req.MaxTokens)
		}
	}
	t.Logf("decisions: %+v", res.Decisions)
	t.Logf("init tools: %v", res.InitTools)
}
