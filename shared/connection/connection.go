// Package connection manages connections (upstream MCP servers reached with
// a sealed credential) and brokers their tools' calls.
//
// What it guarantees:
//   - A credential is sealed the moment it arrives (seal.Context{connection
//     id, authorization generation}) and is never returned, logged or
//     stored in the clear. It is opened only to talk to the upstream it was
//     given for, and only in a process holding a Sealer that can Open (in
//     AWS, the broker function: the only one with kms:Decrypt).
//   - Replacing a credential moves the generation by one and re-seals, as a
//     compare-and-swap on the old generation: every run bound to the old
//     generation is refused from its next call on (binding).
//   - Tool classes come from the operator. An upstream's annotations may only
//     tighten them (destructiveHint -> at least write, openWorldHint -> at
//     least egress); a tool the operator did not classify is write.
//   - Before any secret is touched for a call, the binding is re-verified
//     against the live connection and the gate is asked on everything it
//     knows without the secret; a call the gate would deny anyway (read_only
//     run, revoked or re-authorized connection, schema, policy, budget)
//     never reaches the upstream. Then the upstream's current tool list is
//     compared with the frozen photograph, so a rug pull is denied with
//     source capability even if nobody refreshed the connection.
//   - An OAuth connection's client (and its secret) is presented only to
//     the authorization server it belongs to: the one it was registered at,
//     or, for the operator's client, the issuer named with it at creation.
//     A registered client is never taken to another server: the next
//     authorization registers anew there.
//   - An OAuth authorization response is taken only at the redirect URI of
//     the authorization server its state was made for (mix-up, RFC 9700
//     4.4), with the issuer RFC 9207 requires where advertised, and only
//     from the browser the authorize redirect gave the state's nonce to.
//   - An upstream refusing a call for want of OAuth scopes (a 403
//     insufficient_scope, or a 401 after a refresh, naming scopes the
//     authorization did not request) has them recorded on the connection,
//     bounded and as a
//     compare-and-swap union, and the call refused (binding) with a reason
//     to re-authorize that names no scope and nothing of the token; the
//     connection stays active at its generation until the re-authorization,
//     which asks for the union, completes.
//   - An allowed call is executed at most once (a conditional claim on the
//     call record before the upstream is called), with a bounded timeout;
//     tool.brokered records its latency and the digest of its result.
package connection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/oauth"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Sentinel errors; the API maps them to its codes.
var (
	ErrNotFound = errors.New("connection: not found")
	// ErrForbidden: the caller may not do this to this connection.
	ErrForbidden = errors.New("connection: forbidden")
	// ErrNameTaken: another connection has the name.
	ErrNameTaken = errors.New("connection: name taken")
	// ErrRevoked: the connection is revoked; nothing more can be done with it.
	ErrRevoked = errors.New("connection: revoked")
	// ErrChanged: the connection changed under the request (a concurrent
	// credential replacement or revocation); retry.
	ErrChanged = errors.New("connection: changed concurrently")
	// ErrNoSealer: this process has no sealer; connections are unavailable.
	ErrNoSealer = errors.New("connection: no sealer configured")
)

// InvalidError is a request the caller must fix.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Options tune a Service.
type Options struct {
	Now func() time.Time
	// Egress decides which addresses connection URLs may reach, at creation
	// and at every dial; nil refuses every internal address.
	Egress *egress.Guard
	// UpstreamToolsTTL is how long the broker may trust its last look at an
	// upstream's tool list (FLUIDBOX_UPSTREAM_TOOLS_TTL_SECONDS); 0 looks on
	// every call.
	UpstreamToolsTTL time.Duration
	// ListTimeout bounds a refresh or a call's look at the upstream's tools;
	// CallTimeout bounds the tool call itself. Both fit inside API
	// Gateway's 29 s together.
	ListTimeout time.Duration
	CallTimeout time.Duration
	// OAuthClient talks to OAuth providers (discovery, registration, token
	// requests); nil is a client dialling through Egress.
	OAuthClient *http.Client
	// Logger receives what the OAuth refresh has to say (never a token).
	Logger *slog.Logger
	// InputTTL is how long a brokered call waits for a person to open a
	// link its upstream asked for (elicitation.DefaultTTL when zero).
	InputTTL time.Duration
}

// Default timeouts.
const (
	DefaultListTimeout = 8 * time.Second
	DefaultCallTimeout = 15 * time.Second
)

// Service manages connections.
type Service struct {
	st     *store.Store
	sealer seal.Sealer
	opts   Options
	tools  *toolCache
}

// NewService returns a connection service. A nil sealer is allowed: every
// operation that needs one then fails with ErrNoSealer (fail closed).
func NewService(st *store.Store, sealer seal.Sealer, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ListTimeout <= 0 {
		o.ListTimeout = DefaultListTimeout
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.InputTTL <= 0 {
		o.InputTTL = elicitation.DefaultTTL
	}
	if o.OAuthClient == nil {
		// One client, so its transport pools connections across requests
		// (a transport per request would keep every idle one open). It
		// dials through the same guard as the broker's MCP traffic (the
		// probe of the connection's URL and the token requests go wherever
		// its metadata says), so an OAuth connection cannot point inside
		// either; and it uses no proxy.
		o.OAuthClient = oauth.NewClient(&http.Transport{
			DialContext: o.Egress.DialContext, TLSHandshakeTimeout: 10 * time.Second,
			IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true,
		})
	}
	return &Service{st: st, sealer: sealer, opts: o, tools: newToolCache()}
}

// CreateRequest is the body of POST /v1/connections.
type CreateRequest struct {
	Name        string            `json:"name"`
	URL         string            `json:"url"`
	Kind        string            `json:"kind"`
	Credential  *seal.Credential  `json:"credential"`
	ToolClasses map[string]string `json:"tool_classes,omitempty"`
	// OAuth is set instead of Credential for {"type":"oauth",...}.
	OAuth *OAuthRequest `json:"-"`
}

// CredentialRequest is the body of PUT /v1/connections/{id}/credential.
type CredentialRequest struct {
	Credential *seal.Credential `json:"credential"`
}

// View is a connection as the API shows it: never the credential.
type View struct {
	ID                      string            `json:"id"`
	Name                    string            `json:"name"`
	URL                     string            `json:"url"`
	Kind                    string            `json:"kind"`
	Owner                   string            `json:"owner"`
	Status                  string            `json:"status"`
	AuthorizationGeneration int               `json:"authorization_generation"`
	CredentialType          string            `json:"credential_type"`
	ToolClasses             map[string]string `json:"tool_classes"`
	// StepUpScopes are the scopes the upstream asked for (insufficient_scope)
	// that the connection's authorization did not request: the next
	// authorization asks for them.
	StepUpScopes []string `json:"step_up_scopes,omitempty"`
	// OAuth is an OAuth connection's client settings.
	OAuth       *OAuthView `json:"oauth,omitempty"`
	Digest      string     `json:"digest,omitempty"`
	RefreshedAt string     `json:"refreshed_at,omitempty"`
	CreatedAt   string     `json:"created_at"`
}

func viewOf(c store.Connection) View {
	classes := c.ToolClasses
	if classes == nil {
		classes = map[string]string{}
	}
	return View{
		ID: c.ID, Name: c.Name, URL: c.URL, Kind: c.Kind, Owner: c.Owner, Status: c.Status,
		AuthorizationGeneration: c.Generation, CredentialType: c.CredentialType, ToolClasses: classes,
		Digest: c.PhotoDigest, RefreshedAt: c.RefreshedAt, CreatedAt: c.CreatedAt,
		StepUpScopes: pendingScopes(c), OAuth: oauthView(c),
	}
}

// Limits.
const (
	maxNameLen     = 32
	maxURLLen      = 2048
	maxToolClasses = 1000
	maxToolNameLen = 128
)

// ValidName reports whether name can name a connection: [a-z0-9_-]{1,32},
// without "__" and not ending in "_", so that mcp__<name>__<tool> splits
// back into one connection and one tool.
func ValidName(name string) bool {
	if name == "" || len(name) > maxNameLen || strings.Contains(name, "__") || strings.HasSuffix(name, "_") {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// checkURL accepts an absolute https URL (http only to loopback, where
// loopback is allowed) without user info or fragment, whose host is not a
// refused address. Its messages never quote the URL (a query may carry a
// token).
func (s *Service) checkURL(raw string) error {
	if raw == "" {
		return invalid("url", "is required")
	}
	if len(raw) > maxURLLen {
		return invalid("url", "must be at most %d bytes", maxURLLen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return invalid("url", "is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return invalid("url", "must be an http or https URL")
	case u.Host == "":
		return invalid("url", "has no host")
	case u.User != nil:
		return invalid("url", "must not carry user info; put the secret in the credential")
	case u.Fragment != "":
		return invalid("url", "must not have a fragment")
	}
	if err := s.opts.Egress.CheckURL(u); err != nil {
		return invalid("url", "%s", strings.TrimPrefix(err.Error(), egress.ErrRefused.Error()+": "))
	}
	return nil
}

func checkClasses(classes map[string]string) error {
	if len(classes) > maxToolClasses {
		return invalid("tool_classes", "at most %d tools", maxToolClasses)
	}
	for name, class := range classes {
		if name == "" || len(name) > maxToolNameLen {
			return invalid("tool_classes", "tool names must be 1 to %d bytes", maxToolNameLen)
		}
		if !capability.Class(class).Valid() {
			return invalid("tool_classes", "tool %q: class must be read, write, execute or egress", name)
		}
	}
	return nil
}

// mayManage says whether who may change (replace the credential of, refresh)
// c. A personal connection is its owner's custody: only the owner. A shared
// connection: admins.
func mayManage(who auth.Principal, c store.Connection) bool {
	if c.Kind == store.ConnectionShared {
		return who.IsAdmin()
	}
	return who.Subject != "" && who.Subject == c.Owner && who.Kind != auth.KindSession
}

// maySee says whether who may read c: admins see every connection, a member
// the shared ones and their own.
func maySee(who auth.Principal, c store.Connection) bool {
	if who.Kind == auth.KindSession {
		return false
	}
	return who.IsAdmin() || c.Kind == store.ConnectionShared || c.Owner == who.Subject
}

// Create validates req, seals its credential for generation 1 and stores the
// connection.
func (s *Service) Create(ctx context.Context, who auth.Principal, req CreateRequest) (View, error) {
	if s.sealer == nil {
		return View{}, ErrNoSealer
	}
	if !ValidName(req.Name) {
		return View{}, invalid("name", "must be 1 to %d of a-z, 0-9, _ and -, without \"__\" and not ending in \"_\"", maxNameLen)
	}
	if err := s.checkURL(req.URL); err != nil {
		return View{}, err
	}
	switch req.Kind {
	case store.ConnectionPersonal:
	case store.ConnectionShared:
		if !who.IsAdmin() {
			return View{}, fmt.Errorf("%w: only an admin may create a shared connection", ErrForbidden)
		}
	default:
		return View{}, invalid("kind", "must be %q or %q", store.ConnectionPersonal, store.ConnectionShared)
	}
	if who.Kind == auth.KindSession || who.Subject == "" {
		return View{}, fmt.Errorf("%w: a session may not create connections", ErrForbidden)
	}
	if err := checkClasses(req.ToolClasses); err != nil {
		return View{}, err
	}
	if req.OAuth != nil && req.Credential == nil {
		return s.createOAuth(ctx, who, req)
	}
	if req.Credential == nil {
		return View{}, invalid("credential", "is required")
	}
	if err := req.Credential.Validate(); err != nil {
		return View{}, invalid("credential", "is not valid: %s", strings.TrimPrefix(err.Error(), seal.ErrInvalidCredential.Error()+": "))
	}
	id := newConnectionID()
	sealed, err := seal.SealCredential(ctx, s.sealer, *req.Credential, seal.Context{ConnectionID: id, Generation: 1})
	if err != nil {
		return View{}, fmt.Errorf("connection: seal: %w", err)
	}
	return s.put(ctx, store.Connection{
		ID: id, Name: req.Name, URL: req.URL, Kind: req.Kind, Owner: who.Subject, Status: store.ConnectionActive,
		Generation: 1, Sealed: sealed, CredentialType: req.Credential.Type, ToolClasses: req.ToolClasses,
	})
}

func newConnectionID() string { return ids.New("con_") }

// put stores a new connection, stamped now.
func (s *Service) put(ctx context.Context, c store.Connection) (View, error) {
	now := store.FormatTime(s.opts.Now())
	c.CreatedAt, c.UpdatedAt = now, now
	err := s.st.PutConnection(ctx, c)
	if errors.Is(err, store.ErrNameTaken) {
		return View{}, fmt.Errorf("%w: %q", ErrNameTaken, c.Name)
	}
	if err != nil {
		return View{}, err
	}
	return viewOf(c), nil
}

// get reads a connection by id (or name) that who may see.
func (s *Service) get(ctx context.Context, who auth.Principal, ref string) (store.Connection, error) {
	id := ref
	if !ids.Valid("con_", ref) {
		if !ValidName(ref) {
			return store.Connection{}, ErrNotFound
		}
		var err error
		if id, err = s.st.ConnectionIDByName(ctx, ref); errors.Is(err, store.ErrNotFound) {
			return store.Connection{}, ErrNotFound
		} else if err != nil {
			return store.Connection{}, err
		}
	}
	c, err := s.st.GetConnection(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Connection{}, ErrNotFound
	}
	if err != nil {
		return store.Connection{}, err
	}
	if !maySee(who, c) {
		// Not revealing that another member's personal connection exists.
		return store.Connection{}, ErrNotFound
	}
	return c, nil
}

// Get reads one connection.
func (s *Service) Get(ctx context.Context, who auth.Principal, ref string) (View, error) {
	c, err := s.get(ctx, who, ref)
	if err != nil {
		return View{}, err
	}
	return viewOf(c), nil
}

// Page is one page of the connections a caller may see, newest first.
type Page struct {
	Connections []View
	// Next continues the listing; "" on the last page.
	Next string
}

// List returns one page of the connections who may see (shared ones and
// their own; an admin, all of them).
func (s *Service) List(ctx context.Context, who auth.Principal, q store.ListQuery) (Page, error) {
	p, err := s.st.ListConnectionPage(ctx, q, func(c store.Connection) bool { return maySee(who, c) })
	if err != nil {
		return Page{}, err
	}
	out := Page{Connections: []View{}, Next: p.Next}
	for _, c := range p.Connections {
		out.Connections = append(out.Connections, viewOf(c))
	}
	return out, nil
}

// ReplaceCredential seals cred for the next generation and stores it,
// conditioned on the generation it read: runs bound to the old generation
// are refused from their next call on.
func (s *Service) ReplaceCredential(ctx context.Context, who auth.Principal, ref string, cred *seal.Credential) (View, error) {
	if s.sealer == nil {
		return View{}, ErrNoSealer
	}
	if cred == nil {
		return View{}, invalid("credential", "is required")
	}
	if err := cred.Validate(); err != nil {
		return View{}, invalid("credential", "is not valid: %s", strings.TrimPrefix(err.Error(), seal.ErrInvalidCredential.Error()+": "))
	}
	c, err := s.get(ctx, who, ref)
	if err != nil {
		return View{}, err
	}
	if !mayManage(who, c) {
		return View{}, fmt.Errorf("%w: only the owner of a personal connection (an admin for a shared one) may replace its credential", ErrForbidden)
	}
	if c.CredentialType == CredentialOAuth {
		return View{}, invalid("credential", "an OAuth connection is re-authorized with POST /v1/connections/%s/authorize, not replaced", c.ID)
	}
	if c.Status != store.ConnectionActive {
		return View{}, ErrRevoked
	}
	sealed, err := seal.SealCredential(ctx, s.sealer, *cred, seal.Context{ConnectionID: c.ID, Generation: c.Generation + 1})
	if err != nil {
		return View{}, fmt.Errorf("connection: seal: %w", err)
	}
	updated, err := s.st.ReplaceConnectionCredential(ctx, c.ID, c.Generation, sealed, cred.Type, store.FormatTime(s.opts.Now()))
	if errors.Is(err, store.ErrConnectionChanged) {
		return View{}, ErrChanged
	}
	if err != nil {
		return View{}, err
	}
	s.tools.forget(c.ID)
	return viewOf(updated), nil
}

// Revoke revokes a connection and deletes its sealed credential. The owner
// of a personal connection and admins may revoke (revoking only ever takes
// access away). Revoking twice is harmless.
func (s *Service) Revoke(ctx context.Context, who auth.Principal, ref string) (View, error) {
	c, err := s.get(ctx, who, ref)
	if err != nil {
		return View{}, err
	}
	if !who.IsAdmin() && !mayManage(who, c) {
		return View{}, fmt.Errorf("%w: only the owner or an admin may revoke a connection", ErrForbidden)
	}
	updated, err := s.st.RevokeConnection(ctx, c.ID, who.Subject, store.FormatTime(s.opts.Now()))
	if err != nil {
		return View{}, err
	}
	s.tools.forget(c.ID)
	return viewOf(updated), nil
}

// classOf is a tool's class: the operator's, tightened (never loosened) by
// the upstream's annotations. An unclassified tool is write: it acts
// through a credential on a system outside the sandbox, and nothing
// trustworthy says it only reads; write is refused by read_only runs (as
// every brokered tool is) and is what a policy author expects to have to
// allow explicitly. Absent hints are no claim and change nothing (MCP's
// own defaults for absent hints would make every tool non-read and the
// operator's word meaningless); readOnlyHint never loosens.
func classOf(operator string, ann *broker.Annotations) capability.Class {
	class := capability.Class(operator)
	if !class.Valid() {
		class = capability.ClassWrite
	}
	if ann == nil {
		return class
	}
	if ann.DestructiveHint != nil && *ann.DestructiveHint {
		class = tighter(class, capability.ClassWrite)
	}
	if ann.OpenWorldHint != nil && *ann.OpenWorldHint {
		class = tighter(class, capability.ClassEgress)
	}
	return class
}

// restriction orders classes from least to most restricted.
var restriction = []capability.Class{capability.ClassRead, capability.ClassEgress, capability.ClassWrite, capability.ClassExecute}

func tighter(a, b capability.Class) capability.Class {
	if slices.Index(restriction, b) > slices.Index(restriction, a) {
		return b
	}
	return a
}
