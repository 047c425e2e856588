// Package agentsdk holds the end-to-end suite in which a program on the
// real Claude Agent SDK (the npm package @anthropic-ai/claude-agent-sdk,
// pinned in clients/agent-sdk/package-lock.json) runs under fluidbox
// through @fluidbox/claude-agent-sdk (clients/agent-sdk): its model
// requests go through the run's model proxy to a scripted model, and every
// tool call is decided by the gate through the adapter's PreToolUse hook,
// or, for a brokered tool, by tools/call from the adapter's in-process MCP
// server.
//
// The tests carry the build tag e2e and need Node and the built package,
// so `make e2e-agent-sdk` runs them (it runs `npm ci && npm run build` in
// clients/agent-sdk and names that directory in FLUIDBOX_AGENT_SDK_DIR);
// `make test` sees only this file.
package agentsdk
