package sso_test

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/internal/oidcissuer"
	"github.com/fluidbox/fluidbox/shared/sso"
)

const audience = "fluidbox-test"

func newVerifier(t *testing.T, iss *oidcissuer.Issuer, claim string) *sso.Verifier {
	t.Helper()
	o, err := sso.NewVerifier(context.Background(), sso.Config{Issuer: iss.URL, Audience: audience, RolesClaim: claim})
	if err != nil {
		t.Fatalf("NewOIDC(%s) = %v", iss.URL, err)
	}
	return o
}

func TestOIDCVerifyRoles(t *testing.T) {
	t.Parallel()
	iss := oidcissuer.Start(t, audience)
	o := newVerifier(t, iss, "")
	cases := []struct {
		name  string
		roles any
		want  []string
	}{
		{"list", []any{"approver", "admin"}, []string{"admin", "approver"}},
		{"one string", "approver", []string{"approver"}},
		{"unknown ignored", []any{"superuser", "member", "Admin"}, []string{"member"}},
		{"non-strings ignored", []any{1, true, map[string]any{"admin": true}, "approver"}, []string{"approver"}},
		{"duplicates once", []any{"admin", "admin"}, []string{"admin"}},
		{"a number", 7, nil},
		{"an object", map[string]any{"role": "admin"}, nil},
		{"no claim", nil, nil},
	}
	for _, c := range cases {
		tok := iss.Sign(t, iss.Claims("u-1", sso.DefaultRolesClaim, c.roles))
		p, err := o.Verify(context.Background(), tok)
		if err != nil {
			t.Errorf("%s: Verify = %v, want a principal", c.name, err)
			continue
		}
		if p.Kind != auth.KindUser || p.Subject != "u-1" || !slices.Equal(p.Roles, c.want) {
			t.Errorf("%s: Verify = %+v, want user u-1 with roles %v", c.name, p, c.want)
		}
	}
}

func TestOIDCRolesClaimName(t *testing.T) {
	t.Parallel()
	iss := oidcissuer.Start(t, audience)
	o := newVerifier(t, iss, "groups")
	claims := iss.Claims("u-2", "groups", []any{"admin"})
	claims[sso.DefaultRolesClaim] = []any{"approver"} // not the configured claim
	p, err := o.Verify(context.Background(), iss.Sign(t, claims))
	if err != nil || !p.IsAdmin() || p.HasRole(auth.RoleApprover) {
		t.Fatalf("Verify = %+v, %v; want admin from the groups claim only", p, err)
	}
}

func TestOIDCVerifyRefuses(t *testing.T) {
	t.Parallel()
	iss := oidcissuer.Start(t, audience)
	o := newVerifier(t, iss, "")
	other := oidcissuer.NewKey(t)
	good := func() map[string]any { return iss.Claims("u-1", sso.DefaultRolesClaim, []any{"admin"}) }
	with := func(k string, v any) string {
		c := good()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return iss.Sign(t, c)
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	body := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"` + iss.URL + `","aud":"` + audience + `","sub":"u-1","exp":9999999999}`))
	cases := []struct{ name, tok string }{
		{"expired", with("exp", time.Now().Add(-time.Minute).Unix())},
		{"not yet valid", with("nbf", time.Now().Add(time.Hour).Unix())},
		{"wrong audience", with("aud", "someone-else")},
		{"wrong issuer", with("iss", "https://evil.example.com")},
		{"no sub", with("sub", nil)},
		{"another key, same kid", oidcissuer.Sign(t, other, oidcissuer.KeyID, good())},
		{"another key, unknown kid", oidcissuer.Sign(t, other, "other", good())},
		{"alg none", header + "." + body + "."},
		{"not a JWT", "eyJhbGciOiJFUzI1NiJ9.bm90anNvbg.c2ln"},
		{"garbage", "not-a-token-at-all"},
	}
	for _, c := range cases {
		p, err := o.Verify(context.Background(), c.tok)
		if !errors.Is(err, sso.ErrInvalidToken) {
			t.Errorf("%s: Verify = %+v, %v; want ErrInvalidToken", c.name, p, err)
			continue
		}
		if strings.Contains(err.Error(), c.tok) || (len(c.tok) > 20 && strings.Contains(err.Error(), c.tok[len(c.tok)-20:])) {
			t.Errorf("%s: error %q quotes the token", c.name, err)
		}
	}
}

// TestOIDCIssuerDown: keys that cannot be fetched are unavailability, not a
// verdict on the token.
func TestOIDCIssuerDown(t *testing.T) {
	t.Parallel()
	iss := oidcissuer.Start(t, audience)
	o := newVerifier(t, iss, "")
	tok := iss.Sign(t, iss.Claims("u-1", sso.DefaultRolesClaim, "admin"))
	iss.Close()
	if _, err := o.Verify(context.Background(), tok); !errors.Is(err, sso.ErrIssuerUnavailable) {
		t.Fatalf("Verify with the issuer down = %v, want ErrIssuerUnavailable", err)
	}
}

func TestNewOIDCIssuerMismatch(t *testing.T) {
	t.Parallel()
	iss := oidcissuer.Start(t, audience)
	_, err := sso.NewVerifier(context.Background(), sso.Config{Issuer: iss.URL + "/", Audience: audience})
	if err == nil {
		t.Fatal("NewOIDC with an issuer the discovery document does not name = nil, want an error")
	}
	if _, err := sso.NewVerifier(context.Background(), sso.Config{Issuer: iss.URL}); err == nil {
		t.Fatal("NewOIDC without an audience = nil, want an error")
	}
}

func TestPrincipalRoles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p               auth.Principal
		admin, approver bool
	}{
		{auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}, true, false},
		{auth.Principal{Kind: auth.KindUser, Subject: "u", Roles: []string{"admin"}}, true, false},
		{auth.Principal{Kind: auth.KindUser, Subject: "u", Roles: []string{"approver"}}, false, true},
		{auth.Principal{Kind: auth.KindUser, Subject: "u"}, false, false},
		// Roles count only on SSO users.
		{auth.Principal{Kind: auth.KindSession, Subject: "ses_1", RunID: "ses_1", Roles: []string{"admin", "approver"}}, false, false},
	}
	for _, c := range cases {
		if got := c.p.IsAdmin(); got != c.admin {
			t.Errorf("%+v.IsAdmin() = %v, want %v", c.p, got, c.admin)
		}
		if got := c.p.HasRole(auth.RoleApprover); got != c.approver {
			t.Errorf("%+v.HasRole(approver) = %v, want %v", c.p, got, c.approver)
		}
	}
}

// The page signs people in with what the issuer's discovery document
// names, as a public client whose id is the verifier's audience.
func TestBrowserSignIn(t *testing.T) {
	t.Parallel()
	iss := oidcissuer.Start(t, audience)
	got := newVerifier(t, iss, "").BrowserSignIn()
	want := sso.BrowserSignIn{
		Issuer: iss.URL, ClientID: audience, RolesClaim: sso.DefaultRolesClaim,
		AuthorizationEndpoint: iss.URL + "/authorize", TokenEndpoint: iss.URL + "/token",
	}
	if got != want {
		t.Errorf("BrowserSignIn() = %+v, want %+v", got, want)
	}
}
