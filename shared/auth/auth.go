// Package auth identifies callers: the operator's admin token, the per-run
// session tokens handed to runners, and (in SSO mode) people signed in
// through an OIDC issuer, whose JWTs package sso verifies into the same
// Principal. auth itself links no OIDC code, so every function can import it.
//
// A run has two bearer credentials, both issued once when it is created:
// the session token, which goes into the sandbox (the hook's credential and
// the model proxy's API key), and the runner token, which stays with the
// runner outside the sandbox: it alone (besides the operator) may report
// model usage for the run's own admissions and end the run, so nothing the
// sandbox holds can lower what the run is charged.
//
// Tokens are 256 random bits behind a recognisable prefix. Only
// their SHA-256 is stored (a token has too much entropy to need a slow
// hash), and comparisons are constant-time. A session token authorises one
// run and nothing else; that scoping is enforced by the API layer, which
// asks Principal.MayActOnRun before it touches a run.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// Kind says what kind of caller a principal is.
type Kind string

// Kinds of principal.
const (
	KindAdmin   Kind = "admin"
	KindSession Kind = "session"
	// KindUser is a person signed in through the OIDC issuer (SSO mode).
	KindUser Kind = "user"
	// KindRunner is a run's runner token: admissions, usage reports and
	// ending its one run.
	KindRunner Kind = "runner"
	// KindTrigger is a trigger's runner key: it may only have the tokens
	// of a run that trigger created issued, once (the runner that picks
	// triggered runs up holds it, outside every sandbox).
	KindTrigger Kind = "trigger"
)

// Roles an SSO user may hold, read from the token's roles claim. They are
// configured in the identity provider: never rename one. Any other value in
// the claim is ignored.
const (
	// RoleAdmin may do everything the operator may.
	RoleAdmin = "admin"
	// RoleApprover may list, read and decide approvals.
	RoleApprover = "approver"
	// RoleMember is a known user with no standing rights of its own; it
	// may still decide approvals on its own personal connections.
	RoleMember = "member"
)

// Principal is an authenticated caller.
type Principal struct {
	Kind Kind
	// Subject names the caller in records: "admin", the run id, or an SSO
	// user's sub.
	Subject string
	// RunID is the one run a session token may act on.
	RunID string
	// Roles are an SSO user's known roles (RoleAdmin, RoleApprover,
	// RoleMember), each at most once; empty for every other kind.
	Roles []string
	// Email is an SSO user's email, lower-cased, when the token carries one
	// its issuer has not marked unverified; "" otherwise.
	Email string
}

// IsAdmin reports whether p is the operator or an SSO user with role admin.
func (p Principal) IsAdmin() bool { return p.Kind == KindAdmin || p.HasRole(RoleAdmin) }

// HasRole reports whether p is an SSO user holding role.
func (p Principal) HasRole(role string) bool {
	return p.Kind == KindUser && slices.Contains(p.Roles, role)
}

// MayActOnRun reports whether p may act on runID's runner-facing endpoints.
func (p Principal) MayActOnRun(runID string) bool {
	return p.Kind == KindAdmin || (p.Kind == KindSession && p.RunID == runID)
}

// MayReportUsage reports whether p may settle runID's own admissions with
// usage it reports, or end the run: the operator or the run's runner token,
// never its session token.
func (p Principal) MayReportUsage(runID string) bool {
	return p.Kind == KindAdmin || (p.Kind == KindRunner && p.RunID == runID)
}

// SessionTokenPrefix starts every session token; RunnerTokenPrefix every
// runner token.
const (
	SessionTokenPrefix = "fbx_sess_"
	RunnerTokenPrefix  = "fbx_run_"
	// TriggerKeyPrefix starts every trigger runner key.
	TriggerKeyPrefix = "fbx_trg_"
)

// Token is a secret bearer token. It never prints.
type Token string

func (Token) String() string               { return "[redacted token]" }
func (Token) GoString() string             { return "[redacted token]" }
func (Token) LogValue() slog.Value         { return slog.StringValue("[redacted token]") }
func (t Token) Reveal() string             { return string(t) }
func (Token) MarshalText() ([]byte, error) { return []byte("[redacted token]"), nil }

// NewSessionToken returns a fresh session token and the hash to store.
func NewSessionToken() (Token, string, error) { return newToken(SessionTokenPrefix) }

// NewRunnerToken returns a fresh runner token and the hash to store.
func NewRunnerToken() (Token, string, error) { return newToken(RunnerTokenPrefix) }

// NewTriggerKey returns a fresh trigger runner key and the hash to store.
func NewTriggerKey() (Token, string, error) { return newToken(TriggerKeyPrefix) }

// MayIssueTokens reports whether p may have runID's tokens issued: the
// operator, an SSO admin, the runner key of the trigger that created the
// run (authentication checked the key against that trigger), or the run's
// launch credential (checked against the run's launch; its one use is
// enforced where the tokens are issued).
func (p Principal) MayIssueTokens(runID string) bool {
	return p.IsAdmin() || ((p.Kind == KindTrigger || p.Kind == KindLaunch) && p.RunID == runID)
}

func newToken(prefix string) (Token, string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("auth: random: %w", err)
	}
	tok := prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return Token(tok), HashToken(tok), nil
}

// HashToken is the stored form of a session token.
func HashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TokenMatches compares a presented token with a stored hash in constant
// time. An empty hash never matches.
func TokenMatches(presented, storedHash string) bool {
	if storedHash == "" || presented == "" {
		return false
	}
	got := HashToken(presented)
	return subtle.ConstantTimeCompare([]byte(got), []byte(storedHash)) == 1
}

// AdminMatches compares a presented token with the admin token in constant
// time. An empty admin token matches nothing.
func AdminMatches(presented, admin string) bool {
	if admin == "" || presented == "" {
		return false
	}
	a := sha256.Sum256([]byte(presented))
	b := sha256.Sum256([]byte(admin))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// Bearer returns the bearer token of a request, or "".
func Bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
		return strings.TrimSpace(h[len(p):])
	}
	return ""
}
