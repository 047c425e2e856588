package permission_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/calltest"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestSubagentIdentity: a subagent's call is decided like any other and
// recorded on tool.requested with the agent_id and agent_type the runner
// sent; malformed identities (too long, control characters) are refused
// before anything is recorded. A type alone
// is the main thread of a claude --agent session, and is accepted.
func TestSubagentIdentity(t *testing.T) {
	t.Parallel()
	e := calltest.NewEnv(t, policyText)
	ctx := context.Background()
	ans, err := e.Perm.Decide(ctx, e.RunID, permission.Request{ToolCallID: "c1", ToolName: "Bash", Input: []byte(`{"command":"ls"}`), AgentID: "a7f3c9", AgentType: "Explore"}, 0)
	if err != nil || ans.Decision != vocab.Allow {
		t.Fatalf("Decide(subagent ls) = %+v, %v; want allow", ans, err)
	}
	evs, _, err := e.Led.Read(ctx, e.RunID, 0, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		if ev.Type == "tool.requested" {
			found = true
			if !strings.Contains(ev.Data, `"agent_id":"a7f3c9"`) || !strings.Contains(ev.Data, `"agent_type":"Explore"`) {
				t.Errorf("tool.requested = %s, want the subagent's agent_id and agent_type", ev.Data)
			}
		}
	}
	if !found {
		t.Fatal("no tool.requested")
	}
	var inv *permission.InvalidError
	for _, bad := range []permission.Request{
		{AgentID: strings.Repeat("a", 257), AgentType: "Explore"},
		{AgentID: "a1", AgentType: "Exp\nlore"},
		{AgentID: "a\x00", AgentType: "Explore"},
	} {
		bad.ToolCallID, bad.ToolName, bad.Input = "c2", "Bash", []byte(`{"command":"ls"}`)
		if _, err := e.Perm.Decide(ctx, e.RunID, bad, 0); !errors.As(err, &inv) {
			t.Errorf("Decide(agent_id %q, agent_type %q) = %v, want InvalidError", bad.AgentID, bad.AgentType, err)
		}
	}
	if ans, err := e.Perm.Decide(ctx, e.RunID, permission.Request{ToolCallID: "c3", ToolName: "Bash", Input: []byte(`{"command":"ls"}`), AgentType: "reviewer"}, 0); err != nil || ans.Decision != vocab.Allow {
		t.Errorf("Decide(agent_type alone) = %+v, %v; want allow", ans, err)
	}
}
