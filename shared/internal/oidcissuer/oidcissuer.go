// Package oidcissuer is a real OpenID Connect issuer for tests: an HTTP
// server on 127.0.0.1 serving a discovery document and a JWKS with an
// ECDSA P-256 public key generated for the test, and ES256 tokens signed
// with its private key. Verifiers under test reach it over HTTP exactly as
// they would reach an identity provider.
//
// It also signs people in as a browser would meet it: the authorization
// code flow with PKCE (S256 only) for the public client named by its
// audience, with a CORS-enabled token endpoint, so a single-page app can
// sign in against it. Whoever SignInAs names is signed in at once.
package oidcissuer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// KeyID names the issuer's signing key in its JWKS and in its tokens.
const KeyID = "test-key-1"

// Issuer is a running test issuer.
type Issuer struct {
	// URL is the issuer URL (also the iss of its tokens).
	URL string
	// Audience is the aud its tokens carry by default.
	Audience string
	key      *ecdsa.PrivateKey
	srv      *httptest.Server
	t        testing.TB

	mu        sync.Mutex
	user      map[string]any           // claims of whoever /authorize signs in
	codes     map[string]authorization // issued, unused codes
	exchanged int                      // codes redeemed with a good verifier
}

// authorization is what an issued code was given for.
type authorization struct {
	clientID, redirectURI, challenge, nonce string
	claims                                  map[string]any
}

// Start runs an issuer until the test ends.
func Start(t testing.TB, audience string) *Issuer {
	t.Helper()
	i := &Issuer{Audience: audience, key: NewKey(t), t: t, codes: map[string]authorization{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"issuer":                                i.URL,
			"authorization_endpoint":                i.URL + "/authorize",
			"token_endpoint":                        i.URL + "/token",
			"jwks_uri":                              i.URL + "/jwks",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"ES256"},
			"code_challenge_methods_supported":      []string{"S256"},
			"grant_types_supported":                 []string{"authorization_code"},
		})
	})
	mux.HandleFunc("GET /authorize", i.authorize)
	mux.HandleFunc("POST /token", i.token)
	mux.HandleFunc("OPTIONS /token", i.token)
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &i.key.PublicKey, KeyID: KeyID, Algorithm: "ES256", Use: "sig"}}})
	})
	// The URL is fixed before the server starts serving, so handlers read
	// it without a race.
	i.srv = httptest.NewUnstartedServer(mux)
	i.URL = "http://" + i.srv.Listener.Addr().String()
	i.srv.Start()
	t.Cleanup(i.srv.Close)
	return i
}

// Close stops the issuer early (to see what verifiers do when it is down).
func (i *Issuer) Close() { i.srv.Close() }

// NewKey generates a signing key.
func NewKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return k
}

// Claims returns the claims of a good token for sub, valid for ten minutes:
// iss, aud, sub, iat, exp, and roles under claim when roles is not nil.
// Change the map to make a bad one.
func (i *Issuer) Claims(sub, claim string, roles any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": i.URL, "aud": i.Audience, "sub": sub,
		"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
	}
	if roles != nil {
		c[claim] = roles
	}
	return c
}

// Sign signs claims with the issuer's key.
func (i *Issuer) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return Sign(t, i.key, KeyID, claims)
}

// Sign signs claims as an ES256 JWT with key, naming kid in its header.
func Sign(t testing.TB, key *ecdsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatalf("marshal claims: %v", err)
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"),
	)
	if err != nil {
		t.Fatalf("signer: %v", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return tok
}

// SignInAs makes /authorize sign in the person with these claims (sub,
// email, roles, ...; iss, aud, iat, exp and nonce are added). nil signs
// nobody in: /authorize then answers access_denied.
func (i *Issuer) SignInAs(claims map[string]any) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.user = claims
}

// Exchanged is how many codes were redeemed at /token with the right
// client, redirect URI and PKCE verifier.
func (i *Issuer) Exchanged() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.exchanged
}

// authorize is the authorization endpoint: it checks the request as an
// identity provider would (a known public client, S256 PKCE, a redirect
// URI) and redirects back with a code for whoever SignInAs named.
func (i *Issuer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Host == "" || (redirect.Scheme != "http" && redirect.Scheme != "https") {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	back := redirect.Query()
	back.Set("state", q.Get("state"))
	i.mu.Lock()
	user := i.user
	i.mu.Unlock()
	switch {
	case q.Get("client_id") != i.Audience:
		back.Set("error", "unauthorized_client")
	case q.Get("response_type") != "code":
		back.Set("error", "unsupported_response_type")
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		back.Set("error", "invalid_request")
	case user == nil:
		back.Set("error", "access_denied")
	default:
		code := randomString(i.t)
		i.mu.Lock()
		i.codes[code] = authorization{
			clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"),
			challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), claims: user,
		}
		i.mu.Unlock()
		back.Set("code", code)
	}
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token is the token endpoint: a code is redeemed once, by the client and
// redirect URI it was issued for, with the verifier whose S256 digest is
// the challenge. Any origin may call it (CORS), as a public client's
// token endpoint allows.
func (i *Issuer) token(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodOptions {
		h.Set("Access-Control-Allow-Methods", "POST")
		h.Set("Access-Control-Allow-Headers", "Content-Type")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err := r.ParseForm(); err != nil {
		tokenError(w, "invalid_request")
		return
	}
	f := r.PostForm
	i.mu.Lock()
	a, ok := i.codes[f.Get("code")]
	delete(i.codes, f.Get("code"))
	i.mu.Unlock()
	digest := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case f.Get("grant_type") != "authorization_code" || !ok:
		tokenError(w, "invalid_grant")
		return
	case f.Get("client_id") != a.clientID || f.Get("redirect_uri") != a.redirectURI:
		tokenError(w, "invalid_grant")
		return
	case base64.RawURLEncoding.EncodeToString(digest[:]) != a.challenge:
		tokenError(w, "invalid_grant")
		return
	}
	claims := i.Claims("", "", nil)
	for k, v := range a.claims {
		claims[k] = v
	}
	if a.nonce != "" {
		claims["nonce"] = a.nonce
	}
	tok := i.Sign(i.t, claims)
	i.mu.Lock()
	i.exchanged++
	i.mu.Unlock()
	writeJSON(w, map[string]any{"id_token": tok, "access_token": tok, "token_type": "Bearer", "expires_in": 600})
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func randomString(t testing.TB) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Errorf("random: %v", err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
