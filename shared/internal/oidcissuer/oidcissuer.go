// Package oidcissuer is a real OpenID Connect issuer for tests: an HTTP
// server on 127.0.0.1 serving a discovery document and a JWKS with an
// ECDSA P-256 public key generated for the test, and ES256 tokens signed
// with its private key. Verifiers under test reach it over HTTP exactly as
// they would reach an identity provider.
package oidcissuer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
}

// Start runs an issuer until the test ends.
func Start(t testing.TB, audience string) *Issuer {
	t.Helper()
	i := &Issuer{Audience: audience, key: NewKey(t)}
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
		})
	})
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

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
