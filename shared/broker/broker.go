// Package broker is fluidbox's MCP client: it photographs an upstream server's tools and
// calls them, presenting the connection's credential, over Streamable HTTP with the
// official MCP Go SDK. The SDK's types stay inside this package. The SDK speaks the
// 2026-07-28 revision (stateless: server/discover, the version and capabilities in every
// request's _meta, MCP-Protocol-Version, Mcp-Method and Mcp-Name matching the body) to a
// server that offers it and falls back to the 2025-11-25 initialize handshake otherwise.
//
// Guarantees:
//   - The credential goes only into the request headers of the upstream it was given for:
//     redirects are not followed (a redirect would carry it to another origin), and URLs
//     with user info are refused.
//   - No error built here contains the credential, or any text the upstream chose: an
//     upstream can echo the Authorization header in an error body, so UpstreamError is made
//     from the operation, the HTTP status, the JSON-RPC code and fixed words only. A tool
//     list or result that contains the credential is refused with ErrCredentialEcho rather
//     than passed on towards the sandbox.
//   - A 401's or 403's Bearer challenge is read with the SDK's parser; its scopes are
//     kept (UpstreamError.Scopes, ErrInsufficientScope) only when bounded, valid RFC 6749
//     scope tokens that do not contain the credential; any other challenge is ignored.
//   - A Photo's digest depends only on what the tools mean (name, description, input and
//     output schemas, annotations), never on the order the upstream lists them in, its
//     cache hints (ttlMs, cacheScope), _meta or the protocol revision it speaks, so a
//     digest comparison is a sound rug-pull check.
//   - A session lists its tools once: the SDK would answer a second list from the
//     upstream's cache hints, which are its own word and never the broker's.
//   - An upstream's request for input mid-call (elicitation, input_required, or a
//     URLElicitationRequired error) is answered, never followed: a link that is not http or
//     https, or a form asking for a secret, is declined; a link a person has said they
//     finished (Session.Completed) is accepted; anything else is cancelled. Only its mode,
//     a link's scheme, host and path, and the outcome are kept (Session.InputRequests),
//     never part of a Result.
//     Nothing else is declared to the upstream (no roots, no sampling, no tasks), so it
//     can ask for nothing else.
//   - A tool the upstream must run as a task (2025-11-25 tasks, taskSupport required) is
//     called as one and waited for within the caller's ctx (task.go); a session told to
//     defer leaves one still running pending, its MCP session open, for ResumeTask
//     (resume.go). The task's id, status and pollInterval are held to bounds; the task and
//     session ids leave the session only as a TaskHandle, never in an error.
//   - Nothing retries behind the caller's back; the caller's ctx bounds every call, and
//     DefaultHTTPTimeout bounds each HTTP request when ctx has no deadline.
package broker

import (
	"errors"
	"strconv"
)

// Sentinel errors, carried by *UpstreamError (errors.Is).
var (
	// ErrUnauthorized: the upstream refused the credential (HTTP 401).
	ErrUnauthorized = errors.New("broker: upstream refused the credential")
	// ErrForbidden: the upstream took the credential but refused the request
	// (HTTP 403): the credential lacks a permission, or the upstream refuses
	// for its own reasons. Replacing the credential may not help.
	ErrForbidden = errors.New("broker: upstream refused the request")
	// ErrInsufficientScope: the upstream refused the request (HTTP 403) with
	// a Bearer challenge naming the scopes it needs (UpstreamError.Scopes),
	// its error "insufficient_scope" (RFC 6750 3.1) or absent (as the MCP Go
	// SDK's auth.RequireBearerToken sends it): only an authorization that
	// asks for them helps (MCP's step-up authorization).
	ErrInsufficientScope = errors.New("broker: upstream asks for more scopes")
	// ErrAddressRefused: the upstream's address is one the broker may not
	// reach (loopback, link-local, private, unique-local), found before any
	// packet was sent to it.
	ErrAddressRefused = errors.New("broker: upstream address refused")
	// ErrUnknownTool: the upstream does not offer the tool, whether it said so with a
	// protocol error (Go SDK servers) or an isError result (TypeScript SDK servers).
	ErrUnknownTool = errors.New("broker: upstream does not offer the tool")
	// ErrProtocol: the upstream answered with a JSON-RPC error.
	ErrProtocol = errors.New("broker: upstream protocol error")
	// ErrTransport: the upstream could not be reached, or answered with an HTTP error.
	ErrTransport = errors.New("broker: upstream unreachable")
	// ErrInvalidResponse: the upstream's answer is unusable (duplicate or unnamed tools,
	// too many tools, a cursor that loops, an oversized response).
	ErrInvalidResponse = errors.New("broker: invalid upstream response")
	// ErrCredentialEcho: the upstream's answer contains the credential; it is withheld.
	ErrCredentialEcho = errors.New("broker: upstream response contains the credential")
	// ErrInvalidRequest: the call was refused before reaching the upstream (bad URL,
	// invalid credential, empty tool name).
	ErrInvalidRequest = errors.New("broker: invalid request")
)

// UpstreamError is a failed exchange with an upstream MCP server. Its text is built only
// from Op, Status, Code and Msg, which this package writes; it never carries the
// credential or upstream-supplied text.
type UpstreamError struct {
	Op     string // "connect", "tools/list", "tools/call"
	Status int    // HTTP status of the failing response, 0 if none
	Code   int64  // JSON-RPC error code, 0 if not a protocol error
	Msg    string // fixed description written by this package
	Err    error  // one of the sentinels above, or a context error
	// Scopes are the scopes the Bearer challenge of a 401 or 403 named
	// (its scope parameter), set only when every one is an RFC 6749 scope
	// token within the bounds of ParseScopes and none contains the
	// credential. The upstream chose them: they are never part of the
	// error's text.
	Scopes []string
}

func (e *UpstreamError) Error() string {
	s := "broker: " + e.Op + ": " + e.Msg
	if e.Status != 0 {
		s += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	if e.Code != 0 {
		s += " (JSON-RPC " + strconv.FormatInt(e.Code, 10) + ")"
	}
	return s
}

func (e *UpstreamError) Unwrap() error { return e.Err }
