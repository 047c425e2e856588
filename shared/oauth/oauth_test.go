package oauth_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/oauth"
)

const redirect = "http://127.0.0.1:1/v1/oauth/callback"

func setup(t *testing.T) (*oauthtest.Provider, *oauthtest.Server, oauth.Discovery) {
	t.Helper()
	p := oauthtest.NewProvider(t, redirect)
	s := oauthtest.NewServer(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := oauth.Discover(ctx, oauth.NewClient(nil), s.URL, nil)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return p, s, d
}

func TestDiscoverFromChallenge(t *testing.T) {
	p, s, d := setup(t)
	if d.Resource != s.URL || d.Issuer != p.Issuer || d.TokenURL == "" || d.AuthURL == "" {
		t.Fatalf("discovery = %+v", d)
	}
	if !slices.Contains(d.Scopes, "openid") || !slices.Contains(d.Scopes, "offline_access") {
		t.Fatalf("scopes = %v, want the resource's and offline_access", d.Scopes)
	}
}

func TestDiscoverRefusesMismatchedResource(t *testing.T) {
	p := oauthtest.NewProvider(t, redirect)
	s := oauthtest.NewServer(t, p)
	s.SetResource("https://elsewhere.example/mcp")
	_, err := oauth.Discover(context.Background(), oauth.NewClient(nil), s.URL, nil)
	if !errors.Is(err, oauth.ErrDiscovery) {
		t.Fatalf("Discover with a foreign resource: %v, want ErrDiscovery", err)
	}
}

func TestAuthorizationCodeAndRefresh(t *testing.T) {
	p, s, d := setup(t)
	ctx := context.Background()
	hc := oauth.NewClient(nil)
	c, err := oauth.Register(ctx, hc, d, redirect, &oauth.Client{ID: p.ClientID, Secret: p.Secret})
	if err != nil {
		t.Fatal(err)
	}
	state, verifier := oauth.NewState()
	au := oauth.AuthURL(d, c, redirect, state, verifier)
	q := mustQuery(t, au)
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") != s.URL || q.Get("state") != state {
		t.Fatalf("authorization URL lacks PKCE, resource or state: %s", au)
	}
	if strings.Contains(au, verifier) {
		t.Fatal("the verifier is in the authorization URL")
	}
	back, err := p.Login(ctx, au, p.User1())
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("state") != state {
		t.Fatalf("state came back as %q", back.Query().Get("state"))
	}
	if err := oauth.CheckIssuer(d, back.Query().Get("iss")); err != nil {
		t.Fatal(err)
	}
	if err := oauth.CheckIssuer(d, "http://127.0.0.1:9/evil"); !errors.Is(err, oauth.ErrIssuer) {
		t.Fatalf("wrong iss: %v", err)
	}
	if _, err := oauth.Exchange(ctx, hc, d, c, redirect, back.Query().Get("code"), "wrong-verifier-wrong-verifier-wrong-verifier"); !errors.Is(err, oauth.ErrGrant) {
		t.Fatalf("exchange with the wrong verifier: %v, want ErrGrant", err)
	}
	// The failed exchange above spent nothing the right one needs? The
	// provider deletes a code on its first use, so start again.
	state, verifier = oauth.NewState()
	back, err = p.Login(ctx, oauth.AuthURL(d, c, redirect, state, verifier), p.User1())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := oauth.Exchange(ctx, hc, d, c, redirect, back.Query().Get("code"), verifier)
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token")
	}
	if err := s.Verify(ctx, tok.AccessToken); err != nil {
		t.Fatalf("the MCP server refuses the access token: %v", err)
	}
	tok2, err := oauth.Refresh(ctx, hc, d, c, tok.RefreshToken)
	if err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if tok2.RefreshToken == tok.RefreshToken || tok2.AccessToken == tok.AccessToken {
		t.Fatal("the provider did not rotate")
	}
	// Rotation: the old refresh token is spent.
	_, err = oauth.Refresh(ctx, hc, d, c, tok.RefreshToken)
	var oe *oauth.Error
	if !errors.Is(err, oauth.ErrGrant) || !errors.As(err, &oe) {
		t.Fatalf("reusing a rotated refresh token: %v, want ErrGrant", err)
	}
	for _, secret := range []string{tok.RefreshToken, tok.AccessToken, p.Secret, verifier} {
		if strings.Contains(err.Error(), secret) {
			t.Fatal("an error carries a secret")
		}
	}
}

func TestRegisterWithoutClientOrEndpoint(t *testing.T) {
	_, _, d := setup(t)
	if _, err := oauth.Register(context.Background(), oauth.NewClient(nil), d, redirect, nil); !errors.Is(err, oauth.ErrRegistration) {
		t.Fatalf("Register: %v, want ErrRegistration (the provider has no registration endpoint)", err)
	}
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}
