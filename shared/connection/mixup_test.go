package connection_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
)

// TestOAuthMixUp is the mix-up attack of RFC 9700 section 4.4.1 on
// loopback: an attacker's MCP server names the attacker's authorization
// server, whose metadata names the honest provider's authorization
// endpoint and the attacker's own token endpoint, and whose registration
// hands out the client id fluidbox has at the honest provider. The victim
// authorizes the attacker's connection, signs in at the honest provider
// (which sends no iss), and the honest code and the PKCE verifier must
// never reach the attacker's token endpoint, whatever happens on the way.
func TestOAuthMixUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		opts func(honest *oauthtest.Provider) oauthtest.RogueOptions
	}{
		// The attacker's metadata names the honest authorization endpoint:
		// the request carries the attacker's server's redirect URI, which
		// the honest server does not know.
		{"honest endpoint in the attacker's metadata", func(h *oauthtest.Provider) oauthtest.RogueOptions {
			return oauthtest.RogueOptions{AuthorizationEndpoint: h.Issuer + "/auth", ClientID: h.ClientID}
		}},
		// The attacker's own endpoint forwards the request with the honest
		// server's redirect URI: the response reaches fluidbox there, with
		// a state made for the attacker's server.
		{"forwarded to the honest server's redirect URI", func(h *oauthtest.Provider) oauthtest.RogueOptions {
			return oauthtest.RogueOptions{ClientID: h.ClientID, ForwardTo: h.Issuer + "/auth", ForwardRedirectURI: oauthSite.RedirectURIFor(h.Issuer)}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			e := newOAuthEnv(t)
			rogue := oauthtest.NewRogue(t, tc.opts(e.p))
			evil := oauthtest.NewServer(t, e.p)
			evil.SetAuthorizationServer(rogue.Issuer)
			svc := connection.NewService(e.st, e.sealer, connection.Options{Egress: testenv.Loopback})

			var req connection.CreateRequest
			body, _ := json.Marshal(map[string]any{"name": "evil", "url": evil.URL, "kind": "shared", "credential": map[string]any{"type": "oauth"}})
			if err := json.Unmarshal(body, &req); err != nil {
				t.Fatal(err)
			}
			v, err := svc.Create(ctx, admin, req)
			if err != nil {
				t.Fatal(err)
			}
			e.completeAnyhow(t, svc, v.ID)
			if got := rogue.TokenRequests(); len(got) != 0 {
				t.Fatalf("the attacker's token endpoint received %d token requests (code and verifier of the honest provider)", len(got))
			}
			if e.p.Codes() != 0 {
				t.Fatalf("the honest provider redeemed %d codes of the attacker's flow", e.p.Codes())
			}
		})
	}
}

// completeAnyhow drives an authorization of ref as far as it goes: the
// authorization URL, the provider's sign-in as its first user, the
// callback; each step may refuse, and the caller checks what leaked.
func (e *oauthEnv) completeAnyhow(t *testing.T, svc *connection.Service, ref string) {
	t.Helper()
	ctx := context.Background()
	res, err := svc.Authorize(ctx, admin, ref, oauthSite)
	if err != nil {
		t.Logf("authorize refused: %v", err)
		return
	}
	st := start(t, svc, res)
	back, err := e.p.Login(ctx, st.URL, e.p.User1())
	if err != nil {
		t.Logf("the provider refused the authorization request: %v", err)
		return
	}
	if _, err := svc.Callback(ctx, callbackQuery(back, st.Nonce)); err != nil {
		t.Logf("callback refused: %v", err)
	}
}
