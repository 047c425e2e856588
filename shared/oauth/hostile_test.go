package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/oauth"
)

// answering is a provider endpoint on loopback that answers every request
// with the JSON its test chooses and records the forms it was sent.
type answering struct {
	srv   *httptest.Server
	mu    sync.Mutex
	body  any
	forms []url.Values
}

func newAnswering(t *testing.T) *answering {
	t.Helper()
	a := &answering{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		a.mu.Lock()
		a.forms = append(a.forms, r.PostForm)
		body := a.body
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *answering) answer(body any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.body = body
}

func (a *answering) lastForm() url.Values {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.forms) == 0 {
		return nil
	}
	return a.forms[len(a.forms)-1]
}

// TestRegisterBoundsTheAnswer: what a registration endpoint answers (RFC
// 7591 3.2.1) is the authorization server's choice, kept on the
// connection (read on every call) and presented in URLs and headers: a
// client_id or secret past the bounds an operator's is held to, or not
// made of RFC 6749's VSCHAR, or an authentication method fluidbox cannot
// perform, is no client.
func TestRegisterBoundsTheAnswer(t *testing.T) {
	t.Parallel()
	a := newAnswering(t)
	d := oauth.Discovery{Resource: "http://127.0.0.1:1/mcp", Issuer: a.srv.URL, AuthURL: a.srv.URL + "/authorize", TokenURL: a.srv.URL + "/token", RegistrationURL: a.srv.URL + "/register"}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		answer map[string]any
		ok     bool
	}{
		{"plain", map[string]any{"client_id": "abc-123", "client_secret": "s3cret", "token_endpoint_auth_method": "client_secret_post"}, true},
		{"public", map[string]any{"client_id": "abc-123", "token_endpoint_auth_method": "none"}, true},
		{"default method", map[string]any{"client_id": "abc-123", "client_secret": "s3cret"}, true},
		{"client_id at the bound", map[string]any{"client_id": strings.Repeat("i", oauth.MaxClientID)}, true},
		{"client_id past the bound", map[string]any{"client_id": strings.Repeat("i", oauth.MaxClientID+1)}, false},
		{"client_id of a megabyte", map[string]any{"client_id": strings.Repeat("i", 900<<10)}, false},
		{"client_id with a line break", map[string]any{"client_id": "abc\r\nX-Injected: 1"}, false},
		{"client_id with a control character", map[string]any{"client_id": "abc\x00"}, false},
		{"client_id not ASCII", map[string]any{"client_id": "abc\u00e9"}, false},
		{"secret past the bound", map[string]any{"client_id": "abc", "client_secret": strings.Repeat("s", oauth.MaxClientSecret+1)}, false},
		{"secret with a control character", map[string]any{"client_id": "abc", "client_secret": "s\x7f"}, false},
		{"method fluidbox cannot perform", map[string]any{"client_id": "abc", "token_endpoint_auth_method": "private_key_jwt"}, false},
		{"method of another's choosing", map[string]any{"client_id": "abc", "token_endpoint_auth_method": "client_secret_basic\r\n"}, false},
	} {
		a.answer(tc.answer)
		c, err := oauth.Register(ctx, loopbackClient(), d, oauth.Site{RedirectURI: redirect}, nil)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v, want a client", tc.name, err)
		case !tc.ok && !errors.Is(err, oauth.ErrRegistration):
			t.Errorf("%s: %v (client %d bytes), want ErrRegistration", tc.name, err, len(c.ID))
		case err != nil && strings.Contains(err.Error(), "abc"):
			t.Errorf("%s: the error quotes the answer: %v", tc.name, err)
		}
	}
}

// TestTokenAnswerBounds: the refresh token of a token answer is sealed on
// the connection (read on every call) and sent back at each refresh: one
// past MaxRefreshToken, or not made of RFC 6749's VSCHAR, is refused, at
// the exchange and at a refresh alike.
func TestTokenAnswerBounds(t *testing.T) {
	t.Parallel()
	a := newAnswering(t)
	d := oauth.Discovery{Resource: "http://127.0.0.1:1/mcp", Issuer: a.srv.URL, AuthURL: a.srv.URL + "/authorize", TokenURL: a.srv.URL + "/token"}
	c := oauth.Client{ID: "client", AuthMethod: "none"}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		refresh string
		ok      bool
	}{
		{"plain", "rt-123", true},
		{"none", "", true},
		{"at the bound", strings.Repeat("r", oauth.MaxRefreshToken), true},
		{"past the bound", strings.Repeat("r", oauth.MaxRefreshToken+1), false},
		{"near a megabyte", strings.Repeat("r", 900<<10), false},
		{"a line break", "rt\r\nX: 1", false},
		{"a control character", "rt\x01", false},
		{"not ASCII", "rt\u00e9", false},
	} {
		body := map[string]any{"access_token": "at-123", "token_type": "Bearer", "expires_in": 3600}
		if tc.refresh != "" {
			body["refresh_token"] = tc.refresh
		}
		a.answer(body)
		_, err := oauth.Exchange(ctx, loopbackClient(), d, c, redirect, "code", "verifier")
		_, rerr := oauth.Refresh(ctx, loopbackClient(), d, c, "old-refresh-token")
		for op, err := range map[string]error{"exchange": err, "refresh": rerr} {
			if tc.ok && err != nil {
				t.Errorf("%s %s: %v, want tokens", op, tc.name, err)
			}
			if !tc.ok && !errors.Is(err, oauth.ErrToken) {
				t.Errorf("%s %s: %v, want ErrToken", op, tc.name, err)
			}
		}
	}
}

// TestRefreshCarriesTheResourceHoweverTheEndpointIsSpelt: every refresh
// carries the resource (RFC 8707), whatever the spelling of the token
// endpoint the metadata gave (a scheme in capitals is the same URL to the
// HTTP client, not to a comparison of strings).
func TestRefreshCarriesTheResourceHoweverTheEndpointIsSpelt(t *testing.T) {
	t.Parallel()
	a := newAnswering(t)
	a.answer(map[string]any{"access_token": "at-123", "token_type": "Bearer"})
	const resource = "http://127.0.0.1:1/mcp"
	for _, tokenURL := range []string{
		a.srv.URL + "/token",
		"HTTP://" + strings.TrimPrefix(a.srv.URL, "http://") + "/token",
		a.srv.URL + "/%74oken",
		a.srv.URL + "/token?",
	} {
		d := oauth.Discovery{Resource: resource, TokenURL: tokenURL, AuthURL: a.srv.URL + "/authorize"}
		if _, err := oauth.Refresh(context.Background(), loopbackClient(), d, oauth.Client{ID: "client", AuthMethod: "none"}, "rt"); err != nil {
			t.Fatalf("refresh at %s: %v", tokenURL, err)
		}
		if got := a.lastForm().Get("resource"); got != resource {
			t.Errorf("refresh at %s carried resource %q, want %q", tokenURL, got, resource)
		}
	}
}

// TestDiscoverRefusesMalformedMetadata: an authorization server's metadata
// whose issuer is not an issuer identifier (RFC 8414 2: no query or
// fragment), or whose endpoints carry a fragment (RFC 6749 3.1, 3.2) or an
// authorization endpoint whose query already holds a parameter fluidbox
// sends (which copy counts would be the server's guess), gives no flow; a
// query of the server's own (RFC 6749 3.1 allows it) is kept.
func TestDiscoverRefusesMalformedMetadata(t *testing.T) {
	t.Parallel()
	p := oauthtest.NewProvider(t, redirect)
	for _, tc := range []struct {
		name string
		o    oauthtest.RogueOptions
		ok   bool
	}{
		{"plain", oauthtest.RogueOptions{}, true},
		{"own query", oauthtest.RogueOptions{AuthorizationEndpoint: "/authorize?tenant=a"}, true},
		{"issuer with a query", oauthtest.RogueOptions{IssuerSuffix: "?x=1"}, false},
		{"issuer with a fragment", oauthtest.RogueOptions{IssuerSuffix: "#x"}, false},
		{"authorization endpoint with a fragment", oauthtest.RogueOptions{AuthorizationEndpoint: "/authorize#x"}, false},
		{"authorization endpoint naming a redirect_uri", oauthtest.RogueOptions{AuthorizationEndpoint: "/authorize?redirect_uri=https%3A%2F%2Fevil.example%2Fcb"}, false},
		{"authorization endpoint naming a state", oauthtest.RogueOptions{AuthorizationEndpoint: "/authorize?state=x"}, false},
		{"authorization endpoint naming a client_id", oauthtest.RogueOptions{AuthorizationEndpoint: "/authorize?client_id=x"}, false},
		{"authorization endpoint naming a resource", oauthtest.RogueOptions{AuthorizationEndpoint: "/authorize?resource=https%3A%2F%2Fother.example"}, false},
		{"authorization endpoint naming a code_challenge", oauthtest.RogueOptions{AuthorizationEndpoint: "/authorize?code_challenge=x"}, false},
		{"authorization endpoint with an unparsable query", oauthtest.RogueOptions{AuthorizationEndpoint: "/authorize?a=%zz"}, false},
		{"token endpoint with a fragment", oauthtest.RogueOptions{TokenEndpoint: "/token#x"}, false},
	} {
		r := oauthtest.NewRogue(t, tc.o)
		s := oauthtest.NewServer(t, p)
		s.SetAuthorizationServer(r.Issuer)
		d, err := oauth.Discover(context.Background(), loopbackClient(), s.URL, nil)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v, want a discovery", tc.name, err)
		case !tc.ok && !errors.Is(err, oauth.ErrDiscovery):
			t.Errorf("%s: %+v %v, want ErrDiscovery", tc.name, d, err)
		}
	}
}

// TestNoRedirectFollowed: no request to a provider follows a redirect, so
// the egress guard judges every address fluidbox sends to and a code, a
// verifier, a refresh token or a client secret is never re-sent (a 307
// repeats the POST) to wherever a provider points: the probe of the MCP
// server, registration, the code exchange and the refresh each stop at the
// 3xx, through NewClient and through a caller's client that would follow.
func TestNoRedirectFollowed(t *testing.T) {
	t.Parallel()
	target := newAnswering(t)
	target.answer(map[string]any{"access_token": "at-123", "token_type": "Bearer", "refresh_token": "rt-2", "client_id": "abc"})
	redirector := httptest.NewServer(http.RedirectHandler(target.srv.URL+"/x", http.StatusTemporaryRedirect))
	t.Cleanup(redirector.Close)
	d := oauth.Discovery{Resource: "http://127.0.0.1:1/mcp", Issuer: redirector.URL, AuthURL: redirector.URL + "/authorize", TokenURL: redirector.URL + "/token", RegistrationURL: redirector.URL + "/register"}
	c := oauth.Client{ID: "client", Secret: "secret", AuthMethod: "client_secret_post"}
	ctx := context.Background()
	following := &http.Client{Transport: loopbackClient().Transport}
	for name, hc := range map[string]*http.Client{"NewClient": loopbackClient(), "a following client": following} {
		if _, err := oauth.Discover(ctx, hc, redirector.URL+"/mcp", nil); !errors.Is(err, oauth.ErrDiscovery) {
			t.Errorf("%s: Discover of a redirecting MCP server: %v, want ErrDiscovery", name, err)
		}
		if _, err := oauth.Register(ctx, hc, d, oauth.Site{RedirectURI: redirect}, nil); !errors.Is(err, oauth.ErrRegistration) {
			t.Errorf("%s: Register at a redirecting endpoint: %v, want ErrRegistration", name, err)
		}
		if _, err := oauth.Exchange(ctx, hc, d, c, redirect, "code", "verifier"); !errors.Is(err, oauth.ErrToken) {
			t.Errorf("%s: Exchange at a redirecting endpoint: %v, want ErrToken", name, err)
		}
		if _, err := oauth.Refresh(ctx, hc, d, c, "rt"); !errors.Is(err, oauth.ErrToken) {
			t.Errorf("%s: Refresh at a redirecting endpoint: %v, want ErrToken", name, err)
		}
	}
	if f := target.lastForm(); f != nil {
		t.Fatalf("the redirect's target was sent %v", f)
	}
}
