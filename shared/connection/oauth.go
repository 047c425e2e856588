package connection

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// OAuthRequest is {"type":"oauth","client_id"?,"client_secret"?,"scopes"?}:
// an OAuth connection, authorized afterwards with Authorize. A client id
// (and secret) is the operator's pre-registered client; without one the
// client is registered dynamically at the first authorization.
type OAuthRequest struct {
	Type         string   `json:"type"`
	ClientID     string   `json:"client_id,omitempty"`
	ClientSecret string   `json:"client_secret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
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
	maxClientID     = 512
	maxClientSecret = 2048
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
				return fmt.Errorf("%w: an oauth credential takes only type, client_id, client_secret and scopes", seal.ErrInvalidCredential)
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
	c.OAuth.ClientID, c.OAuth.Scopes = req.OAuth.ClientID, req.OAuth.Scopes
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
// connection has none, and stores a single-use state bound to the
// connection, its generation, who and the sealed PKCE verifier. site is
// the API's callback and client metadata document URL. A personal
// connection is authorized by its owner only, a shared one by an admin. A
// client registered here (dynamically, or as the metadata document) is
// kept on the connection and used from then on, for refreshes too.
func (s *Service) Authorize(ctx context.Context, who auth.Principal, ref string, site oauth.Site) (AuthorizeResult, error) {
	if s.sealer == nil {
		return AuthorizeResult{}, ErrNoSealer
	}
	c, err := s.get(ctx, who, ref)
	if err != nil {
		return AuthorizeResult{}, err
	}
	if c.CredentialType != CredentialOAuth {
		return AuthorizeResult{}, invalid("connection", "is not an OAuth connection (credential type %s); replace its credential instead", c.CredentialType)
	}
	if !mayManage(who, c) {
		return AuthorizeResult{}, fmt.Errorf("%w: only the owner of a personal connection (an admin for a shared one) may authorize it", ErrForbidden)
	}
	if c.Status == store.ConnectionRevoked {
		return AuthorizeResult{}, ErrRevoked
	}
	hc := s.opts.OAuthClient
	d, err := oauth.Discover(ctx, hc, c.URL, c.OAuth.Scopes)
	if err != nil {
		return AuthorizeResult{}, err
	}
	// The scopes an upstream asked for in a challenge (step-up), on top of
	// those the specification's selection gives (the connection's scopes
	// setting, else the challenge of the probe, else scopes_supported):
	// accumulated, so that a re-authorization never loses what an earlier
	// one was granted.
	d.Scopes = unionScopes(d.Scopes, recordedScopes(c))
	client, err := s.client(ctx, c)
	if err != nil {
		return AuthorizeResult{}, err
	}
	iss, err := clientIssuer(c)
	if err != nil {
		return AuthorizeResult{}, err
	}
	if client.ID != "" && iss != "" && iss != d.Issuer {
		// The upstream's metadata now names another authorization server:
		// the client (and its secret, at the token endpoint) belongs to the
		// first and is not presented to this one.
		return AuthorizeResult{}, &oauth.Error{Op: "discover", Msg: "the MCP server names another authorization server than the one the connection's OAuth client belongs to; create a new connection to authorize there", Err: oauth.ErrDiscovery}
	}
	var pre *oauth.Client
	if client.ID != "" {
		pre = &client
	}
	if client, err = oauth.Register(ctx, hc, d, site, pre); err != nil {
		return AuthorizeResult{}, err
	}
	if client.Registered && pre == nil {
		var sealed []byte
		if client.Secret != "" {
			if sealed, err = s.sealer.Seal(ctx, []byte(client.Secret), clientSealContext(c.ID)); err != nil {
				return AuthorizeResult{}, fmt.Errorf("connection: seal: %w", err)
			}
		}
		err := s.st.SetOAuthClient(ctx, c.ID, c.Generation, client.ID, sealed, client.AuthMethod, d.Issuer, store.FormatTime(s.opts.Now()))
		if errors.Is(err, store.ErrConnectionChanged) {
			return AuthorizeResult{}, ErrChanged
		}
		if err != nil {
			return AuthorizeResult{}, err
		}
	}
	state, verifier := oauth.NewState()
	digest := stateDigest(state)
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
		Verifier: sealedVerifier, RedirectURI: site.RedirectURI, Discovery: string(disc),
		ExpiresAt: expires, Expires: now.Add(StateTTL).Unix(), CreatedAt: store.FormatTime(now),
	})
	if err != nil {
		return AuthorizeResult{}, err
	}
	return AuthorizeResult{AuthorizationURL: oauth.AuthURL(d, client, site.RedirectURI, state, verifier), ExpiresAt: expires}, nil
}

// clientIssuer is the authorization server the connection's client
// belongs to: the one it was registered at, else (the operator's client)
// the issuer of the last completed authorization; "" when not yet bound.
// A stored discovery that does not decode is an error, not unbound.
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
	cl := oauth.Client{ID: c.OAuth.ClientID, AuthMethod: c.OAuth.ClientAuthMethod, Registered: c.OAuth.ClientRegistered}
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

// stateDigest is what is stored of a state: its SHA-256.
func stateDigest(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// CallbackQuery is the authorization response (GET /v1/oauth/callback).
type CallbackQuery struct {
	Code  string
	State string
	Iss   string
	// Error is the provider's error code, when it answered with one.
	Error string
}

// Bounds on the callback's parameters, which anyone can send.
const (
	maxStateLen = 128
	maxCodeLen  = 4096
)

// Callback completes an authorization: the state is consumed (once, before
// anything else, so a replay finds it spent), checked against the
// connection (same generation, still its owner's), the issuer checked (RFC
// 9207), the code redeemed with the PKCE verifier, and the tokens sealed for
// the next generation, which the connection moves to, active. Runs bound to
// the previous generation are refused from their next call on.
func (s *Service) Callback(ctx context.Context, q CallbackQuery) (View, error) {
	if s.sealer == nil {
		return View{}, ErrNoSealer
	}
	if q.State == "" || len(q.State) > maxStateLen || len(q.Code) > maxCodeLen {
		return View{}, ErrState
	}
	now := s.opts.Now()
	digest := stateDigest(q.State)
	st, err := s.st.ConsumeOAuthState(ctx, digest, store.FormatTime(now))
	if errors.Is(err, store.ErrNotFound) {
		return View{}, ErrState
	}
	if err != nil {
		return View{}, err
	}
	if exp, err := time.Parse(time.RFC3339Nano, st.ExpiresAt); err != nil || !now.Before(exp) {
		return View{}, ErrState
	}
	if q.Error != "" || q.Code == "" {
		return View{}, ErrAuthorizationDenied
	}
	c, err := s.st.GetConnection(ctx, st.ConnectionID)
	if errors.Is(err, store.ErrNotFound) {
		return View{}, ErrNotFound
	}
	if err != nil {
		return View{}, err
	}
	switch {
	case c.Status == store.ConnectionRevoked:
		return View{}, ErrRevoked
	case c.CredentialType != CredentialOAuth:
		return View{}, ErrChanged
	case c.Generation != st.Generation:
		// Authorized (or replaced) since this URL was made.
		return View{}, ErrChanged
	case c.Kind != store.ConnectionShared && c.Owner != st.Subject:
		// A personal connection takes only its owner's grant.
		return View{}, ErrForbidden
	}
	var d oauth.Discovery
	if err := json.Unmarshal([]byte(st.Discovery), &d); err != nil {
		return View{}, fmt.Errorf("connection: decode discovery of %s: %w", c.ID, err)
	}
	if err := oauth.CheckIssuer(d, q.Iss); err != nil {
		return View{}, err
	}
	if iss, err := clientIssuer(c); err != nil {
		return View{}, err
	} else if iss != "" && iss != d.Issuer {
		// The connection's client was registered at another server since
		// this URL was made (a concurrent authorization): its secret is not
		// sent to this one's token endpoint.
		return View{}, ErrChanged
	}
	verifier, err := s.sealer.Open(ctx, st.Verifier, stateSealContext(c.ID, digest))
	if err != nil {
		return View{}, fmt.Errorf("connection: open verifier of %s: %w", c.ID, err)
	}
	defer clear(verifier)
	client, err := s.client(ctx, c)
	if err != nil {
		return View{}, err
	}
	if client.ID == "" {
		return View{}, ErrChanged
	}
	tok, err := oauth.Exchange(ctx, s.opts.OAuthClient, d, client, st.RedirectURI, q.Code, string(verifier))
	if err != nil {
		return View{}, err
	}
	sealed, expires, err := s.sealTokens(ctx, c.ID, c.Generation+1, tok)
	if err != nil {
		return View{}, err
	}
	updated, err := s.st.AuthorizeConnection(ctx, c.ID, c.Generation, sealed, st.Discovery, expires, store.FormatTime(s.opts.Now()))
	if errors.Is(err, store.ErrConnectionChanged) {
		return View{}, ErrChanged
	}
	if err != nil {
		return View{}, err
	}
	s.tools.forget(c.ID)
	return viewOf(updated), nil
}

// tokenSet is the sealed plaintext of an OAuth connection's credential.
type tokenSet struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
}

func (s *Service) sealTokens(ctx context.Context, id string, gen int, tok *oauth2.Token) ([]byte, string, error) {
	ts := tokenSet{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}
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
