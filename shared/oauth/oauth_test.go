package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/oauth"
)

const redirect = "http://127.0.0.1:1/v1/oauth/callback"

// loopbackClient reaches the test's providers on 127.0.0.1, as `fluidbox
// dev` does; NewClient(nil) refuses them (TestDefaultClientRefusesInternal).
func loopbackClient() *http.Client {
	return oauth.NewClient(&http.Transport{DialContext: testenv.Loopback.DialContext})
}

func setup(t *testing.T) (*oauthtest.Provider, *oauthtest.Server, oauth.Discovery) {
	t.Helper()
	p := oauthtest.NewProvider(t, redirect)
	s := oauthtest.NewServer(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := oauth.Discover(ctx, loopbackClient(), s.URL, nil)
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
	_, err := oauth.Discover(context.Background(), loopbackClient(), s.URL, nil)
	if !errors.Is(err, oauth.ErrDiscovery) {
		t.Fatalf("Discover with a foreign resource: %v, want ErrDiscovery", err)
	}
}

func TestAuthorizationCodeAndRefresh(t *testing.T) {
	p, s, d := setup(t)
	ctx := context.Background()
	hc := loopbackClient()
	c, err := oauth.Register(ctx, hc, d, oauth.Site{RedirectURI: redirect}, &oauth.Client{ID: p.ClientID, Secret: p.Secret})
	if err != nil {
		t.Fatal(err)
	}
	if want := (oauth.Site{RedirectURI: redirect}).RedirectURIFor(p.Issuer); c.RedirectURI != want {
		t.Fatalf("the operator's client redirects to %q, want its server's own %q", c.RedirectURI, want)
	}
	state, verifier := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	au := oauth.AuthURL(d, c, state, verifier, true)
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
	if _, err := oauth.Exchange(ctx, hc, d, c, c.RedirectURI, back.Query().Get("code"), "wrong-verifier-wrong-verifier-wrong-verifier"); !errors.Is(err, oauth.ErrGrant) {
		t.Fatalf("exchange with the wrong verifier: %v, want ErrGrant", err)
	}
	// The failed exchange above spent nothing the right one needs? The
	// provider deletes a code on its first use, so start again.
	state, verifier = oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	back, err = p.Login(ctx, oauth.AuthURL(d, c, state, verifier, true), p.User1())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := oauth.Exchange(ctx, hc, d, c, c.RedirectURI, back.Query().Get("code"), verifier)
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
	if _, err := oauth.Register(context.Background(), loopbackClient(), d, oauth.Site{RedirectURI: redirect, MetadataURL: "https://fluidbox.example/v1/oauth/client-metadata.json"}, nil); !errors.Is(err, oauth.ErrRegistration) {
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

// A nil client and NewClient(nil) dial through a guard that refuses every
// internal address, and never through a proxy from the environment: the
// loopback provider below is never reached.
func TestDefaultClientRefusesInternal(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	t.Setenv("HTTP_PROXY", srv.URL)
	t.Setenv("HTTPS_PROXY", srv.URL)
	ctx := context.Background()
	if _, err := oauth.Discover(ctx, oauth.NewClient(nil), srv.URL, nil); !errors.Is(err, oauth.ErrDiscovery) {
		t.Fatalf("Discover through the default client: %v, want ErrDiscovery", err)
	}
	if _, err := oauth.Discover(ctx, nil, srv.URL, nil); !errors.Is(err, oauth.ErrDiscovery) {
		t.Fatalf("Discover through a nil client: %v, want ErrDiscovery", err)
	}
	d := oauth.Discovery{Resource: srv.URL, TokenURL: srv.URL + "/token", AuthURL: srv.URL + "/authorize"}
	if _, err := oauth.Refresh(ctx, nil, d, oauth.Client{ID: "c"}, "rt"); !errors.Is(err, oauth.ErrToken) {
		t.Fatalf("Refresh through a nil client: %v, want ErrToken", err)
	}
	if _, err := oauth.Refresh(ctx, &http.Client{}, d, oauth.Client{ID: "c"}, "rt"); !errors.Is(err, oauth.ErrToken) {
		t.Fatalf("Refresh through a client without a transport: %v, want ErrToken", err)
	}
	if _, err := oauth.Exchange(ctx, nil, d, oauth.Client{ID: "c"}, redirect, "code", "verifier"); !errors.Is(err, oauth.ErrToken) {
		t.Fatalf("Exchange through a nil client: %v, want ErrToken", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server was reached %d times", n)
	}
}

// TestRegisterOrder: the MCP specification's order of client registration:
// the operator's client first, even where the server takes metadata
// documents; then fluidbox's client ID metadata document, only where the
// server advertises client_id_metadata_document_supported and the document
// can be served over HTTPS; dynamic registration is left for the rest
// (the zitadel provider above has no registration endpoint: see
// TestRegisterWithoutClientOrEndpoint, and make e2e-conformance for RFC
// 7591 against the MCP conformance suite's server).
func TestRegisterOrder(t *testing.T) {
	_, _, d := setup(t)
	site := oauth.Site{RedirectURI: "https://fluidbox.example/api/v1/oauth/callback", MetadataURL: "https://fluidbox.example/api/v1/oauth/client-metadata.json"}
	ctx := context.Background()
	cimd := d
	cimd.ClientIDMetadata = true

	c, err := oauth.Register(ctx, loopbackClient(), cimd, site, &oauth.Client{ID: "operators", Secret: "s"})
	if err != nil || c.ID != "operators" || c.Registered {
		t.Fatalf("pre-registered with metadata documents supported: %+v %v, want the operator's client", c, err)
	}
	// The document is one client for every server: without iss (RFC
	// 9207) nothing tells the servers' responses apart, so it is offered
	// only where iss is advertised (and then required).
	if _, err := oauth.Register(ctx, loopbackClient(), cimd, site, nil); !errors.Is(err, oauth.ErrRegistration) {
		t.Fatalf("metadata documents supported without iss: %v, want ErrRegistration (no registration endpoint either)", err)
	}
	cimd.IssParameter = true
	c, err = oauth.Register(ctx, loopbackClient(), cimd, site, nil)
	if err != nil || c.ID != site.MetadataURL || c.AuthMethod != "none" || c.Secret != "" || !c.Registered || c.RedirectURI != site.RedirectURI {
		t.Fatalf("metadata documents supported: %+v %v, want the document's URL as a public client", c, err)
	}
	// An http API (dev) cannot serve a document the server would accept.
	plain := oauth.Site{RedirectURI: "http://127.0.0.1:8080/v1/oauth/callback", MetadataURL: "http://127.0.0.1:8080/v1/oauth/client-metadata.json"}
	if _, err := oauth.Register(ctx, loopbackClient(), cimd, plain, nil); !errors.Is(err, oauth.ErrRegistration) {
		t.Fatalf("metadata documents over http: %v, want ErrRegistration (no registration endpoint either)", err)
	}
	// Not advertised: the document is not offered.
	if _, err := oauth.Register(ctx, loopbackClient(), d, site, nil); !errors.Is(err, oauth.ErrRegistration) {
		t.Fatalf("metadata documents not advertised: %v, want ErrRegistration", err)
	}
}

func TestMetadataDocument(t *testing.T) {
	site := oauth.Site{RedirectURI: "https://fluidbox.example/v1/oauth/callback", MetadataURL: "https://fluidbox.example/v1/oauth/client-metadata.json"}
	b, err := json.Marshal(oauth.MetadataDocument(site))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["client_id"] != site.MetadataURL || got["token_endpoint_auth_method"] != "none" || got["client_name"] != "fluidbox" {
		t.Fatalf("document %s", b)
	}
	if r, _ := got["redirect_uris"].([]any); len(r) != 1 || r[0] != site.RedirectURI {
		t.Fatalf("redirect_uris %v, want only %s", got["redirect_uris"], site.RedirectURI)
	}
	if _, ok := got["client_secret"]; ok {
		t.Fatal("the document names a secret")
	}
	for raw, ok := range map[string]bool{
		site.MetadataURL:                       true,
		"https://fluidbox.example":             false, // no path
		"https://fluidbox.example/":            false,
		"http://fluidbox.example/x.json":       false,
		"https://u:p@fluidbox.example/x.json":  false,
		"https://fluidbox.example/x.json?a=b":  false,
		"https://fluidbox.example/x.json#frag": false,
		"https://fluidbox.example/x.json?":     false,
		"":                                     false,
		"https:///x.json":                      false,
	} {
		if oauth.MetadataDocumentOK(raw) != ok {
			t.Errorf("MetadataDocumentOK(%q) = %v, want %v", raw, !ok, ok)
		}
	}
}

// TestDiscoverPastAnOpenHandshake: a server that answers initialize
// without a token and asks for one only for operations is discovered from
// the challenge of its tools/list; one that asks for nothing is not an
// OAuth server.
func TestDiscoverPastAnOpenHandshake(t *testing.T) {
	p := oauthtest.NewProvider(t, redirect)
	s := oauthtest.NewServer(t, p, oauthtest.OpenHandshake())
	d, err := oauth.Discover(context.Background(), loopbackClient(), s.URL, nil)
	if err != nil || d.Resource != s.URL || d.Issuer != p.Issuer {
		t.Fatalf("Discover = %+v, %v", d, err)
	}
	open := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return mcp.NewServer(&mcp.Implementation{Name: "open", Version: "1"}, nil)
	}, nil))
	defer open.Close()
	if _, err := oauth.Discover(context.Background(), loopbackClient(), open.URL, nil); !errors.Is(err, oauth.ErrDiscovery) {
		t.Fatalf("Discover against a server that takes no token: %v, want ErrDiscovery", err)
	}
}

// TestDiscoverBoundsTheServersScopes: the scopes a server chooses (its
// challenge's scope, else its scopes_supported) are taken only as a
// bounded list of RFC 6749 scope tokens, as a step-up challenge's are;
// anything else fails discovery (the operator can give the connection
// its scopes instead).
func TestDiscoverBoundsTheServersScopes(t *testing.T) {
	p := oauthtest.NewProvider(t, redirect)
	many := make([]string, 40)
	for i := range many {
		many[i] = fmt.Sprintf("s%d", i)
	}
	for _, tc := range []struct {
		name, challenge string
		supported       []string
		want            []string // nil: discovery fails
	}{
		{name: "challenge", challenge: "read write read", want: []string{"read", "write", "offline_access"}},
		{name: "supported", supported: []string{"read", "write"}, want: []string{"read", "write", "offline_access"}},
		{name: "none", want: []string{"offline_access"}},
		{name: "challenge quote", challenge: `read a"b`},
		{name: "challenge non-ASCII", challenge: "read écrire"},
		{name: "challenge empty token", challenge: "read  write"},
		{name: "challenge too long", challenge: strings.Repeat("x", 257)},
		{name: "challenge too many", challenge: strings.Join(many, " ")},
		{name: "supported too many", supported: many},
		{name: "supported with space", supported: []string{"read", ""}},
		{name: "supported control", supported: []string{"read\x01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/prm" {
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(map[string]any{
						"resource": srv.URL + "/mcp", "authorization_servers": []string{p.Issuer}, "scopes_supported": tc.supported,
					})
					return
				}
				ch := fmt.Sprintf(`Bearer resource_metadata=%q`, srv.URL+"/prm")
				if tc.challenge != "" {
					ch += `, scope="` + strings.ReplaceAll(tc.challenge, `"`, `\"`) + `"`
				}
				w.Header().Set("WWW-Authenticate", ch)
				w.WriteHeader(http.StatusUnauthorized)
			}))
			defer srv.Close()
			d, err := oauth.Discover(context.Background(), loopbackClient(), srv.URL+"/mcp", nil)
			if tc.want == nil {
				if !errors.Is(err, oauth.ErrDiscovery) {
					t.Fatalf("Discover = %v, %v; want ErrDiscovery", d.Scopes, err)
				}
				if strings.Contains(err.Error(), "écrire") || strings.Contains(err.Error(), "s39") {
					t.Fatalf("the error quotes the server's scopes: %v", err)
				}
				return
			}
			if err != nil || !slices.Equal(d.Scopes, tc.want) {
				t.Fatalf("Discover = %v, %v; want %v", d.Scopes, err, tc.want)
			}
		})
	}
}

// TestCheckIssuer: RFC 9207 iss is required, and equal, whenever the
// server advertises it; unadvertised, it may be absent but never another.
func TestCheckIssuer(t *testing.T) {
	const iss = "https://as.example"
	for _, tc := range []struct {
		advertised bool
		got        string
		ok         bool
	}{
		{true, iss, true},
		{true, "", false},
		{true, "https://evil.example", false},
		{true, iss + "/", false},
		{false, "", true},
		{false, iss, true},
		{false, "https://evil.example", false},
	} {
		err := oauth.CheckIssuer(oauth.Discovery{Issuer: iss, IssParameter: tc.advertised}, tc.got)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, oauth.ErrIssuer)) {
			t.Errorf("CheckIssuer(advertised %v, iss %q) = %v, want ok %v", tc.advertised, tc.got, err, tc.ok)
		}
	}
}

// TestDiscoverRequiresS256: an authorization server that does not offer
// PKCE S256 (only plain here) is refused at discovery: there is no flow.
func TestDiscoverRequiresS256(t *testing.T) {
	p := oauthtest.NewProvider(t, redirect)
	for _, methods := range [][]string{{"plain"}, {}} {
		rogue := oauthtest.NewRogue(t, oauthtest.RogueOptions{ChallengeMethods: methods, Scopes: []string{"openid"}})
		s := oauthtest.NewServer(t, p)
		s.SetAuthorizationServer(rogue.Issuer)
		if d, err := oauth.Discover(context.Background(), loopbackClient(), s.URL, nil); !errors.Is(err, oauth.ErrDiscovery) {
			t.Errorf("Discover at a server with code_challenge_methods_supported %q: %+v %v, want ErrDiscovery", methods, d, err)
		}
	}
}

// TestAuthURLConsent: prompt=consent goes to an OpenID provider asked for
// offline_access, unless turned off, and nowhere else.
func TestAuthURLConsent(t *testing.T) {
	d := oauth.Discovery{AuthURL: "https://as.example/authorize", Resource: "https://mcp.example/mcp", OpenID: true, Scopes: []string{"openid", "offline_access"}}
	c := oauth.Client{ID: "c", RedirectURI: "https://fluidbox.example/v1/oauth/callback/k"}
	for _, tc := range []struct {
		d       oauth.Discovery
		consent bool
		want    string
	}{
		{d, true, "consent"},
		{d, false, ""},
		{oauth.Discovery{AuthURL: d.AuthURL, Resource: d.Resource, Scopes: d.Scopes}, true, ""},
		{oauth.Discovery{AuthURL: d.AuthURL, Resource: d.Resource, OpenID: true, Scopes: []string{"openid"}}, true, ""},
	} {
		q := mustQuery(t, oauth.AuthURL(tc.d, c, "", "verifier-verifier-verifier-verifier-verifier", tc.consent))
		if got := q.Get("prompt"); got != tc.want {
			t.Errorf("AuthURL(openid %v, scopes %q, consent %v) prompt = %q, want %q", tc.d.OpenID, tc.d.Scopes, tc.consent, got, tc.want)
		}
		if q.Has("state") || q.Get("redirect_uri") != c.RedirectURI || q.Get("code_challenge_method") != "S256" {
			t.Errorf("AuthURL without a state: %v", q)
		}
	}
}

// TestDiscoverStatelessOnly: a server of the 2026-07-28 revision only,
// which refuses initialize, is discovered from the challenge of its
// stateless server/discover.
func TestDiscoverStatelessOnly(t *testing.T) {
	p := oauthtest.NewProvider(t, redirect)
	s := oauthtest.NewServer(t, p, oauthtest.RefuseInitialize())
	d, err := oauth.Discover(context.Background(), loopbackClient(), s.URL, nil)
	if err != nil || d.Issuer != p.Issuer || d.Resource != s.URL {
		t.Fatalf("Discover = %+v, %v; want the provider's metadata", d, err)
	}
}

// TestIssuerKey: the redirect URI of a server does not depend on how its
// issuer's trailing slash was written (the operator's issuer, the
// metadata's and the protected resource metadata's may differ so), and
// differs between servers.
func TestIssuerKey(t *testing.T) {
	if oauth.IssuerKey("https://as.example") != oauth.IssuerKey("https://as.example/") {
		t.Error("a trailing slash changes the key")
	}
	if !oauth.SameIssuer("https://as.example/", "https://as.example") || oauth.SameIssuer("https://as.example", "https://as.example.evil") {
		t.Error("SameIssuer")
	}
	if k := oauth.IssuerKey("https://as.example"); k == oauth.IssuerKey("https://as.example/tenant") || len(k) != 32 {
		t.Errorf("IssuerKey = %q", k)
	}
}
