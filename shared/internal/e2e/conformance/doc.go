// Package conformance holds the end-to-end suite that runs fluidbox's OAuth
// flow, client side, against the MCP project's conformance suite (the npm
// package @modelcontextprotocol/conformance, pinned in the Makefile): each
// of its auth scenarios starts an MCP server and an authorization server
// (dynamic registration, client ID metadata documents, pre-registered
// clients, the metadata discovery variants, token endpoint authentication,
// scopes) and checks what its client did. Here the client is the real
// control plane: a connection is created through the API, authorized with
// POST /v1/connections/{id}/authorize, the authorization URL (fluidbox's
// authorize redirect, which sets the browser's nonce cookie) followed as a
// browser would to the authorization server and back to fluidbox's
// callback with that cookie, and a tool called through the gate.
//
// Every server listens on 127.0.0.1: the Go ones by httptest, the suite's
// (node's listen(port) binds every interface) by a `node -r` preload that
// pins each listener to 127.0.0.1. The browser here dials loopback only.
//
// The tests carry the build tag e2e and need Node and the suite, so `make
// e2e-conformance` runs them; `make test` sees only this file. Scenarios
// fluidbox does not pass are listed in baseline.yml, each with its reason.
package conformance
