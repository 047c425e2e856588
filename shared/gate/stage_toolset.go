package gate

// Stage 2, frozen tool set: the call must name a tool frozen into the run,
// and a brokered tool's binding must still hold exactly as frozen.
//
// Why here: it is the rug-pull defence. The surface a human approved when
// the run started is the surface the run gets; if an upstream MCP server
// added, withdrew or changed a tool, or the connection was revoked,
// re-authorized or its owner left, the call is refused rather than
// re-negotiated. It must come before the schema stage, because the schema
// to check against is the frozen tool's (a tool that is not frozen has no
// trustworthy schema), and before trust tier and policy, because both judge
// a tool by its frozen class and name: judging a tool the run never froze,
// or one whose upstream definition changed under the same name, would judge
// the wrong thing. Policy and approval cannot catch drift at all: a rule on
// "mcp__jira__*" allows the tool whatever its upstream now does, and a
// human approving a call sees only the call. Grants and autonomy are never
// read before stage 6, so nothing can pass a denial here.
//
// Two sources: capability when the tool is not in the frozen set or the
// connection's tool set drifted from the frozen digest; binding when the
// binding is missing or stale (connection gone, not active, generation
// changed, personal owner inactive).
func checkToolSet(c *call) (Decision, bool) {
	if c.run == nil {
		return deny(SourceCapability, "the run has no frozen tool set, so tool %s is unavailable", quote(c.req.ToolName))
	}
	name := c.req.ToolName
	t, ok := c.run.Tools[name]
	if !ok || t == nil {
		return deny(SourceCapability, "tool %s is not in this run's frozen tool set", quote(name))
	}
	if t.Name != name {
		return deny(SourceCapability, "the frozen record of tool %s is inconsistent, so the tool is unavailable", quote(name))
	}
	c.tool = t
	if t.ConnectionID == "" {
		return next() // a sandbox tool: no binding to verify
	}
	id := t.ConnectionID
	b, ok := c.run.Bindings[id]
	if !ok || b.ConnectionID != id {
		return deny(SourceBinding, "tool %s has no frozen binding to connection %s", quote(name), quote(id))
	}
	live, ok := c.req.Connections[id]
	switch {
	case !ok || !live.Found:
		return deny(SourceBinding, "connection %s of tool %s no longer exists", quote(id), quote(name))
	case live.Status == ConnectionAuthorizationRequired:
		return deny(SourceBinding, "connection %s of tool %s needs re-authorization (its OAuth grant was refused or revoked): its owner runs `fluidbox connections authorize %s`; then start a new run", quote(id), quote(name), id)
	case live.Status != ConnectionActive:
		return deny(SourceBinding, "connection %s of tool %s is not active (status %s)", quote(id), quote(name), quote(live.Status))
	case live.Generation != b.Generation:
		return deny(SourceBinding, "connection %s was re-authorized since this run started (generation %d, frozen %d); start a new run", quote(id), live.Generation, b.Generation)
	case !live.OwnerActive:
		return deny(SourceBinding, "the owner of connection %s is no longer an active member", quote(id))
	case b.ToolSetDigest == "":
		return deny(SourceBinding, "the binding to connection %s has no frozen tool-set digest", quote(id))
	case live.ToolSetDigest != b.ToolSetDigest:
		return deny(SourceCapability, "the tools of connection %s changed since this run started; refresh the connection and start a new run", quote(id))
	}
	return next()
}

// ToolSetDenial is the stage's judgement on its own: the denial of a call
// whose tool is not frozen or whose binding no longer holds, or
// denied=false if the stage passes it. The broker re-verifies an allowed
// call with it right before executing (the call may have waited for a
// human), so the check and its reasons are the gate's own.
func ToolSetDenial(run *Run, req Request) (d Decision, denied bool) {
	d, denied = checkToolSet(&call{run: run, req: req})
	if denied {
		d.Stage = "tool_set"
		d = settle(d)
	}
	return d, denied
}
