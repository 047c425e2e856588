package connection_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/oauth"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestOAuthAuthorizationServerMoves (MCP 2026-07-28): an active
// connection whose upstream starts naming another authorization server is
// put back in authorization_required at the upstream's next refusal of its
// token, before any token request (no refresh at the old server, nothing
// at the new), and its owner is told by the refusal; the operator's client
// is not taken to the new server.
func TestOAuthAuthorizationServerMoves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, admin, "team", "shared")
	v = e.authorize(t, svc, admin, v.ID, e.p.User1())
	if _, err := svc.Refresh(ctx, admin, v.ID); err != nil {
		t.Fatal(err)
	}

	other := oauthtest.NewRogue(t, oauthtest.RogueOptions{ClientID: "other-client", Scopes: []string{"openid"}})
	e.up.SetAuthorizationServer(other.Issuer)
	e.up.ExpireTokens()
	if _, err := svc.Refresh(ctx, admin, v.ID); !errors.Is(err, connection.ErrAuthorizationRequired) {
		t.Fatalf("refresh after the upstream moved: %v, want ErrAuthorizationRequired", err)
	}
	if got, err := svc.Get(ctx, admin, v.ID); err != nil || got.Status != store.ConnectionAuthorizationRequired || got.AuthorizationGeneration != v.AuthorizationGeneration {
		t.Fatalf("after the move: %+v %v, want authorization_required at generation %d", got, err, v.AuthorizationGeneration)
	}
	if n := e.p.Refreshes(); n != 0 {
		t.Errorf("%d refreshes at the old server", n)
	}
	if _, err := svc.Authorize(ctx, admin, v.ID, oauthSite); !errors.Is(err, oauth.ErrDiscovery) {
		t.Errorf("authorize the operator's client at the new server: %v, want ErrDiscovery", err)
	}
	if len(other.Registrations())+len(other.TokenRequests()) != 0 {
		t.Errorf("the new server saw a registration or a token request")
	}
}

// TestOAuthRegisteredClientNotReused: a client fluidbox registered at one
// authorization server is never presented to another: when the upstream
// names another, the next authorization registers there, for that
// server's own redirect URI.
func TestOAuthRegisteredClientNotReused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	first := oauthtest.NewRogue(t, oauthtest.RogueOptions{ClientID: "first-client", Scopes: []string{"openid"}})
	second := oauthtest.NewRogue(t, oauthtest.RogueOptions{ClientID: "second-client", Scopes: []string{"openid"}})
	e.up.SetAuthorizationServer(first.Issuer)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v, err := e.createOAuth(t, svc, admin, "dcr", map[string]any{"type": "oauth"})
	if err != nil {
		t.Fatal(err)
	}
	authorizeAt := func(want *oauthtest.Rogue, clientID string) {
		t.Helper()
		res, err := svc.Authorize(ctx, admin, v.ID, oauthSite)
		if err != nil {
			t.Fatal(err)
		}
		q := mustQuery(t, start(t, svc, res).URL)
		if q.Get("client_id") != clientID || q.Get("redirect_uri") != oauthSite.RedirectURIFor(want.Issuer) {
			t.Fatalf("authorization request %v, want client %s at %s's redirect URI", q, clientID, want.Issuer)
		}
	}
	authorizeAt(first, "first-client")
	authorizeAt(first, "first-client") // kept for its server
	if n := len(first.Registrations()); n != 1 {
		t.Fatalf("%d registrations at the first server, want 1", n)
	}
	e.up.SetAuthorizationServer(second.Issuer)
	authorizeAt(second, "second-client")
	regs := second.Registrations()
	if len(regs) != 1 {
		t.Fatalf("%d registrations at the second server, want 1", len(regs))
	}
	if r, _ := regs[0]["redirect_uris"].([]any); len(r) != 1 || r[0] != oauthSite.RedirectURIFor(second.Issuer) {
		t.Fatalf("registered redirect_uris %v", regs[0]["redirect_uris"])
	}
}

// TestOAuthRefreshNeverTakesANewClientToTheOldServer: when a client was
// registered at another authorization server (the owner re-authorizing
// after the upstream moved) while the connection still holds the first
// server's tokens, those tokens are not refreshed with the new client (its
// id and secret never reach the first server's token endpoint): the
// connection needs authorization when they run out.
func TestOAuthRefreshNeverTakesANewClientToTheOldServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOAuthEnv(t)
	svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})
	v := e.create(t, svc, admin, "team", "shared")
	v = e.authorize(t, svc, admin, v.ID, e.p.User1())
	if err := e.st.SetOAuthClient(ctx, v.ID, v.AuthorizationGeneration, "new-servers-client", nil, "none", "http://127.0.0.1:9/new", oauthSite.RedirectURIFor("http://127.0.0.1:9/new"), store.FormatTime(time.Now())); err != nil {
		t.Fatal(err)
	}
	c, err := e.st.GetConnection(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	later := connection.NewService(e.st, e.sealer, connection.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }, Egress: testenv.Loopback})
	if _, err := connection.Credential(later, ctx, c, c.Generation); err == nil {
		t.Fatal("an expired token was refreshed or presented")
	}
	if n := e.p.Refreshes(); n != 0 {
		t.Fatalf("%d refresh requests at the first server with the new client", n)
	}
	if got, err := svc.Get(ctx, admin, v.ID); err != nil || got.Status != store.ConnectionAuthorizationRequired {
		t.Fatalf("after: %+v %v, want authorization_required", got, err)
	}
}
