package oauth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fluidbox/fluidbox/shared/oauth"
)

// TestErrorCodeNeverEchoesASecret: a token or registration endpoint that
// answers with an "error" code made of what it was sent (the code, the
// verifier, the refresh token, the client secret: each a plain token by
// RFC 6749's alphabet), or any other text of its choosing, gets none of it
// into the error, which reaches logs and answer bodies. Only registered
// OAuth error codes are kept.
func TestErrorCodeNeverEchoesASecret(t *testing.T) {
	t.Parallel()
	const (
		code     = "code_CANARY-0123456789abcdef"
		verifier = "verifier_CANARY-0123456789abcdef0123456789abcdef"
		refresh  = "refresh_CANARY-0123456789abcdef"
		secret   = "secret_CANARY-0123456789abcdef"
	)
	var echo atomic.Value // the form field the endpoint answers with
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		field := echo.Load().(string)
		got := r.PostForm.Get(field)
		switch field {
		case "client_secret":
			_, got, _ = r.BasicAuth()
		case "registration":
			got = secret // text of the provider's choosing
		case "registered":
			got = "invalid_grant"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": got})
	}))
	t.Cleanup(srv.Close)
	d := oauth.Discovery{Resource: "http://127.0.0.1:1/mcp", Issuer: srv.URL, AuthURL: srv.URL + "/authorize", TokenURL: srv.URL + "/token", RegistrationURL: srv.URL + "/register"}
	c := oauth.Client{ID: "client", Secret: secret, AuthMethod: "client_secret_basic"}
	ctx := context.Background()
	hc := loopbackClient()
	cases := []struct {
		name, echo string
		do         func() error
	}{
		{"exchange echoing the code", "code", func() error {
			_, err := oauth.Exchange(ctx, hc, d, c, redirect, code, verifier)
			return err
		}},
		{"exchange echoing the verifier", "code_verifier", func() error {
			_, err := oauth.Exchange(ctx, hc, d, c, redirect, code, verifier)
			return err
		}},
		{"refresh echoing the refresh token", "refresh_token", func() error {
			_, err := oauth.Refresh(ctx, hc, d, c, refresh)
			return err
		}},
		{"refresh echoing the client secret", "client_secret", func() error {
			_, err := oauth.Refresh(ctx, hc, d, c, refresh)
			return err
		}},
		{"registration echoing a secret", "registration", func() error {
			_, err := oauth.Register(ctx, hc, d, oauth.Site{RedirectURI: redirect}, nil)
			return err
		}},
	}
	for _, tc := range cases {
		echo.Store(tc.echo)
		err := tc.do()
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		for _, s := range []string{code, verifier, refresh, secret} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error carries a secret: %v", tc.name, err)
			}
		}
	}
	// A registered code is still named.
	echo.Store("registered")
	if _, err := oauth.Refresh(ctx, hc, d, c, refresh); err == nil || !strings.Contains(err.Error(), "(invalid_grant)") {
		t.Errorf("refresh refused with invalid_grant: %v, want the code named", err)
	}
}
