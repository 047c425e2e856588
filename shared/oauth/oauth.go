// Package oauth is fluidbox's side of the MCP authorization flow (MCP
// 2025-11-25 "Authorization"), as a client acting for a member: discovery of
// the upstream's protected resource metadata (RFC 9728) and of its
// authorization server (RFC 8414 or OpenID discovery), client registration,
// client registration in the order the specification gives (pre-registered,
// a client ID metadata document, dynamic registration per RFC 7591),
// the authorization code grant with PKCE S256 and the resource indicator
// (RFC 8707), the issuer check of the response (RFC 9207), and the refresh
// grant. The protocol itself is the MCP Go SDK's (auth, oauthex) and
// golang.org/x/oauth2's; this package chooses, orders and checks.
//
// Unlike the SDK's AuthorizationCodeHandler, which runs the whole flow in
// one process while a browser is open, fluidbox splits it: Begin produces
// the authorization URL in one request, Exchange redeems the code in
// another (possibly another Lambda instance), with the state, the PKCE
// verifier and the discovered endpoints carried in between by the caller.
//
// Guarantees:
//   - No error built here carries a token, a code, a verifier, a client
//     secret or any text the provider chose: errors are fixed words, the
//     provider's OAuth error code (when it is a registered one) and an
//     HTTP status. The SDK's and oauth2's own error texts can quote response
//     bodies, so they are never wrapped into the returned error's text.
//   - Discovery fails closed: no protected resource metadata whose resource
//     matches the server, no authorization server metadata with PKCE S256,
//     an issuer that is not an issuer identifier, an insecure endpoint, one
//     with a fragment or whose query holds a parameter fluidbox sends, or
//     discovered scopes that are not a bounded list of RFC 6749 scope
//     tokens, and there is no flow.
//   - What a provider chooses and fluidbox keeps is bounded: a registered
//     client's id, secret and authentication method, and a refresh token.
//   - Every token request (the code exchange and each refresh) carries the
//     resource the tokens are for.
//   - Mix-up (RFC 9700 section 4.4): a client of one authorization server
//     authorizes with that server's own redirect URI (Site.RedirectURIFor);
//     the one client valid at every server, fluidbox's client ID metadata
//     document, is offered only to servers that advertise RFC 9207's iss,
//     which CheckIssuer then requires.
package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/fluidbox/fluidbox/shared/broker"
)

// Sentinel errors.
var (
	// ErrDiscovery: the upstream's authorization metadata could not be found
	// or failed its checks.
	ErrDiscovery = errors.New("oauth: discovery failed")
	// ErrRegistration: no client could be registered with the
	// authorization server (no pre-registered client and no registration
	// endpoint, or registration refused).
	ErrRegistration = errors.New("oauth: client registration failed")
	// ErrIssuer: the authorization response's iss does not match (RFC 9207).
	ErrIssuer = errors.New("oauth: authorization response issuer mismatch")
	// ErrGrant: the authorization server refused the grant for good
	// (invalid_grant and its kin: the code or refresh token is spent,
	// expired or revoked). Only a new authorization helps.
	ErrGrant = errors.New("oauth: grant refused")
	// ErrToken: a token request failed otherwise (unreachable, 5xx, an
	// unusable answer); retrying later may help.
	ErrToken = errors.New("oauth: token request failed")
)

// Error is a failed exchange with the provider. Its text holds only
// fixed words, a registered OAuth error code and the HTTP status.
type Error struct {
	Op     string // "discover", "register", "exchange", "refresh"
	Msg    string // fixed words written by this package
	Code   string // the OAuth error code, when it is a registered one
	Status int
	Err    error // a sentinel above
}

func (e *Error) Error() string {
	s := "oauth: " + e.Op + ": " + e.Msg
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Discovery is what the upstream and its authorization server say about
// how to authorize: everything later steps need, none of it secret.
type Discovery struct {
	// Resource is the canonical URI of the MCP server the tokens are for
	// (the RFC 8707 resource), as its protected resource metadata names it.
	Resource string `json:"resource"`
	Issuer   string `json:"issuer"`
	AuthURL  string `json:"authorization_endpoint"`
	TokenURL string `json:"token_endpoint"`
	// RegistrationURL is the RFC 7591 endpoint, "" when none.
	RegistrationURL string `json:"registration_endpoint,omitempty"`
	// ClientIDMetadata: the server takes client ID metadata documents (a
	// client_id that is the HTTPS URL of the client's metadata).
	ClientIDMetadata bool `json:"client_id_metadata_document_supported,omitempty"`
	// IssParameter: the server advertises RFC 9207's iss parameter.
	IssParameter bool `json:"iss_parameter,omitempty"`
	// OpenID: the server is an OpenID provider (its scopes_supported names
	// openid), which grants offline_access only with prompt=consent (OpenID
	// Connect Core 1.0 section 11).
	OpenID bool `json:"openid,omitempty"`
	// AuthMethods are the token endpoint's client authentication methods.
	AuthMethods []string `json:"auth_methods,omitempty"`
	// Scopes are the scopes to ask for: the challenge's, else the
	// resource's scopes_supported (plus offline_access when the server
	// offers it, for a refresh token).
	Scopes []string `json:"scopes,omitempty"`
}

// maxProbeBody bounds what is read of the unauthenticated probe's answer.
const maxProbeBody = 64 << 10

// Discover finds how to authorize against the MCP server at serverURL: it
// sends an unauthenticated initialize (and, when the server lets the
// handshake through, a tools/list), reads the WWW-Authenticate challenge
// of the 401 (resource_metadata, scope), fetches the protected resource
// metadata from the challenge's URL or the well-known URLs in the order the
// MCP specification gives, and then the authorization server's metadata.
// scopes, when given, replace the discovered ones.
func Discover(ctx context.Context, hc *http.Client, serverURL string, scopes []string) (Discovery, error) {
	fail := func(msg string) (Discovery, error) {
		return Discovery{}, &Error{Op: "discover", Msg: msg, Err: ErrDiscovery}
	}
	prm, challenges, err := resourceMetadata(ctx, hc, serverURL)
	if err != nil {
		return Discovery{}, err
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], hc)
	if err != nil || asm == nil {
		return fail("no usable authorization server metadata (RFC 8414 or OpenID discovery)")
	}
	if !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		return fail("the authorization server does not support PKCE S256")
	}
	if !IssuerOK(asm.Issuer) {
		return fail("the authorization server's issuer is not an issuer identifier (RFC 8414 section 2)")
	}
	if !endpointOK(asm.AuthorizationEndpoint, authorizationParams) || !endpointOK(asm.TokenEndpoint, tokenParams) {
		return fail("an authorization server endpoint is not HTTPS (or loopback), has a fragment, or its query holds a parameter fluidbox sends")
	}
	if asm.RegistrationEndpoint != "" && !endpointOK(asm.RegistrationEndpoint, nil) {
		asm.RegistrationEndpoint = ""
	}
	d := Discovery{
		Resource: prm.Resource, Issuer: asm.Issuer,
		AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint, RegistrationURL: asm.RegistrationEndpoint,
		IssParameter: asm.AuthorizationResponseIssParameterSupported, AuthMethods: asm.TokenEndpointAuthMethodsSupported,
		ClientIDMetadata: asm.ClientIDMetadataDocumentSupported, OpenID: slices.Contains(asm.ScopesSupported, "openid"),
	}
	switch {
	case len(scopes) > 0:
		d.Scopes = slices.Clone(scopes)
	default:
		// The server chose these (its challenge's scope, else its
		// scopes_supported): they are stored on the connection, asked for
		// and shown, so they are held to the bounds of the scopes a
		// challenge may ask for, like the operator's.
		found := challengeParam(challenges, "scope")
		if found == "" {
			found = strings.Join(prm.ScopesSupported, " ")
		}
		var ok bool
		if d.Scopes, ok = broker.ParseScopes(found); !ok {
			return fail(fmt.Sprintf("the MCP server's scopes (its challenge's, else its scopes_supported) are not at most %d RFC 6749 scope tokens; give the connection its scopes", broker.MaxScopes))
		}
	}
	if slices.Contains(asm.ScopesSupported, "offline_access") && !slices.Contains(d.Scopes, "offline_access") {
		// fluidbox keeps the refresh token sealed and refreshes where the
		// secret lives (SEP-2207).
		d.Scopes = append(d.Scopes, "offline_access")
	}
	return d, nil
}

// resourceMetadata is the protected resource metadata (RFC 9728) of the
// MCP server at serverURL, found from the challenge of an unauthenticated
// request or at the well-known URLs, whose resource names the server and
// which names an authorization server; and the challenges of the probe.
func resourceMetadata(ctx context.Context, hc *http.Client, serverURL string) (*oauthex.ProtectedResourceMetadata, []oauthex.Challenge, error) {
	fail := func(msg string) (*oauthex.ProtectedResourceMetadata, []oauthex.Challenge, error) {
		return nil, nil, &Error{Op: "discover", Msg: msg, Err: ErrDiscovery}
	}
	challenges, status, err := probe(ctx, hc, serverURL)
	if err != nil {
		return fail("the MCP server could not be reached")
	}
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		// A server that answers without a token does not take OAuth; and
		// anything but the challenge leaves nothing to discover from.
		return nil, nil, &Error{Op: "discover", Msg: "the MCP server did not ask for authorization", Status: status, Err: ErrDiscovery}
	}
	for _, u := range metadataURLs(challengeParam(challenges, "resource_metadata"), serverURL) {
		m, err := oauthex.GetProtectedResourceMetadata(ctx, u.url, u.resource, hc)
		if err != nil || m == nil {
			continue
		}
		if len(m.AuthorizationServers) == 0 {
			return fail("the protected resource metadata names no authorization server")
		}
		return m, challenges, nil
	}
	// The 2025-03-26 fallback (the server's origin is the authorization
	// server, with guessed endpoints) is not taken: without metadata whose
	// resource names this server, nothing binds the tokens to it.
	return fail("no protected resource metadata for this MCP server (RFC 9728)")
}

// AuthorizationServer is the issuer the MCP server at serverURL names now
// (the first of its protected resource metadata's authorization_servers):
// a connection whose upstream moved to another authorization server needs
// a new client there and a new authorization (MCP 2026-07-28).
func AuthorizationServer(ctx context.Context, hc *http.Client, serverURL string) (string, error) {
	prm, _, err := resourceMetadata(ctx, hc, serverURL)
	if err != nil {
		return "", err
	}
	return prm.AuthorizationServers[0], nil
}

// The probe's requests: the handshake, and an operation.
const (
	probeInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fluidbox-broker","version":"1"}}}`
	probeToolsList  = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	// probeDiscover is the stateless handshake of MCP 2026-07-28
	// (server/discover, the version and client in _meta), for a server
	// that refuses initialize.
	probeDiscover = `{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"fluidbox-broker","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	maxSessionID  = 256
)

// probe sends an unauthenticated MCP initialize to serverURL and returns
// the challenges of its answer and its status. A server may let the
// handshake through and ask for a token only for operations (the MCP
// conformance suite's step-up servers do): when initialize succeeds, a
// tools/list in the session it opened is what is answered. A server of
// the 2026-07-28 revision only may refuse initialize outright: then its
// stateless server/discover is what is answered.
func probe(ctx context.Context, hc *http.Client, serverURL string) ([]oauthex.Challenge, int, error) {
	status, h, err := probePost(ctx, hc, serverURL, probeInitialize, "", nil)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case status >= 200 && status < 300:
		sid := h.Get("Mcp-Session-Id")
		if len(sid) > maxSessionID || !printableASCII(sid) {
			sid = ""
		}
		if status, h, err = probePost(ctx, hc, serverURL, probeToolsList, sid, nil); err != nil {
			return nil, 0, err
		}
	case status != http.StatusUnauthorized && status != http.StatusForbidden:
		stateless := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
		if status, h, err = probePost(ctx, hc, serverURL, probeDiscover, "", stateless); err != nil {
			return nil, 0, err
		}
	}
	values := h.Values("WWW-Authenticate")
	n := 0
	for _, v := range values {
		n += len(v)
	}
	if n > broker.MaxChallengeBytes {
		// Not parsed (the parser is quadratic in commas, and the header may
		// be megabytes): the well-known URLs remain.
		return nil, status, nil
	}
	cs, err := oauthex.ParseWWWAuthenticate(values)
	if err != nil {
		cs = nil // an unparsable challenge: the well-known URLs remain
	}
	return cs, status, nil
}

func probePost(ctx context.Context, hc *http.Client, serverURL, body, session string, headers map[string]string) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := noRedirects(hc).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	_, _ = readLimited(resp.Body, maxProbeBody)
	return resp.StatusCode, resp.Header, nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// challengeParam is a Bearer challenge's parameter, or "".
func challengeParam(cs []oauthex.Challenge, name string) string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params[name] != "" {
			return c.Params[name]
		}
	}
	return ""
}

type metadataURL struct{ url, resource string }

// metadataURLs are the places to look for the protected resource metadata,
// in the MCP specification's order: the challenge's resource_metadata, the
// well-known URL with the endpoint's path inserted, the well-known URL at
// the root (whose resource is then the origin).
func metadataURLs(fromChallenge, serverURL string) []metadataURL {
	var out []metadataURL
	if fromChallenge != "" {
		out = append(out, metadataURL{fromChallenge, serverURL})
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return out
	}
	m := *u
	m.RawQuery, m.Fragment = "", ""
	if p := strings.TrimLeft(u.Path, "/"); p != "" {
		m.Path = "/.well-known/oauth-protected-resource/" + p
		out = append(out, metadataURL{m.String(), serverURL})
	}
	m.Path = "/.well-known/oauth-protected-resource"
	origin := url.URL{Scheme: u.Scheme, Host: u.Host}
	out = append(out, metadataURL{m.String(), origin.String()})
	return out
}

// secureURL: https, or http to a loopback host (tests and local
// development; the SDK applies the same rule to the metadata URLs).
func secureURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return false
	}
	if u.Scheme == "https" {
		return true
	}
	if u.Scheme != "http" {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// IssuerOK: raw can be an authorization server's issuer identifier (RFC
// 8414 section 2): https (http to loopback), no credentials, query or
// fragment (not even an empty one).
func IssuerOK(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && secureURL(raw) && u.RawQuery == "" && !u.ForceQuery && !strings.Contains(raw, "#")
}

// The parameters fluidbox puts in an authorization request (RFC 6749
// 4.1.1, RFC 7636, RFC 8707, OpenID's prompt), and those that would
// replace them (a request object, RFC 9101) or change how the response
// comes back (response_mode); and those of its token requests.
var (
	authorizationParams = []string{
		"response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method",
		"resource", "prompt", "request", "request_uri", "response_mode",
	}
	tokenParams = []string{
		"grant_type", "code", "redirect_uri", "code_verifier", "refresh_token", "client_id", "client_secret",
		"client_assertion", "client_assertion_type", "resource", "scope",
	}
)

// endpointOK: raw can be an authorization server endpoint fluidbox sends
// requests to: https (http to loopback), no credentials, no fragment (RFC
// 6749 3.1 and 3.2), and a query, if any, that parses and holds none of
// the parameters fluidbox adds (which copy a server reads would be its
// guess).
func endpointOK(raw string, ours []string) bool {
	u, err := url.Parse(raw)
	if err != nil || !secureURL(raw) || strings.Contains(raw, "#") {
		return false
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return false
	}
	for k := range q {
		if slices.Contains(ours, k) {
			return false
		}
	}
	return true
}

// Client is a registered OAuth client.
type Client struct {
	ID     string
	Secret string // "" for a public client
	// AuthMethod is the token endpoint authentication method
	// ("client_secret_basic", "client_secret_post", "none").
	AuthMethod string
	// Registered: the client was registered here, dynamically (RFC 7591)
	// or as fluidbox's client ID metadata document, not given by the
	// operator.
	Registered bool
	// RedirectURI is the redirect URI this client authorizes with: the
	// issuer's own (Site.RedirectURIFor) for a client of one authorization
	// server, the document's for fluidbox's client ID metadata document.
	RedirectURI string
}

// Bounds of what a provider chooses and fluidbox keeps on the connection
// (read on every call) and sends back: a registered client's id and secret
// (the operator's are held to the same), and a refresh token.
const (
	MaxClientID     = 512
	MaxClientSecret = 2048
	MaxRefreshToken = 8192
)

// vschars: s is at most max of RFC 6749's VSCHAR (%x20-7E), what a
// client_id, a client_secret and a refresh token are made of (RFC 6749
// appendix A).
func vschars(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// redacted keeps a Client's secret out of fmt and logs.
func (c Client) String() string { return "oauth.Client{" + c.ID + ", redacted}" }

// Site is where fluidbox, as an OAuth client, lives: the callback the
// provider sends the member back to, and the URL at which fluidbox serves
// its client ID metadata document (MetadataDocument). Both are the API's.
//
// Mix-up (RFC 9700 section 4.4): each authorization server gets its own
// redirect URI, RedirectURIFor(issuer), and a response is taken only at
// the redirect URI of the issuer its state was made for, so a code that
// an attacker's server routed through an honest one arrives at the honest
// one's URI and is refused before any token request; this holds whether
// or not the honest server sends iss. RedirectURI itself is only the
// client ID metadata document's: that one client is valid at every server
// that takes documents, so distinct redirect URIs cannot tell servers
// apart for it, and it is used only with servers that advertise RFC 9207's
// iss (then required and checked).
type Site struct {
	RedirectURI string
	MetadataURL string
	// StartURL is the authorize redirect the member's browser opens first
	// (it sets the browser-bound nonce and sends the browser on to the
	// authorization server).
	StartURL string
}

// IssuerKey is issuer's name in its redirect URI: the first 128 bits of
// the SHA-256 of it without a trailing slash, in hex (an issuer is a URL;
// a digest is a path segment). Issuers that are the same server
// (SameIssuer) have the same key.
func IssuerKey(issuer string) string {
	sum := sha256.Sum256([]byte(strings.TrimSuffix(issuer, "/")))
	return hex.EncodeToString(sum[:16])
}

// SameIssuer: a and b name the same authorization server, as the MCP Go
// SDK compares a metadata document's issuer with the URL it was fetched
// for (equal but for a trailing slash). The iss of an authorization
// response is held to exact equality instead (CheckIssuer, RFC 9207).
func SameIssuer(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// RedirectURIFor is the redirect URI of the authorization server issuer.
func (s Site) RedirectURIFor(issuer string) string {
	return s.RedirectURI + "/" + IssuerKey(issuer)
}

// clientName is how fluidbox names itself to authorization servers.
const clientName = "fluidbox"

// grantTypes are the grants fluidbox uses: the code, and refreshing where
// the secret lives.
var grantTypes = []string{"authorization_code", "refresh_token"}

// MetadataDocumentOK: url may serve as a client ID metadata document's
// client_id: HTTPS with a path (draft-ietf-oauth-client-id-metadata-document
// section 3), no credentials, query or fragment.
func MetadataDocumentOK(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.User == nil &&
		u.Path != "" && u.Path != "/" && u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery
}

// Document is a client ID metadata document: the client's registration
// metadata (RFC 7591 section 2) plus the client_id, which is the URL the
// document is served at.
type Document struct {
	ClientID string `json:"client_id"`
	oauthex.ClientRegistrationMetadata
}

// MetadataDocument is fluidbox's client ID metadata document at site: a
// public client (token_endpoint_auth_method none; PKCE protects the code)
// whose one redirect URI is the API's callback.
func MetadataDocument(site Site) Document {
	return Document{ClientID: site.MetadataURL, ClientRegistrationMetadata: oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{site.RedirectURI}, GrantTypes: grantTypes, ResponseTypes: []string{"code"},
		ClientName: clientName, TokenEndpointAuthMethod: "none", ApplicationType: "web",
	}}
}

// Register returns the client to authorize with, in the order the MCP
// specification (2025-11-25, "Client Registration Approaches") gives: the
// pre-registered client when there is one; otherwise fluidbox's client ID
// metadata document, when the server takes those and site.MetadataURL is
// one fluidbox can serve it at (HTTPS); otherwise dynamic registration
// (RFC 7591) at the server's registration endpoint, for site.RedirectURI.
// The MCP Go SDK's AuthorizationCodeHandler tries the metadata document
// before a pre-registered client; the specification's order is kept here,
// so that an operator's client always wins.
func Register(ctx context.Context, hc *http.Client, d Discovery, site Site, pre *Client) (Client, error) {
	own := site.RedirectURIFor(d.Issuer)
	if pre != nil && pre.ID != "" {
		c := *pre
		if c.AuthMethod == "" {
			c.AuthMethod = chooseAuthMethod(d.AuthMethods, c.Secret != "")
		}
		c.RedirectURI = own
		return c, nil
	}
	if d.ClientIDMetadata && d.IssParameter && MetadataDocumentOK(site.MetadataURL) {
		// The document is one client for every server that takes documents:
		// only the iss of the response (required, as advertised) can tell
		// which server answered, so a server that does not send it gets a
		// registered client of its own instead.
		return Client{ID: site.MetadataURL, AuthMethod: "none", Registered: true, RedirectURI: site.RedirectURI}, nil
	}
	if d.RegistrationURL == "" {
		return Client{}, &Error{Op: "register", Msg: "no client_id given, and the authorization server takes neither fluidbox's client ID metadata document (it needs an HTTPS public URL) nor dynamic client registration", Err: ErrRegistration}
	}
	meta := &oauthex.ClientRegistrationMetadata{
		RedirectURIs:  []string{own},
		GrantTypes:    grantTypes,
		ResponseTypes: []string{"code"},
		ClientName:    clientName,
		Scope:         strings.Join(d.Scopes, " "),
		// A confidential web client: the control plane keeps the secret
		// sealed, and the redirect URI is the API's.
		TokenEndpointAuthMethod: chooseAuthMethod(d.AuthMethods, true),
		ApplicationType:         "web",
	}
	resp, err := oauthex.RegisterClient(ctx, d.RegistrationURL, meta, noRedirects(hc))
	if err != nil {
		e := &Error{Op: "register", Msg: "the authorization server refused the registration", Err: ErrRegistration}
		var re *oauthex.ClientRegistrationError
		if errors.As(err, &re) && knownCode(re.ErrorCode) {
			e.Code = re.ErrorCode
		}
		return Client{}, e
	}
	method := resp.TokenEndpointAuthMethod
	switch method {
	case "":
		method = "client_secret_basic" // RFC 7591's default
	case "client_secret_basic", "client_secret_post", "none":
	default:
		return Client{}, &Error{Op: "register", Msg: "the authorization server registered a token endpoint authentication method fluidbox does not use", Err: ErrRegistration}
	}
	if !vschars(resp.ClientID, MaxClientID) || !vschars(resp.ClientSecret, MaxClientSecret) {
		// Kept on the connection and presented in URLs and headers: held
		// to the bounds of the operator's.
		return Client{}, &Error{Op: "register", Msg: fmt.Sprintf("the authorization server registered a client_id or client_secret that is not at most %d (%d) visible ASCII characters", MaxClientID, MaxClientSecret), Err: ErrRegistration}
	}
	if resp.ClientID == site.MetadataURL {
		// A registration endpoint answering with fluidbox's own document
		// would make it the client of a server without iss.
		return Client{}, &Error{Op: "register", Msg: "the authorization server answered the registration with fluidbox's client ID metadata document", Err: ErrRegistration}
	}
	return Client{ID: resp.ClientID, Secret: resp.ClientSecret, AuthMethod: method, Registered: true, RedirectURI: own}, nil
}

// chooseAuthMethod picks the token endpoint authentication: the OAuth 2.1
// preference (post, then basic) among what the server lists; "none" for a
// public client.
func chooseAuthMethod(supported []string, confidential bool) string {
	if !confidential {
		return "none"
	}
	for _, m := range []string{"client_secret_post", "client_secret_basic"} {
		if slices.Contains(supported, m) {
			return m
		}
	}
	return "client_secret_basic"
}

func authStyle(method string) oauth2.AuthStyle {
	switch method {
	case "client_secret_post", "none":
		return oauth2.AuthStyleInParams
	default:
		return oauth2.AuthStyleInHeader
	}
}

func config(d Discovery, c Client, redirectURI string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: c.ID, ClientSecret: c.Secret, RedirectURL: redirectURI, Scopes: d.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: d.AuthURL, TokenURL: d.TokenURL, AuthStyle: authStyle(c.AuthMethod)},
	}
}

// AuthURL is the URL the member opens: the authorization code request of
// client c (at its redirect URI) with PKCE S256 over verifier and the
// resource. An empty state leaves it out, for the caller to add. With
// consent, an OpenID provider asked for offline_access is also sent
// prompt=consent, without which it grants no refresh token (OpenID Connect
// Core 1.0 section 11); a tenant whose administrator consented for every
// member may have that turned off.
func AuthURL(d Discovery, c Client, state, verifier string, consent bool) string {
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", d.Resource)}
	if consent && d.OpenID && slices.Contains(d.Scopes, "offline_access") {
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "consent"))
	}
	return config(d, c, c.RedirectURI).AuthCodeURL(state, opts...)
}

// CheckIssuer checks an authorization response's iss (RFC 9207): required
// and equal when the server advertises it; when it does not, absent is
// accepted and present must still be equal (RFC 9207 section 2.4).
func CheckIssuer(d Discovery, iss string) error {
	if iss == "" && !d.IssParameter {
		return nil
	}
	if iss != d.Issuer {
		return &Error{Op: "callback", Msg: "the response's iss is not the authorization server's issuer", Err: ErrIssuer}
	}
	return nil
}

// Exchange redeems an authorization code for tokens.
func Exchange(ctx context.Context, hc *http.Client, d Discovery, c Client, redirectURI, code, verifier string) (*oauth2.Token, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, noRedirects(hc))
	tok, err := config(d, c, redirectURI).Exchange(ctx, code,
		oauth2.VerifierOption(verifier),
		oauth2.SetAuthURLParam("resource", d.Resource),
	)
	if err != nil {
		return nil, tokenError("exchange", err)
	}
	return checked("exchange", tok)
}

// Refresh redeems a refresh token. The request carries the resource (RFC
// 8707 asks for it on every token request; oauth2's refresh has no
// parameter for it, so the transport adds it to the form).
func Refresh(ctx context.Context, hc *http.Client, d Discovery, c Client, refreshToken string) (*oauth2.Token, error) {
	if refreshToken == "" {
		return nil, &Error{Op: "refresh", Msg: "there is no refresh token", Err: ErrGrant}
	}
	rc := noRedirects(hc)
	rc.Transport = &resourceTransport{base: transportOf(hc), resource: d.Resource}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, rc)
	// An expired token makes the source refresh at once.
	tok, err := config(d, c, "").TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	if err != nil {
		return nil, tokenError("refresh", err)
	}
	if tok.RefreshToken == "" {
		// RFC 6749 6: no new refresh token means the old one stays valid.
		tok.RefreshToken = refreshToken
	}
	return checked("refresh", tok)
}

// checked refuses a token answer fluidbox cannot present.
func checked(op string, tok *oauth2.Token) (*oauth2.Token, error) {
	if tok.AccessToken == "" {
		return nil, &Error{Op: op, Msg: "the token response has no access token", Err: ErrToken}
	}
	if t := tok.Type(); !strings.EqualFold(t, "bearer") {
		return nil, &Error{Op: op, Msg: "the token is not a bearer token", Err: ErrToken}
	}
	if !vschars(tok.RefreshToken, MaxRefreshToken) {
		// Sealed on the connection, read on every call, sent back at each
		// refresh.
		return nil, &Error{Op: op, Msg: fmt.Sprintf("the refresh token is not at most %d visible ASCII characters", MaxRefreshToken), Err: ErrToken}
	}
	return tok, nil
}

// grantCodes are the token endpoint's answers that no retry can change.
var grantCodes = map[string]bool{"invalid_grant": true, "unauthorized_client": true, "invalid_client": true}

func tokenError(op string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		e := &Error{Op: op, Msg: "the token endpoint refused the request", Err: ErrToken}
		if re.Response != nil {
			e.Status = re.Response.StatusCode
		}
		if knownCode(re.ErrorCode) {
			e.Code = re.ErrorCode
		}
		if grantCodes[re.ErrorCode] {
			e.Err = ErrGrant
		}
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &Error{Op: op, Msg: "the token request was cut short", Err: ErrToken}
	}
	return &Error{Op: op, Msg: "the token endpoint could not be reached or answered unusably", Err: ErrToken}
}

// registeredCodes are the OAuth error codes of the IANA "OAuth Extensions
// Error Registry" a token or registration endpoint answers with (RFC 6749
// 5.2, RFC 7591 3.2.2, RFC 8707 2, RFC 9449 and RFC 8628's device grant
// left out). Only these are kept: an "error" field is the provider's
// choice, and any other value, however plain, could be the code, the
// verifier, the refresh token or the client secret it was just sent.
var registeredCodes = map[string]bool{
	"invalid_request": true, "invalid_client": true, "invalid_grant": true, "unauthorized_client": true,
	"unsupported_grant_type": true, "invalid_scope": true, "access_denied": true, "server_error": true,
	"temporarily_unavailable": true, "invalid_redirect_uri": true, "invalid_client_metadata": true,
	"invalid_software_statement": true, "unapproved_software_statement": true, "invalid_target": true,
	"invalid_dpop_proof": true, "use_dpop_nonce": true,
}

// knownCode: code is a registered OAuth error code, safe to name.
func knownCode(code string) bool { return registeredCodes[code] }
