// Package sso verifies the JWTs of people signed in through an OIDC issuer
// (SSO mode) and turns them into auth principals. It is apart from auth so
// that a function which never serves a person (the gate) links no OIDC or
// JOSE code: auth holds the principal and the token checks every function
// needs.
//
// Guarantees: only asymmetric signatures pass ("none" and HMAC never do);
// the issuer, audience, expiry and not-before are checked; a failure to
// fetch the issuer's keys is told apart from a bad token
// (ErrIssuerUnavailable, answered 503 and never allowed); no error carries
// the token.
package sso

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/config"
)

// DefaultRolesClaim is the claim roles are read from unless configured.
const DefaultRolesClaim = "fluidbox_roles"

// Errors of OIDC verification. Neither ever carries the token.
var (
	// ErrInvalidToken: the JWT is malformed, badly signed, expired, not yet
	// valid, or issued by or for someone else. Answer 401.
	ErrInvalidToken = errors.New("sso: invalid token")
	// ErrIssuerUnavailable: the issuer's keys could not be fetched, so the
	// token could not be checked either way. Answer 503, never allow.
	ErrIssuerUnavailable = errors.New("sso: OIDC issuer unavailable")
)

// Config is what an OIDC verifier is built from.
type Config struct {
	// Issuer is the issuer URL; its discovery document must name exactly it.
	Issuer string
	// Audience must be among the token's aud values.
	Audience string
	// RolesClaim names the claim carrying roles; "" means DefaultRolesClaim.
	RolesClaim string
	// Client fetches the discovery document and the keys; nil means
	// http.DefaultClient. Give it a timeout.
	Client *http.Client
	// Now is the clock expiry is checked against; nil means time.Now.
	Now func() time.Time
}

// Verifier verifies JWTs from one issuer for one audience and turns them into
// principals. It is safe for concurrent use; build one per process: it
// caches the issuer's keys and refetches them when no cached key verifies
// a token, which is how it follows the issuer's key rotation.
type Verifier struct {
	verifier   *oidc.IDTokenVerifier
	rolesClaim string
	signIn     BrowserSignIn
}

// BrowserSignIn is what a browser needs to sign a person in with the
// issuer (authorization code with PKCE, as a public client): the
// verifier's audience is the client id, since the ID token the browser
// gets back must be for it.
type BrowserSignIn struct {
	Issuer                string
	ClientID              string
	AuthorizationEndpoint string
	TokenEndpoint         string
	RolesClaim            string
}

// BrowserSignIn says how the approvals page signs people in.
func (v *Verifier) BrowserSignIn() BrowserSignIn { return v.signIn }

// NewVerifier reads the issuer's discovery document and returns a verifier. The
// signing keys are fetched on first use.
func NewVerifier(ctx context.Context, cfg Config) (*Verifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("sso: OIDC needs an issuer and an audience")
	}
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = DefaultRolesClaim
	}
	if cfg.Client != nil {
		// The provider keeps this client for every later key fetch.
		ctx = oidc.ClientContext(ctx, cfg.Client)
	}
	provider, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("sso: OIDC discovery at %s: %w", cfg.Issuer, err)
	}
	var meta struct {
		JWKSURL    string   `json:"jwks_uri"`
		Algorithms []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := provider.Claims(&meta); err != nil || meta.JWKSURL == "" {
		return nil, fmt.Errorf("sso: OIDC discovery at %s: no jwks_uri", cfg.Issuer)
	}
	// This is what provider.Verifier builds, with the key set wrapped so a
	// failure to fetch keys can be told apart from a bad token (go-oidc
	// flattens that error into text). NewProvider has checked that the
	// discovery document names exactly cfg.Issuer.
	keys := fetchWatcher{oidc.NewRemoteKeySet(ctx, meta.JWKSURL)}
	v := oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: signingAlgs(meta.Algorithms),
		Now:                  cfg.Now,
	})
	ep := provider.Endpoint()
	return &Verifier{verifier: v, rolesClaim: cfg.RolesClaim, signIn: BrowserSignIn{
		Issuer: cfg.Issuer, ClientID: cfg.Audience, RolesClaim: cfg.RolesClaim,
		AuthorizationEndpoint: ep.AuthURL, TokenEndpoint: ep.TokenURL,
	}}, nil
}

// signingAlgs keeps the asymmetric algorithms of the issuer's list; with
// none left the verifier uses RS256, the one every issuer must support.
// "none" and HMAC (whose key would be public in the JWKS) never pass.
func signingAlgs(listed []string) []string {
	var out []string
	for _, a := range listed {
		switch a {
		case oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA:
			out = append(out, a)
		}
	}
	return out
}

// fetchWatcher is the issuer's key set, noting in the request's context
// when the keys could not be fetched at all.
type fetchWatcher struct{ keys oidc.KeySet }

type fetchFailedKey struct{}

func (f fetchWatcher) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := f.keys.VerifySignature(ctx, jwt)
	var ue *url.Error
	if errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) {
		if failed, ok := ctx.Value(fetchFailedKey{}).(*bool); ok {
			*failed = true
		}
	}
	return payload, err
}

// Verify checks raw's signature against the issuer's keys, its issuer,
// audience, expiry and not-before, and returns the user it names: Subject is
// the sub claim, Roles the known roles of the roles claim (a list of strings
// or one string; unknown values and non-strings are ignored, so a token
// with none holds no role). Errors wrap ErrInvalidToken or
// ErrIssuerUnavailable and never contain the token.
func (o *Verifier) Verify(ctx context.Context, raw string) (auth.Principal, error) {
	fetchFailed := new(bool)
	tok, err := o.verifier.Verify(context.WithValue(ctx, fetchFailedKey{}, fetchFailed), raw)
	if err != nil {
		if *fetchFailed || ctx.Err() != nil {
			// The keys could not be fetched: the token is neither good nor
			// bad yet. The text names the keys' URL, never the token.
			return auth.Principal{}, fmt.Errorf("%w: %v", ErrIssuerUnavailable, err)
		}
		// go-oidc's messages name the failed check (expired, audience,
		// issuer, signature) and never quote the token.
		return auth.Principal{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if tok.Subject == "" {
		return auth.Principal{}, fmt.Errorf("%w: no sub claim", ErrInvalidToken)
	}
	var claims map[string]json.RawMessage
	if err := tok.Claims(&claims); err != nil {
		return auth.Principal{}, fmt.Errorf("%w: claims are not a JSON object", ErrInvalidToken)
	}
	return auth.Principal{Kind: auth.KindUser, Subject: tok.Subject, Roles: knownRoles(claims[o.rolesClaim]), Email: verifiedEmail(claims)}, nil
}

// verifiedEmail is the token's email claim, lower-cased, unless the issuer
// says it is unverified (email_verified false); "" when there is none.
func verifiedEmail(claims map[string]json.RawMessage) string {
	var email string
	if json.Unmarshal(claims["email"], &email) != nil || !strings.Contains(email, "@") {
		return ""
	}
	var verified bool
	if raw, ok := claims["email_verified"]; ok && (json.Unmarshal(raw, &verified) != nil || !verified) {
		return ""
	}
	return strings.ToLower(email)
}

// knownRoles reads a roles claim: a list of strings or one string. It keeps
// the known roles, each once, in a fixed order.
func knownRoles(raw json.RawMessage) []string {
	var list []any
	if err := json.Unmarshal(raw, &list); err != nil {
		var one string
		if json.Unmarshal(raw, &one) != nil {
			return nil
		}
		list = []any{one}
	}
	var out []string
	for _, role := range []string{auth.RoleAdmin, auth.RoleApprover, auth.RoleMember} {
		for _, v := range list {
			if s, ok := v.(string); ok && s == role {
				out = append(out, role)
				break
			}
		}
	}
	return out
}

// Timeout bounds one request to the issuer (discovery or keys), well
// inside API Gateway's 29 s.
const Timeout = 5 * time.Second

// Load builds the verifier cfg asks for, or nil when SSO is off. Discovery
// happens now, once per process; the issuer's keys are fetched on first
// use and cached for the life of the process.
func Load(ctx context.Context, cfg config.Config) (*Verifier, error) {
	if !cfg.RequireSSO {
		return nil, nil
	}
	return NewVerifier(ctx, Config{
		Issuer:     cfg.OIDCIssuer,
		Audience:   cfg.OIDCAudience,
		RolesClaim: cfg.OIDCRolesClaim,
		Client:     &http.Client{Timeout: Timeout},
	})
}
