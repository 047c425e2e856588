package connection_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/oauth"
	"github.com/fluidbox/fluidbox/shared/store"
)

// createOAuth creates an OAuth connection to e's upstream with credential.
func (e *oauthEnv) createOAuth(t *testing.T, svc *connection.Service, who auth.Principal, name string, credential map[string]any) (connection.View, error) {
	t.Helper()
	var req connection.CreateRequest
	body, _ := json.Marshal(map[string]any{
		"name": name, "url": e.up.URL, "kind": "shared", "tool_classes": map[string]string{"whoami": "read"}, "credential": credential,
	})
	if err := json.Unmarshal(body, &req); err != nil {
		return connection.View{}, err
	}
	return svc.Create(context.Background(), who, req)
}

// TestOAuthCallbackBoundToTheBrowser: the authorization URL is fluidbox's
// authorize redirect, opened once; the authorization server's URL it
// sends the browser to carries a state that opens nothing, and the
// response is taken only from the browser holding the redirect's nonce.
// A response delivered by another browser (none, or another nonce) is
// refused before any token request and spends the state.
func TestOAuthCallbackBoundToTheBrowser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, admin, "team", "shared")

	res, err := svc.Authorize(ctx, admin, v.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.AuthorizationURL, oauthSite.StartURL+"?key=") {
		t.Fatalf("authorization URL %q, want the authorize redirect", res.AuthorizationURL)
	}
	st := start(t, svc, res)
	u, _ := url.Parse(res.AuthorizationURL)
	if _, err := svc.Start(ctx, u.Query().Get("key")); !errors.Is(err, connection.ErrState) {
		t.Errorf("the authorize redirect opened twice: %v, want ErrState", err)
	}
	state := mustQuery(t, st.URL).Get("state")
	if state == "" || strings.Contains(res.AuthorizationURL, state) {
		t.Fatalf("state %q: missing from the server's URL, or in fluidbox's", state)
	}
	if _, err := svc.Start(ctx, state); !errors.Is(err, connection.ErrState) {
		t.Errorf("the state as a start key: %v, want ErrState", err)
	}

	for _, nonce := range []string{"", "another-browsers-nonce"} {
		res, err := svc.Authorize(ctx, admin, v.ID, oauthSite)
		if err != nil {
			t.Fatal(err)
		}
		q := e.respond(t, start(t, svc, res), e.p.User1())
		q.Nonce = nonce
		codes := e.p.Codes()
		if _, err := svc.Callback(ctx, q); !errors.Is(err, connection.ErrBrowser) {
			t.Errorf("callback with nonce %q: %v, want ErrBrowser", nonce, err)
		}
		if n := e.p.Codes() - codes; n != 0 {
			t.Errorf("callback from another browser: %d code redemptions", n)
		}
	}
	// The browser that started it completes it.
	a, err := svc.Callback(ctx, e.respond(t, st, e.p.User1()))
	if err != nil || a.View.Status != store.ConnectionActive || !a.Refreshable {
		t.Fatalf("callback from the starting browser: %+v %v", a, err)
	}
}

// TestOAuthClientIssuerBoundAtCreation: the operator's client is bound to
// the issuer named with it at creation; without one it is refused, and an
// upstream whose metadata names another server is refused before either
// server sees the client or a token request.
func TestOAuthClientIssuerBoundAtCreation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	for _, cred := range []map[string]any{
		{"type": "oauth", "client_id": e.p.ClientID, "client_secret": e.p.Secret},
		{"type": "oauth", "issuer": e.p.Issuer},
		{"type": "oauth", "client_id": e.p.ClientID, "issuer": "ftp://127.0.0.1/x"},
		{"type": "oauth", "client_id": e.p.ClientID, "issuer": e.p.Issuer + "?x=1"},
	} {
		var ie *connection.InvalidError
		if _, err := e.createOAuth(t, svc, admin, "bad", cred); !errors.As(err, &ie) {
			t.Errorf("create with %v: %v, want an InvalidError", cred, err)
		}
	}
	other := oauthtest.NewProvider(t, oauthRedirect)
	v, err := e.createOAuth(t, svc, admin, "team", map[string]any{"type": "oauth", "client_id": e.p.ClientID, "client_secret": e.p.Secret, "issuer": other.Issuer})
	if err != nil {
		t.Fatal(err)
	}
	if v.OAuth == nil || v.OAuth.Issuer != other.Issuer || !v.OAuth.ConsentPrompt {
		t.Fatalf("view %+v", v.OAuth)
	}
	if _, err := svc.Authorize(ctx, admin, v.ID, oauthSite); !errors.Is(err, oauth.ErrDiscovery) {
		t.Fatalf("authorize where the upstream names another issuer than the client's: %v, want ErrDiscovery", err)
	}
	if len(e.p.Prompts())+len(other.Prompts()) != 0 || e.p.Codes()+other.Codes() != 0 {
		t.Fatal("a server saw the client")
	}
}

// TestOAuthOpenIDConsentAndNoRefreshToken: an OpenID provider that grants
// offline_access only with prompt=consent (OpenID Connect Core 1.0 section
// 11) is sent it and gives a refresh token; a connection with the prompt
// turned off (tenant-wide consent) gets none, and its access token is
// then used until it really expires, without a token request, and the
// connection needs authorization after that.
func TestOAuthOpenIDConsentAndNoRefreshToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	e.p = oauthtest.NewProvider(t, oauthRedirect, oauthtest.StrictOfflineAccess())
	e.up = oauthtest.NewServer(t, e.p)
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	svc := connection.NewService(e.st, e.sealer, connection.Options{Now: now, Egress: testenv.Loopback})

	prompted := e.create(t, svc, admin, "prompted", "shared")
	res, err := svc.Authorize(ctx, admin, prompted.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	a, err := svc.Callback(ctx, e.respond(t, start(t, svc, res), e.p.User1()))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.p.Prompts(); len(got) != 1 || got[0] != "consent" || !a.Refreshable {
		t.Fatalf("prompts %q, refreshable %v: want consent and a refresh token", got, a.Refreshable)
	}

	v, err := e.createOAuth(t, svc, admin, "tenant", map[string]any{"type": "oauth", "client_id": e.p.ClientID, "client_secret": e.p.Secret, "issuer": e.p.Issuer, "consent_prompt": false})
	if err != nil {
		t.Fatal(err)
	}
	if v.OAuth == nil || v.OAuth.ConsentPrompt {
		t.Fatalf("view %+v, want consent_prompt false", v.OAuth)
	}
	res, err = svc.Authorize(ctx, admin, v.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	a, err = svc.Callback(ctx, e.respond(t, start(t, svc, res), e.p.User1()))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.p.Prompts(); got[1] != "" || a.Refreshable || a.ExpiresAt.IsZero() {
		t.Fatalf("prompt %q, refreshable %v, expires %v: want no prompt, no refresh token, an expiry", got[1], a.Refreshable, a.ExpiresAt)
	}
	c, err := e.st.GetConnection(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clock = a.ExpiresAt.Add(-time.Second) // within any refresh margin
	mu.Unlock()
	cred, err := connection.Credential(svc, ctx, c, c.Generation)
	if err != nil || e.up.Verify(ctx, cred.Token) != nil {
		t.Fatalf("a second before expiry: %v, want the access token", err)
	}
	mu.Lock()
	clock = a.ExpiresAt
	mu.Unlock()
	if _, err := connection.Credential(svc, ctx, c, c.Generation); err == nil {
		t.Fatal("the access token was presented after its expiry")
	}
	if n := e.p.Refreshes(); n != 0 {
		t.Fatalf("%d refresh requests without a refresh token", n)
	}
	if got, err := svc.Get(ctx, admin, v.ID); err != nil || got.Status != store.ConnectionAuthorizationRequired {
		t.Fatalf("after expiry: %+v %v, want authorization_required", got, err)
	}
}

func TestRefreshMargin(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		lifetime, want time.Duration
	}{
		{time.Minute, 6 * time.Second},
		{5 * time.Minute, 30 * time.Second},
		{time.Hour, time.Minute},
		{24 * time.Hour, time.Minute},
		{0, time.Minute}, // unknown
	} {
		if got := connection.RefreshMargin(at, at.Add(tc.lifetime)); got != tc.want {
			t.Errorf("RefreshMargin(lifetime %v) = %v, want %v", tc.lifetime, got, tc.want)
		}
	}
	if got := connection.RefreshMargin(time.Time{}, at); got != time.Minute {
		t.Errorf("RefreshMargin(no issue time) = %v, want a minute", got)
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

// TestOAuthCallbackBoundToTheMember: an authorization completes only while
// the member who started it is active; one deactivated meanwhile completes
// nothing (and no code is redeemed).
func TestOAuthCallbackBoundToTheMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	if err := e.st.PutMember(ctx, store.Member{Sub: alice.Subject, Status: store.MemberActive, Roles: alice.Roles}); err != nil {
		t.Fatal(err)
	}
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, alice, "mine", "personal")
	res, err := svc.Authorize(ctx, alice, v.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	q := e.respond(t, start(t, svc, res), e.p.User1())
	if _, err := e.st.SetMemberStatus(ctx, alice.Subject, store.MemberInactive, "admin", store.FormatTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Callback(ctx, q); !errors.Is(err, connection.ErrForbidden) {
		t.Fatalf("callback of a deactivated member: %v, want ErrForbidden", err)
	}
	if e.p.Codes() != 0 {
		t.Fatalf("%d codes redeemed", e.p.Codes())
	}
}

// TestOAuthLegacyOperatorClient: an operator's client stored before
// issuers were named is bound to its first authorization's issuer, which
// its view shows (so that the redirect URI to register is shown too); one
// never authorized is refused at authorize, before any server is asked
// about its client.
func TestOAuthLegacyOperatorClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	base := store.Connection{Name: "old", URL: e.up.URL, Kind: store.ConnectionShared, Owner: "admin", Status: store.ConnectionAuthorizationRequired,
		Generation: 1, CredentialType: connection.CredentialOAuth, CreatedAt: store.FormatTime(time.Now())}
	authorized, never := base, base
	authorized.ID, authorized.OAuth.ClientID, authorized.OAuth.Discovery = "con_legacy1", e.p.ClientID, `{"issuer":"`+e.p.Issuer+`"}`
	never.ID, never.Name, never.OAuth.ClientID = "con_legacy2", "older", e.p.ClientID
	for _, c := range []store.Connection{authorized, never} {
		if err := e.st.PutConnection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := svc.Get(ctx, admin, authorized.ID); err != nil || v.OAuth == nil || v.OAuth.Issuer != e.p.Issuer {
		t.Fatalf("legacy view %+v %v, want the first authorization's issuer", v.OAuth, err)
	}
	var ie *connection.InvalidError
	if _, err := svc.Authorize(ctx, admin, never.ID, oauthSite); !errors.As(err, &ie) {
		t.Fatalf("authorize an operator's client bound to no issuer: %v, want an InvalidError", err)
	}
	if len(e.p.Prompts()) != 0 {
		t.Fatal("the provider saw an authorization request")
	}
}

// TestOAuthStartOnceConcurrently: dozens of browsers opening one authorize
// redirect at once: exactly one gets the authorization server's URL and a
// nonce, and only that nonce completes the authorization.
func TestOAuthStartOnceConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, admin, "team", "shared")
	res, err := svc.Authorize(ctx, admin, v.ID, oauthSite)
	if err != nil {
		t.Fatal(err)
	}
	key := mustQuery(t, res.AuthorizationURL).Get("key")
	const n = 32
	won := make(chan connection.Started, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := svc.Start(ctx, key)
			switch {
			case err == nil:
				won <- st
			case !errors.Is(err, connection.ErrState):
				t.Errorf("Start: %v", err)
			}
		}()
	}
	wg.Wait()
	close(won)
	if len(won) != 1 {
		t.Fatalf("%d browsers got the authorization, want 1", len(won))
	}
	st := <-won
	if a, err := svc.Callback(ctx, e.respond(t, st, e.p.User1())); err != nil || a.View.Status != store.ConnectionActive {
		t.Fatalf("the winner's callback: %+v %v", a, err)
	}
}
