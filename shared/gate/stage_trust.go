package gate

import (
	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/trust"
)

// bashTool is the sandbox tool whose class is decided per call.
const bashTool = "Bash"

// Stage 4, trust tier: a read_only run (a pull request from a fork, or any
// run that asked for it) calls only sandbox tools of class read.
//
// Why here, above policy and approval: this is a floor no one may lower.
// If it sat after the policy, a permissive rule would decide first; if it
// sat after approval, a human (or autonomy's fallback) could click past it.
// Nothing after it reads the tier: policy rules do not know how the run was
// triggered, and neither grants nor the autonomy flag are consulted before
// stage 6, so nothing can pass a denial here. It comes after the schema
// stage only because a malformed call is the model's mistake to fix first;
// whichever stage denies, the call is denied.
//
// Bash is the one sandbox tool whose class is decided per call, not per
// tool: a line whose every simple command the read-only catalogue accepts
// (git diff, git log, ls, grep, ...) is of class read, any other line of
// class execute. So a read_only run can look at a repository with the
// shell, and nothing it runs can write, execute or reach out.
//
// A brokered tool reaches a secret and the network, so a read_only run may
// not call it whatever class the operator gave it. The class comes from the
// operator, never from the MCP server; an unknown class is not read, and an
// unknown tier is not trusted. A tool with an unknown class is refused in
// every tier: the frozen record says nothing the gate can trust about what
// the tool does.
func checkTrustTier(c *call) (Decision, bool) {
	t := c.tool
	if t == nil {
		return deny(SourceTrustTier, "tool %s has no frozen class", quote(c.req.ToolName))
	}
	if !t.Class.Valid() {
		return deny(SourceTrustTier, "tool %s has no valid class (%s), so it cannot be called", quote(t.Name), quote(string(t.Class)))
	}
	switch tier := c.run.TrustTier; tier {
	case trust.Trusted:
		return next()
	case trust.ReadOnly:
		if t.ConnectionID != "" {
			return deny(SourceTrustTier, "this run is read_only: tool %s is brokered through a connection, which a read_only run may never use; no approval can change that", quote(t.Name))
		}
		if (t.Class == capability.ClassExecute || t.Class == capability.ClassRead) && t.Name == bashTool {
			// Bash's class is decided per call: read when every simple
			// command of the line is read-only by the catalogue. A Bash
			// frozen as read (a bundle may say so) is still the shell
			// Claude Code runs, so it is judged per call too.
			if ok, why := c.policyCall().BashReadOnly(); !ok {
				return deny(SourceTrustTier, "this run is read_only: this Bash line is of class \"execute\" (%s) and only read commands may run (those the read-only catalogue lists: git diff, git log, ls, grep, ...); no approval can change that", why)
			}
			return next()
		}
		if t.Class != capability.ClassRead {
			return deny(SourceTrustTier, "this run is read_only: tool %s is of class %s and only read tools may run; no approval can change that", quote(t.Name), quote(string(t.Class)))
		}
		return next()
	default:
		return deny(SourceTrustTier, "this run's trust tier %s is unknown, so no tool call can be allowed", quote(string(tier)))
	}
}
