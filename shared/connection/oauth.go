package connection

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"time"

	"golang.org/x/oauth2"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/oauth"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// CredentialOAuth is the credential type of a connection authorized with
// OAuth. It is persisted and on the wire: never rename.
const CredentialOAuth = "oauth"

// Errors of the OAuth flow the API maps to its codes.
var (
	// ErrState: the callback's state is unknown, used already or expired.
	ErrState = errors.New("connection: unknown, used or expired authorization state")
	// ErrAuthorizationDenied: the provider answered the callback with an
	// error (the member declined, or the request was refused).
	ErrAuthorizationDenied = errors.New("connection: the authorization server denied the authorization")
	// ErrAuthorizationRequired: the connection has no usable OAuth grant;
	// its owner (an admin for a shared one) must authorize it.
	ErrAuthorizationRequired = errors.New("connection: authorization required")
	// errAuthorizationLost: a refresh was refused for good, or the
	// connection was re-authorized under the call; the connection is no
	// longer usable at the generation the run is bound to.
	errAuthorizationLost = errors.New("connection: authorization lost")
)

// OAuthRequest is {"type":"oauth","client_id"?,"client_secret"?,"issuer"?,
// "scopes"?,"consent_prompt"?}: an OAuth connection, authorized afterwards
// with Authorize. A client id (and secret) is the operator's pre-registered
// client, and issuer the authorization server it belongs to (required with
// it): the client is presented to no other. Without one the client is
// registered at the first authorization. consent_prompt false never sends
// prompt=consent to an OpenID provider (tenant-wide consent).
type OAuthRequest struct {
	Type          string   `json:"type"`
	ClientID      string   `json:"client_id,omitempty"`
	ClientSecret  string   `json:"client_secret,omitempty"`
	Issuer        string   `json:"issuer,omitempty"`
	Scopes        []string `json:"scopes,omitempty"`
	ConsentPrompt *bool    `json:"consent_prompt,omitempty"`
}

// String, GoString and LogValue redact the client secret.
func (r OAuthRequest) String() string   { return "oauth(client " + r.ClientID + ", redacted)" }
func (r OAuthRequest) GoString() string { return r.String() }

// LogValue redacts for log/slog.
func (r OAuthRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("type", CredentialOAuth), slog.String("client_id", r.ClientID), slog.String("secret", "redacted"))
}

// Bounds of an OAuth credential request.
const (
	maxClientID     = oauth.MaxClientID
	maxClientSecret = oauth.MaxClientSecret
	maxIssuer       = 512
	// The operator's scopes are held to the bounds of those an upstream
	// may ask for (in its challenge, or at discovery).
	maxScopes = broker.MaxScopes
)

func (r OAuthRequest) validate() error {
	if len(r.ClientID) > maxClientID || !printable(r.ClientID) {
		return invalid("credential", "client_id must be at most %d printable characters", maxClientID)
	}
	if len(r.ClientSecret) > maxClientSecret || !printable(r.ClientSecret) {
		return invalid("credential", "client_secret must be at most %d printable characters", maxClientSecret)
	}
	if r.ClientSecret != "" && r.ClientID == "" {
		return invalid("credential", "client_secret needs its client_id")
	}
	switch {
	case r.ClientID != "" && r.Issuer == "":
		// Bound at creation: a client first bound where it is first used
		// would belong to whichever server the upstream named that day.
		return invalid("credential", "client_id needs its issuer: the authorization server the client is registered at")
	case r.Issuer != "" && r.ClientID == "":
		return invalid("credential", "issuer names the server of the operator's client_id; without one the client is registered at the server the upstream names")
	case r.Issuer != "" && (len(r.Issuer) > maxIssuer || !printable(r.Issuer) || !oauth.IssuerOK(r.Issuer)):
		return invalid("credential", "issuer must be the authorization server's issuer identifier: an https URL (http to loopback) of at most %d characters without query or fragment", maxIssuer)
	}
	if len(r.Scopes) > maxScopes {
		return invalid("credential", "at most %d scopes", maxScopes)
	}
	for _, s := range r.Scopes {
		if !broker.ValidScope(s) {
			return invalid("credential", "each scope must be 1 to %d printable characters without spaces, quotes or backslashes", broker.MaxScopeLen)
		}
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// UnmarshalJSON decodes the body of POST /v1/connections strictly, its
// credential as an OAuthRequest when its type is "oauth" and as a
// seal.Credential otherwise.
func (r *CreateRequest) UnmarshalJSON(b []byte) error {
	var w struct {
		Name        string            `json:"name"`
		URL         string            `json:"url"`
		Kind        string            `json:"kind"`
		Credential  json.RawMessage   `json:"credential"`
		ToolClasses map[string]string `json:"tool_classes,omitempty"`
	}
	if err := strictDecode(b, &w); err != nil {
		return err
	}
	out := CreateRequest{Name: w.Name, URL: w.URL, Kind: w.Kind, ToolClasses: w.ToolClasses}
	if len(w.Credential) > 0 && !bytes.Equal(bytes.TrimSpace(w.Credential), []byte("null")) {
		var probe struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(w.Credential, &probe); err != nil {
			return fmt.Errorf("%w: credential is not a JSON object", seal.ErrInvalidCredential)
		}
		if probe.Type == CredentialOAuth {
			var o OAuthRequest
			if err := strictDecode(w.Credential, &o); err != nil {
				return fmt.Errorf("%w: an oauth credential takes only type, client_id, client_secret, issuer, scopes and consent_prompt", seal.ErrInvalidCredential)
			}
			out.OAuth = &o
		} else {
			var c seal.Credential
			if err := c.UnmarshalJSON(w.Credential); err != nil {
				return err
			}
			out.Credential = &c
		}
	}
	*r = out
	return nil
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("json: trailing data")
	}
	return nil
}

// OAuthView is what GET /v1/connections/{id} shows of an OAuth
// connection's client: the authorization server it belongs to (the
// operator's, or where it was registered), the redirect URI registered for
// it there (filled in by the API, which knows its base URL), and whether
// OpenID providers are sent prompt=consent.
type OAuthView struct {
	Issuer        string `json:"issuer,omitempty"`
	RedirectURI   string `json:"redirect_uri,omitempty"`
	ConsentPrompt bool   `json:"consent_prompt"`
}

func oauthView(c store.Connection) *OAuthView {
	if c.CredentialType != CredentialOAuth {
		return nil
	}
	// An operator's client of a connection created before issuers were
	// named is bound to its first authorization's: shown, so that its
	// redirect URI is too. A discovery that does not decode shows none.
	iss, _ := clientIssuer(c)
	return &OAuthView{Issuer: iss, RedirectURI: c.OAuth.ClientRedirectURI, ConsentPrompt: !c.OAuth.NoConsentPrompt}
}

// Seal contexts of an OAuth connection's other secrets. A context names
// what a value is for, so that no sealed value opens in another's place.
func clientSealContext(id string) seal.Context {
	return seal.Context{ConnectionID: id + "#oauth-client", Generation: 1}
}

func stateSealContext(id, digest string) seal.Context {
	return seal.Context{ConnectionID: id + "#oauth-state#" + digest, Generation: 1}
}

// createOAuth stores an OAuth connection in status authorization_required:
// no network here (the function that creates connections never dials a
// provider); discovery and registration happen at Authorize.
func (s *Service) createOAuth(ctx context.Context, who auth.Principal, req CreateRequest) (View, error) {
	if err := req.OAuth.validate(); err != nil {
		return View{}, err
	}
	id := newConnectionID()
	c := store.Connection{
		ID: id, Name: req.Name, URL: req.URL, Kind: req.Kind, Owner: who.Subject, Status: store.ConnectionAuthorizationRequired,
		Generation: 1, CredentialType: CredentialOAuth, ToolClasses: req.ToolClasses,
	}
	c.OAuth.ClientID, c.OAuth.ClientIssuer, c.OAuth.Scopes = req.OAuth.ClientID, req.OAuth.Issuer, req.OAuth.Scopes
	c.OAuth.NoConsentPrompt = req.OAuth.ConsentPrompt != nil && !*req.OAuth.ConsentPrompt
	if req.OAuth.ClientSecret != "" {
		sealed, err := s.sealer.Seal(ctx, []byte(req.OAuth.ClientSecret), clientSealContext(id))
		if err != nil {
			return View{}, fmt.Errorf("connection: seal: %w", err)
		}
		c.OAuth.ClientSecret = sealed
	}
	return s.put(ctx, c)
}

// AuthorizeResult is the answer of POST /v1/connections/{id}/authorize.
type AuthorizeResult struct {
	// AuthorizationURL is fluidbox's authorize redirect (Start): the
	// browser that opens it first is the one the callback is taken from.
	AuthorizationURL string `json:"authorization_url"`
	ExpiresAt        string `json:"expires_at"`
}

// StateTTL is how long an authorization URL stays redeemable.
const StateTTL = 10 * time.Minute

func (s *Service) log() *slog.Logger {
	if s.opts.Logger != nil {
		return s.opts.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Authorize starts an OAuth authorization of the connection for who: it
// discovers the upstream's authorization server, registers a client if the
// connection has none for that server, and stores a single-use state bound
// to the connection, its generation, who, the authorization server (its
// discovery and its own redirect URI) and the sealed PKCE verifier. site is
// the API's callback, client metadata document and authorize redirect. A
// personal connection is authorized by its owner only, a shared one by an
// admin. A client registered here (dynamically, or as the metadata
// document) is kept on the connection for that server and redirect URI,
// for refreshes too; when the upstream names another server, a new one is
// registered there (a client is never reused across servers). The
// operator's client is presented to its own issuer only.
//
// The URL returned is site.StartURL with a key: the state is derived from
// the key (a SHA-256), so the authorization server's URL, which carries the
// state, does not give the key, and only the browser that opened the key's
// URL holds the nonce the callback asks for.
func (s *Service) Authorize(ctx context.Context, who auth.Principal, ref string, site oauth.Site) (AuthorizeResult, error) {
	if s.sealer == nil {
		return AuthorizeResult{}, ErrNoSealer
	}
	c, err := s.authorizable(ctx, who, ref)
	if err != nil {
		return AuthorizeResult{}, err
	}
	d, err := oauth.Discover(ctx, s.opts.OAuthClient, c.URL, c.OAuth.Scopes)
	if err != nil {
		return AuthorizeResult{}, err
	}
	// The scopes an upstream asked for in a challenge (step-up), on top of
	// those the specification's selection gives (the connection's scopes
	// setting, else the challenge of the probe, else scopes_supported):
	// accumulated, so that a re-authorization never loses what an earlier
	// one was granted.
	d.Scopes = unionScopes(d.Scopes, recordedScopes(c))
	client, err := s.registeredClient(ctx, c, d, site)
	if err != nil {
		return AuthorizeResult{}, err
	}
	return s.putState(ctx, who, c, d, client, site)
}

// authorizable is the connection ref names when who may authorize it: an
// OAuth connection, who manages it, not revoked.
func (s *Service) authorizable(ctx context.Context, who auth.Principal, ref string) (store.Connection, error) {
	c, err := s.get(ctx, who, ref)
	if err != nil {
		return store.Connection{}, err
	}
	if c.CredentialType != CredentialOAuth {
		return store.Connection{}, invalid("connection", "is not an OAuth connection (credential type %s); replace its credential instead", c.CredentialType)
	}
	if !mayManage(who, c) {
		return store.Connection{}, fmt.Errorf("%w: only the owner of a personal connection (an admin for a shared one) may authorize it", ErrForbidden)
	}
	if c.Status == store.ConnectionRevoked {
		return store.Connection{}, ErrRevoked
	}
	return c, nil
}

// registeredClient is the client c authorizes with at d's server: its own
// when it belongs there (the operator's, or one registered there for the
// same redirect URI), otherwise one registered now and kept on the
// connection.
func (s *Service) registeredClient(ctx context.Context, c store.Connection, d oauth.Discovery, site oauth.Site) (oauth.Client, error) {
	pre, err := s.reusableClient(ctx, c, d, site)
	if err != nil {
		return oauth.Client{}, err
	}
	client, err := oauth.Register(ctx, s.opts.OAuthClient, d, site, pre)
	if err != nil {
		return oauth.Client{}, err
	}
	if !client.Registered || pre != nil {
		return client, nil
	}
	var sealed []byte
	if client.Secret != "" {
		if sealed, err = s.sealer.Seal(ctx, []byte(client.Secret), clientSealContext(c.ID)); err != nil {
			return oauth.Client{}, fmt.Errorf("connection: seal: %w", err)
		}
	}
	err = s.st.SetOAuthClient(ctx, c.ID, c.Generation, client.ID, sealed, client.AuthMethod, d.Issuer, client.RedirectURI, store.FormatTime(s.opts.Now()))
	if errors.Is(err, store.ErrConnectionChanged) {
		return oauth.Client{}, ErrChanged
	}
	if err != nil {
		return oauth.Client{}, err
	}
	return client, nil
}

// reusableClient is the connection's client when it may be presented at
// d's server (nil: register one); an operator's client bound to another
// issuer, or to none, is an error.
func (s *Service) reusableClient(ctx context.Context, c store.Connection, d oauth.Discovery, site oauth.Site) (*oauth.Client, error) {
	client, err := s.client(ctx, c)
	if err != nil {
		return nil, err
	}
	iss, err := clientIssuer(c)
	if err != nil {
		return nil, err
	}
	switch {
	case client.ID == "":
	case !client.Registered && iss == "":
		return nil, invalid("credential", "the connection's OAuth client names no issuer; create the connection again with the issuer of its client_id")
	case !client.Registered && !oauth.SameIssuer(iss, d.Issuer):
		// The upstream's metadata names another authorization server than
		// the operator's client belongs to: the client and its secret are
		// not presented there.
		return nil, &oauth.Error{Op: "discover", Msg: "the MCP server names another authorization server than the issuer of the connection's OAuth client; create a new connection to authorize there", Err: oauth.ErrDiscovery}
	case !client.Registered:
		return &client, nil
	case oauth.SameIssuer(iss, d.Issuer) && c.OAuth.ClientRedirectURI != "" && c.OAuth.ClientRedirectURI == registeredRedirect(d, site, client):
		return &client, nil
	default:
		// Registered for another server (the upstream moved) or another
		// redirect URI: a new registration, never this client elsewhere.
		s.log().InfoContext(ctx, "oauth client registered anew: the upstream's authorization server or the redirect URI changed", "connection", c.ID)
	}
	return nil, nil
}

// putState stores the single-use state of who's authorization of c at d's
// server with client, and returns the start URL that leads to it.
func (s *Service) putState(ctx context.Context, who auth.Principal, c store.Connection, d oauth.Discovery, client oauth.Client, site oauth.Site) (AuthorizeResult, error) {
	key := rand.Text()
	state := stateOf(key)
	digest := stateDigest(state)
	verifier := oauth2.GenerateVerifier()
	sealedVerifier, err := s.sealer.Seal(ctx, []byte(verifier), stateSealContext(c.ID, digest))
	if err != nil {
		return AuthorizeResult{}, fmt.Errorf("connection: seal: %w", err)
	}
	disc, err := json.Marshal(d)
	if err != nil {
		return AuthorizeResult{}, fmt.Errorf("connection: encode discovery: %w", err)
	}
	now := s.opts.Now()
	expires := store.FormatTime(now.Add(StateTTL))
	err = s.st.PutOAuthState(ctx, store.OAuthState{
		Digest: digest, ConnectionID: c.ID, Subject: who.Subject, Generation: c.Generation,
		Verifier: sealedVerifier, RedirectURI: client.RedirectURI, Discovery: string(disc),
		AuthorizeURL: oauth.AuthURL(d, client, "", verifier, !c.OAuth.NoConsentPrompt),
		ExpiresAt:    expires, Expires: now.Add(StateTTL).Unix(), CreatedAt: store.FormatTime(now),
	})
	if err != nil {
		return AuthorizeResult{}, err
	}
	return AuthorizeResult{AuthorizationURL: site.StartURL + "?" + url.Values{"key": {key}}.Encode(), ExpiresAt: expires}, nil
}

// registeredRedirect is the redirect URI a registered client of d's server
// is kept for: the document's when it is fluidbox's client ID metadata
// document (and the server still takes it with iss), the server's own
// otherwise; "" (never recorded) when the document no longer qualifies.
func registeredRedirect(d oauth.Discovery, site oauth.Site, c oauth.Client) string {
	if c.ID != site.MetadataURL {
		return site.RedirectURIFor(d.Issuer)
	}
	if d.ClientIDMetadata && d.IssParameter {
		return site.RedirectURI
	}
	return ""
}

// stateOf is the state of the authorization whose start key is key: its
// SHA-256, so that the state (which the authorization server's URL and the
// callback carry) does not give the key.
func stateOf(key string) string {
	sum := sha256.Sum256([]byte("fluidbox oauth state\x00" + key))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// CookieName is the name of the cookie that holds the browser-bound nonce
// of the authorization whose state is state (one per authorization, so
// that two in one browser do not overwrite each other's).
func CookieName(state string) string {
	return "fbx_oauth_" + stateDigest(state)[:16]
}

// Started is what the authorize redirect does: send the browser to URL
// with the nonce in the cookie Cookie, until Expires.
type Started struct {
	URL     string
	Cookie  string
	Nonce   string
	Expires time.Time
}

// String redacts the nonce and the URL's state.
func (s Started) String() string { return "connection.Started{" + s.Cookie + ", redacted}" }

// maxKeyLen bounds the start key, which anyone can send.
const maxKeyLen = 64

// Start is the authorize redirect of the authorization key starts: once per
// key (a second opening, from any browser, is ErrState), it records the
// digest of a fresh nonce on the state and returns the authorization
// server's URL with the state and the nonce the browser is to hold. The
// callback is then taken only from a browser holding it, so an
// authorization server URL someone else completes is refused.
func (s *Service) Start(ctx context.Context, key string) (Started, error) {
	if key == "" || len(key) > maxKeyLen || !printable(key) {
		return Started{}, ErrState
	}
	state := stateOf(key)
	nonce := rand.Text()
	now := s.opts.Now()
	st, err := s.st.StartOAuthState(ctx, stateDigest(state), stateDigest(nonce), store.FormatTime(now))
	if errors.Is(err, store.ErrNotFound) {
		return Started{}, ErrState
	}
	if err != nil {
		return Started{}, err
	}
	exp, err := time.Parse(time.RFC3339Nano, st.ExpiresAt)
	if err != nil || !now.Before(exp) || st.AuthorizeURL == "" {
		return Started{}, ErrState
	}
	return Started{URL: st.AuthorizeURL + "&" + url.Values{"state": {state}}.Encode(), Cookie: CookieName(state), Nonce: nonce, Expires: exp}, nil
}

// clientIssuer is the authorization server the connection's client
// belongs to: the one it was registered at or the operator named, else
// (the operator's client of a connection created before issuers were
// named) the issuer of the last completed authorization; "" when not yet
// bound. A stored discovery that does not decode is an error, not unbound.
func clientIssuer(c store.Connection) (string, error) {
	if c.OAuth.ClientIssuer != "" {
		return c.OAuth.ClientIssuer, nil
	}
	d, err := storedDiscovery(c)
	return d.Issuer, err
}

// storedDiscovery is what the connection's last authorization discovered;
// a zero Discovery when it has none.
func storedDiscovery(c store.Connection) (oauth.Discovery, error) {
	var d oauth.Discovery
	if c.OAuth.Discovery == "" {
		return d, nil
	}
	if err := json.Unmarshal([]byte(c.OAuth.Discovery), &d); err != nil {
		return oauth.Discovery{}, fmt.Errorf("connection: decode discovery of %s: %w", c.ID, err)
	}
	return d, nil
}

// client is the connection's OAuth client, its secret opened; a zero
// Client when it has none yet.
func (s *Service) client(ctx context.Context, c store.Connection) (oauth.Client, error) {
	cl := oauth.Client{ID: c.OAuth.ClientID, AuthMethod: c.OAuth.ClientAuthMethod, Registered: c.OAuth.ClientRegistered, RedirectURI: c.OAuth.ClientRedirectURI}
	if len(c.OAuth.ClientSecret) > 0 {
		secret, err := s.sealer.Open(ctx, c.OAuth.ClientSecret, clientSealContext(c.ID))
		if err != nil {
			return oauth.Client{}, fmt.Errorf("connection: open client secret of %s: %w", c.ID, err)
		}
		cl.Secret = string(secret)
		clear(secret)
	}
	return cl, nil
}

// stateDigest is what is stored of a state (and of a nonce): its SHA-256.
func stateDigest(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// CallbackQuery is the authorization response (GET /v1/oauth/callback...).
type CallbackQuery struct {
	Code  string
	State string
	Iss   string
	// Error is the provider's error code, when it answered with one.
	Error string
	// RedirectURI is the redirect URI the response arrived at (without
	// its query): it must be the one of the state's authorization server.
	RedirectURI string
	// Nonce is the value of the browser's cookie CookieName(State), "" when
	// it sent none.
	Nonce string
}

// Bounds on the callback's parameters, which anyone can send.
const (
	maxStateLen = 128
	maxCodeLen  = 4096
)

// ErrBrowser: the authorization response came from another browser than
// the one the authorize redirect sent to the authorization server (no
// nonce, or another's): someone else completed the authorization URL.
var ErrBrowser = errors.New("connection: the authorization was completed in another browser than the one that started it")

// Authorized is a completed authorization.
type Authorized struct {
	View View
	// Refreshable: the provider gave a refresh token. Without one the
	// access token is used until ExpiresAt, and then the connection needs
	// authorizing again.
	Refreshable bool
	ExpiresAt   time.Time // zero when the provider gave no lifetime
}

// Callback completes an authorization: the state is consumed (once, before
// anything else, so a replay finds it spent), the response taken only at
// the redirect URI of the state's authorization server (mix-up, RFC 9700
// 4.4.2.2) and from the browser holding the state's nonce, checked against
// the connection (same generation, still its owner's), the issuer checked
// (RFC 9207: required when advertised), the code redeemed with the PKCE
// verifier, and the tokens sealed for the next generation, which the
// connection moves to, active. Runs bound to the previous generation are
// refused from their next call on.
func (s *Service) Callback(ctx context.Context, q CallbackQuery) (Authorized, error) {
	if s.sealer == nil {
		return Authorized{}, ErrNoSealer
	}
	st, err := s.consumeState(ctx, q)
	if err != nil {
		return Authorized{}, err
	}
	c, err := s.callbackConnection(ctx, st)
	if err != nil {
		return Authorized{}, err
	}
	d, err := callbackDiscovery(c, st, q.Iss)
	if err != nil {
		return Authorized{}, err
	}
	return s.redeem(ctx, c, st, d, q)
}

// consumeState spends the state of q (once, before anything else) and
// takes the response only while the state is unexpired, at its
// authorization server's redirect URI, from the browser holding its nonce,
// and with a code.
func (s *Service) consumeState(ctx context.Context, q CallbackQuery) (store.OAuthState, error) {
	if q.State == "" || len(q.State) > maxStateLen || len(q.Code) > maxCodeLen {
		return store.OAuthState{}, ErrState
	}
	now := s.opts.Now()
	st, err := s.st.ConsumeOAuthState(ctx, stateDigest(q.State), store.FormatTime(now))
	if errors.Is(err, store.ErrNotFound) {
		return store.OAuthState{}, ErrState
	}
	if err != nil {
		return store.OAuthState{}, err
	}
	if exp, err := time.Parse(time.RFC3339Nano, st.ExpiresAt); err != nil || !now.Before(exp) {
		return store.OAuthState{}, ErrState
	}
	if st.RedirectURI == "" || q.RedirectURI != st.RedirectURI {
		// Another authorization server's redirect URI: the code is that
		// server's, routed here by the server of the state (mix-up).
		return store.OAuthState{}, &oauth.Error{Op: "callback", Msg: "the response arrived at another authorization server's redirect URI", Err: oauth.ErrIssuer}
	}
	if st.NonceDigest == "" || subtle.ConstantTimeCompare([]byte(stateDigest(q.Nonce)), []byte(st.NonceDigest)) != 1 {
		return store.OAuthState{}, ErrBrowser
	}
	if q.Error != "" || q.Code == "" {
		return store.OAuthState{}, ErrAuthorizationDenied
	}
	return st, nil
}

// callbackConnection is the connection st authorizes, while it is the same
// OAuth connection (same generation, not revoked) and the member who
// started the authorization still may complete it.
func (s *Service) callbackConnection(ctx context.Context, st store.OAuthState) (store.Connection, error) {
	c, err := s.st.GetConnection(ctx, st.ConnectionID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Connection{}, ErrNotFound
	}
	if err != nil {
		return store.Connection{}, err
	}
	switch {
	case c.Status == store.ConnectionRevoked:
		return store.Connection{}, ErrRevoked
	case c.CredentialType != CredentialOAuth:
		return store.Connection{}, ErrChanged
	case c.Generation != st.Generation:
		// Authorized (or replaced) since this URL was made.
		return store.Connection{}, ErrChanged
	case c.Kind != store.ConnectionShared && c.Owner != st.Subject:
		// A personal connection takes only its owner's grant.
		return store.Connection{}, ErrForbidden
	}
	if ok, err := s.memberActive(ctx, st.Subject); err != nil {
		return store.Connection{}, err
	} else if !ok {
		// The member who started it was deactivated since: their pending
		// authorization completes nothing.
		return store.Connection{}, ErrForbidden
	}
	return c, nil
}

// callbackDiscovery is the authorization server st was made for, when the
// response's issuer iss is its own (RFC 9207) and the connection's client
// still belongs to it.
func callbackDiscovery(c store.Connection, st store.OAuthState, iss string) (oauth.Discovery, error) {
	var d oauth.Discovery
	if err := json.Unmarshal([]byte(st.Discovery), &d); err != nil {
		return oauth.Discovery{}, fmt.Errorf("connection: decode discovery of %s: %w", c.ID, err)
	}
	if err := oauth.CheckIssuer(d, iss); err != nil {
		return oauth.Discovery{}, err
	}
	if ciss, err := clientIssuer(c); err != nil {
		return oauth.Discovery{}, err
	} else if ciss != "" && !oauth.SameIssuer(ciss, d.Issuer) {
		// The connection's client was registered at another server since
		// this URL was made (a concurrent authorization): its secret is not
		// sent to this one's token endpoint.
		return oauth.Discovery{}, ErrChanged
	}
	return d, nil
}

// redeem exchanges q's code with st's PKCE verifier (sealed for q's
// state) at d's token endpoint, seals the tokens for c's next generation
// and moves c to it, active.
func (s *Service) redeem(ctx context.Context, c store.Connection, st store.OAuthState, d oauth.Discovery, q CallbackQuery) (Authorized, error) {
	verifier, err := s.sealer.Open(ctx, st.Verifier, stateSealContext(c.ID, stateDigest(q.State)))
	if err != nil {
		return Authorized{}, fmt.Errorf("connection: open verifier of %s: %w", c.ID, err)
	}
	defer clear(verifier)
	client, err := s.client(ctx, c)
	if err != nil {
		return Authorized{}, err
	}
	if client.ID == "" {
		return Authorized{}, ErrChanged
	}
	tok, err := oauth.Exchange(ctx, s.opts.OAuthClient, d, client, st.RedirectURI, q.Code, string(verifier))
	if err != nil {
		return Authorized{}, err
	}
	sealed, expires, err := s.sealTokens(ctx, c.ID, c.Generation+1, tok)
	if err != nil {
		return Authorized{}, err
	}
	updated, err := s.st.AuthorizeConnection(ctx, c.ID, c.Generation, sealed, st.Discovery, expires, store.FormatTime(s.opts.Now()))
	if errors.Is(err, store.ErrConnectionChanged) {
		return Authorized{}, ErrChanged
	}
	if err != nil {
		return Authorized{}, err
	}
	s.tools.forget(c.ID)
	return Authorized{View: viewOf(updated), Refreshable: tok.RefreshToken != "", ExpiresAt: tok.Expiry}, nil
}

// memberActive: sub's membership is active, as the gate judges a personal
// connection's owner (permission.LiveConnection): its member row decides,
// and without one only the admin-token operator, who has none in
// single-admin mode, is active.
func (s *Service) memberActive(ctx context.Context, sub string) (bool, error) {
	m, err := s.st.GetMember(ctx, sub)
	switch {
	case err == nil:
		return m.Status == store.MemberActive, nil
	case errors.Is(err, store.ErrNotFound):
		return sub == string(auth.Operator), nil
	}
	return false, err
}

// tokenSet is the sealed plaintext of an OAuth connection's credential.
type tokenSet struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// IssuedAt is when the tokens arrived: with Expiry, the lifetime the
	// refresh margin is a part of (zero on tokens sealed before it was
	// kept).
	IssuedAt time.Time `json:"issued_at,omitzero"`
}

func (s *Service) sealTokens(ctx context.Context, id string, gen int, tok *oauth2.Token) ([]byte, string, error) {
	ts := tokenSet{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, IssuedAt: s.opts.Now()}
	cred := seal.Credential{Type: seal.TypeBearer, Token: ts.AccessToken}
	if err := cred.Validate(); err != nil {
		return nil, "", fmt.Errorf("connection: the access token is not presentable: %w", err)
	}
	b, err := json.Marshal(ts)
	if err != nil {
		return nil, "", fmt.Errorf("connection: encode tokens: %w", err)
	}
	defer clear(b)
	sealed, err := s.sealer.Seal(ctx, b, seal.Context{ConnectionID: id, Generation: gen})
	if err != nil {
		return nil, "", fmt.Errorf("connection: seal tokens: %w", err)
	}
	expires := ""
	if !ts.Expiry.IsZero() {
		expires = store.FormatTime(ts.Expiry)
	}
	return sealed, expires, nil
}

func (s *Service) openTokens(ctx context.Context, id string, gen int, sealed []byte) (tokenSet, error) {
	b, err := s.sealer.Open(ctx, sealed, seal.Context{ConnectionID: id, Generation: gen})
	if err != nil {
		return tokenSet{}, fmt.Errorf("connection: open tokens of %s: %w", id, err)
	}
	defer clear(b)
	var ts tokenSet
	if err := json.Unmarshal(b, &ts); err != nil || ts.AccessToken == "" {
		return tokenSet{}, fmt.Errorf("connection: open tokens of %s: %w", id, seal.ErrMalformed)
	}
	return ts, nil
}
