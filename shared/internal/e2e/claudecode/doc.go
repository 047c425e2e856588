// Package claudecode holds the end-to-end suite in which the real Claude
// Code CLI (the npm package @anthropic-ai/claude-code, pinned in the
// Makefile) runs headless under fluidbox: its model requests go through the
// run's model proxy to a scripted model, and every tool call it makes is
// decided by the gate through `fluidbox hook claude-code`.
//
// The tests carry the build tag e2e and need the CLI, so `make e2e-claude`
// runs them (it installs the CLI with npm into .build/claude and names it in
// FLUIDBOX_CLAUDE); `make test` sees only this file. The package lives under
// shared/internal because the scripted model (shared/internal/scriptedmodel)
// is internal to shared/.
package claudecode
