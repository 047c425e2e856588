package gate_test

import (
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/gate"
)

// TestToolSetDenialIsTheStage: the broker's re-verification
// (ToolSetDenial) refuses exactly what the gate's stage 2 refuses, with its reasons, including a binding frozen
// without a tool-set digest (which a copy of the check once missed).
func TestToolSetDenialIsTheStage(t *testing.T) {
	t.Parallel()
	tool := &gate.Tool{Name: "mcp__jira__echo", Class: "read", Callable: true, ConnectionID: "con_1"}
	run := func(b gate.Binding) *gate.Run {
		return &gate.Run{Tools: map[string]*gate.Tool{tool.Name: tool}, Bindings: map[string]gate.Binding{"con_1": b}}
	}
	good := gate.Binding{ConnectionID: "con_1", Generation: 2, ToolSetDigest: "sha256:a"}
	live := gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 2, ToolSetDigest: "sha256:a", OwnerActive: true}
	cases := []struct {
		name   string
		run    *gate.Run
		live   gate.Live
		source gate.Source
		reason string
	}{
		{"holds", run(good), live, "", ""},
		{"no digest frozen", run(gate.Binding{ConnectionID: "con_1", Generation: 2}), gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 2, OwnerActive: true},
			gate.SourceBinding, "no frozen tool-set digest"},
		{"gone", run(good), gate.Live{}, gate.SourceBinding, "no longer exists"},
		{"revoked", run(good), gate.Live{Found: true, Status: gate.ConnectionRevoked, Generation: 2, ToolSetDigest: "sha256:a", OwnerActive: true}, gate.SourceBinding, "not active"},
		{"re-authorized", run(good), gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 3, ToolSetDigest: "sha256:a", OwnerActive: true}, gate.SourceBinding, "re-authorized"},
		{"owner left", run(good), gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 2, ToolSetDigest: "sha256:a"}, gate.SourceBinding, "no longer an active member"},
		{"drifted", run(good), gate.Live{Found: true, Status: gate.ConnectionActive, Generation: 2, ToolSetDigest: "sha256:b", OwnerActive: true}, gate.SourceCapability, "changed since this run started"},
		{"no run", nil, live, gate.SourceCapability, "no frozen tool set"},
	}
	for _, c := range cases {
		d, denied := gate.ToolSetDenial(c.run, gate.Request{ToolName: tool.Name, Connections: map[string]gate.Live{"con_1": c.live}})
		if denied != (c.source != "") || d.Source != c.source || !strings.Contains(d.Reason, c.reason) {
			t.Errorf("%s: denied=%v %s %q, want %s %q", c.name, denied, d.Source, d.Reason, c.source, c.reason)
			continue
		}
		if !denied || c.run == nil {
			continue
		}
		// The same call through the whole gate is denied the same way.
		full := gate.Decide(&gate.Run{Tools: c.run.Tools, Bindings: c.run.Bindings, TrustTier: "trusted", AvailableMicros: 1, Policy: nil},
			gate.Request{ToolName: tool.Name, Input: map[string]any{}, Connections: map[string]gate.Live{"con_1": c.live}})
		if full.Source != d.Source || full.Reason != d.Reason {
			t.Errorf("%s: gate says %s %q, re-verification %s %q", c.name, full.Source, full.Reason, d.Source, d.Reason)
		}
	}
}
