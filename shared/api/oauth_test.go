package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/oauth"
)

const oauthPolicy = `{"name":"oauth","default_verdict":"deny","rules":[
 {"id":"whoami","tool":"mcp__linear__whoami","verdict":"allow"}]}`

// browse fetches a callback URL as the member's browser would (with its
// cookies), returning the status and the page.
func (s *brokerStack) browse(raw string) (int, string) {
	s.t.Helper()
	return s.browseIn(s.jar, raw)
}

// browseIn fetches raw in the browser whose cookies are jar (nil: a
// browser that has none).
func (s *brokerStack) browseIn(jar http.CookieJar, raw string) (int, string) {
	s.t.Helper()
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(raw)
	if err != nil {
		s.t.Fatalf("GET callback: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_, _ = s.responses.Write(b)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		s.t.Errorf("callback Content-Type = %q", ct)
	}
	return resp.StatusCode, string(b)
}

// startAs opens an authorization URL (fluidbox's authorize redirect) in
// the member's browser and returns where it sends the browser: the
// authorization server's URL.
func (s *brokerStack) startAs(au string) *url.URL {
	s.t.Helper()
	if !strings.HasPrefix(au, s.url+"/v1/oauth/start?key=") {
		s.t.Fatalf("authorization URL %s, want the authorize redirect", au)
	}
	hc := &http.Client{Jar: s.jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get(au)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if resp.StatusCode != http.StatusFound || err != nil {
		s.t.Fatalf("authorize redirect = %d %v", resp.StatusCode, err)
	}
	return loc
}

// authorizeAs asks for an authorization URL, opens it in the member's
// browser and logs in at the provider as user, returning the callback URL
// the provider redirects to (at its own redirect URI).
func (s *brokerStack) authorizeAs(p *oauthtest.Provider, con, token, user string) *url.URL {
	s.t.Helper()
	au := s.want(200, "POST", "/v1/connections/"+con+"/authorize", token, nil)["authorization_url"].(string)
	back, err := p.LoginIn(context.Background(), s.jar, s.startAs(au).String(), user)
	if err != nil {
		s.t.Fatalf("login at the provider: %v", err)
	}
	if !strings.HasPrefix(back.String(), s.url+"/v1/oauth/callback/"+oauth.IssuerKey(p.Issuer)+"?") {
		s.t.Fatalf("the provider redirected to %s", back.Redacted())
	}
	return back
}

// oauthCred is the operator's client of p as a connection's credential.
func oauthCred(p *oauthtest.Provider) map[string]any {
	return map[string]any{"type": "oauth", "client_id": p.ClientID, "client_secret": p.Secret, "issuer": p.Issuer}
}

// TestOAuthConnectionEndToEnd drives an OAuth connection through the API
// against a real authorization server (zitadel's op) and an MCP server that
// requires its tokens: create (authorization_required), authorize, the
// callback (wrong state, wrong iss, replay refused), brokered calls with the
// provider's token, an access token expiring mid-run (refreshed once, the
// generation unchanged), a revoked grant (binding deny, authorization
// required), re-authorization (generation + 1: the old run refuses, a new
// one works), and no token anywhere stored, logged or answered.
func TestOAuthConnectionEndToEnd(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	p := oauthtest.NewProvider(t, s.url+"/v1/oauth/callback")
	o := &oauthLife{t: t, s: s, p: p, up: oauthtest.NewServer(t, p), pol: s.policy(oauthPolicy)}
	o.create()
	o.refusedCallbacks()
	o.authorized()

	// Brokered calls present the provider's token for this member.
	s.want(200, "POST", "/v1/connections/"+o.con+"/tools/refresh", adminToken, nil)
	runA, tokA := s.brokeredRun(o.pol, o.con, "")
	r := s.toolsCall(runA, tokA, "a1", "mcp__linear__whoami", map[string]any{})
	if r.body["decision"] != "allow" || !strings.Contains(resultText(t, r), "id1") {
		t.Fatalf("whoami = %s", r.raw)
	}
	o.expiredMidRun(runA, tokA)
	o.grantRevoked(runA, tokA)
	o.reauthorized(runA, tokA)
	o.revokedWhilePending()

	// Every token request carried the resource (RFC 8707).
	for i, res := range p.TokenResources() {
		if res != o.up.URL {
			t.Errorf("token request %d: resource %q, want %q", i, res, o.up.URL)
		}
	}
	// No token, no client secret anywhere.
	s.assertNoSecrets(p.Issued())
}

// oauthLife is TestOAuthConnectionEndToEnd's provider, upstream and
// connection.
type oauthLife struct {
	t   *testing.T
	s   *brokerStack
	p   *oauthtest.Provider
	up  *oauthtest.Server
	pol string
	con string
}

// create: authorization_required; a token field, a refresh and a bearer
// credential are refused before authorization.
func (o *oauthLife) create() {
	t, s, p, up := o.t, o.s, o.p, o.up
	created := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear", "url": up.URL, "kind": "shared",
		"credential":   oauthCred(p),
		"tool_classes": map[string]string{"whoami": "read"},
	})
	o.con = created["id"].(string)
	con := o.con
	if created["status"] != "authorization_required" || created["credential_type"] != "oauth" || created["authorization_generation"] != float64(1) {
		t.Fatalf("create = %v", created)
	}
	if r := s.call("POST", "/v1/connections", adminToken, map[string]any{
		"name": "other", "url": up.URL, "kind": "shared", "credential": map[string]any{"type": "oauth", "token": "x"},
	}); r.status != 400 {
		t.Errorf("oauth credential with a token field = %d %s, want 400", r.status, r.raw)
	}
	if r := s.call("POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil); r.status != 409 || !strings.Contains(string(r.raw), "authorize") {
		t.Errorf("refresh before authorization = %d %s, want 409 naming authorize", r.status, r.raw)
	}
	if r := s.call("PUT", "/v1/connections/"+con+"/credential", adminToken, map[string]any{"credential": map[string]any{"type": "bearer", "token": "CANARY-x"}}); r.status != 400 {
		t.Errorf("PUT credential on an oauth connection = %d %s, want 400", r.status, r.raw)
	}
}

// refusedCallbacks: the authorization URL is the authorize redirect, to
// the provider's with PKCE S256, the resource, the state and the
// provider's own redirect URI. An unknown state, and a wrong issuer (RFC
// 9207), are refused; the wrong issuer consumed its state, so the real
// response is then spent.
func (o *oauthLife) refusedCallbacks() {
	t, s, p, up, con := o.t, o.s, o.p, o.up, o.con
	au := s.want(200, "POST", "/v1/connections/"+con+"/authorize", adminToken, nil)["authorization_url"].(string)
	u := s.startAs(au)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") != up.URL || q.Get("state") == "" || q.Get("redirect_uri") != s.url+"/v1/oauth/callback/"+oauth.IssuerKey(p.Issuer) {
		t.Fatalf("authorization URL = %s", u.Redacted())
	}
	back, err := p.LoginIn(context.Background(), s.jar, u.String(), p.User1())
	if err != nil {
		t.Fatal(err)
	}
	if code, page := s.browse(s.url + "/v1/oauth/callback?code=abc&state=not-a-state"); code != 400 || !strings.Contains(page, "Not connected") || strings.Contains(page, "not-a-state") {
		t.Errorf("unknown state = %d %q", code, page)
	}
	evil := *back
	eq := evil.Query()
	eq.Set("iss", "http://127.0.0.1:9/not-the-issuer")
	evil.RawQuery = eq.Encode()
	if code, _ := s.browse(evil.String()); code != 400 {
		t.Errorf("wrong iss = %d, want 400", code)
	}
	if code, _ := s.browse(back.String()); code != 400 {
		t.Errorf("the state a refused response consumed = %d, want 400", code)
	}
	if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil); got["status"] != "authorization_required" || got["authorization_generation"] != float64(1) {
		t.Fatalf("after refused callbacks: %v", got)
	}
}

// authorized: the real flow: tokens sealed, generation 2, active; a
// replay fails.
func (o *oauthLife) authorized() {
	t, s, con := o.t, o.s, o.con
	back := s.authorizeAs(o.p, con, adminToken, o.p.User1())
	if code, page := s.browse(back.String()); code != 200 || !strings.Contains(page, "Connected") {
		t.Fatalf("callback = %d %q", code, page)
	}
	if code, _ := s.browse(back.String()); code != 400 {
		t.Errorf("replayed callback = %d, want 400", code)
	}
	got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil)
	if got["status"] != "active" || got["authorization_generation"] != float64(2) {
		t.Fatalf("after the callback: %v", got)
	}
}

// expiredMidRun: the access token expires mid-run: the upstream's 401
// makes the broker refresh once; the call succeeds; the generation stays.
func (o *oauthLife) expiredMidRun(runA, tokA string) {
	t, s, p := o.t, o.s, o.p
	o.up.ExpireTokens()
	before := p.Refreshes()
	r := s.toolsCall(runA, tokA, "a2", "mcp__linear__whoami", map[string]any{})
	if r.body["decision"] != "allow" || !strings.Contains(resultText(t, r), "id1") {
		t.Fatalf("whoami after expiry = %s", r.raw)
	}
	if n := p.Refreshes() - before; n != 1 {
		t.Errorf("refreshes = %d, want 1", n)
	}
	if got := s.want(200, "GET", "/v1/connections/"+o.con, adminToken, nil); got["authorization_generation"] != float64(2) {
		t.Errorf("a refresh moved the generation: %v", got)
	}
}

// grantRevoked: the member revokes the grant at the provider: the refresh
// is refused for good, the call is denied (binding, re-authorize), the
// connection needs authorization.
func (o *oauthLife) grantRevoked(runA, tokA string) {
	t, s := o.t, o.s
	if err := o.p.RevokeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	o.up.ExpireTokens()
	r := s.toolsCall(runA, tokA, "a3", "mcp__linear__whoami", map[string]any{})
	if r.status != 200 || r.body["decision"] != "deny" || r.body["source"] != "binding" || !strings.Contains(r.body["reason"].(string), "re-authoriz") {
		t.Fatalf("call after revocation = %d %s, want a binding denial saying to re-authorize\n%s", r.status, r.raw, s.logs.String())
	}
	if got := s.want(200, "GET", "/v1/connections/"+o.con, adminToken, nil); got["status"] != "authorization_required" || got["authorization_generation"] != float64(2) {
		t.Fatalf("after revocation: %v", got)
	}
}

// reauthorized: re-authorizing moves the generation: the old run refuses,
// a new one works.
func (o *oauthLife) reauthorized(runA, tokA string) {
	t, s, con := o.t, o.s, o.con
	back := s.authorizeAs(o.p, con, adminToken, o.p.User1())
	if code, _ := s.browse(back.String()); code != 200 {
		t.Fatalf("re-authorization callback = %d", code)
	}
	if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil); got["status"] != "active" || got["authorization_generation"] != float64(3) {
		t.Fatalf("after re-authorization: %v", got)
	}
	r := s.toolsCall(runA, tokA, "a4", "mcp__linear__whoami", map[string]any{})
	if r.body["decision"] != "deny" || r.body["source"] != "binding" {
		t.Errorf("old run after re-authorization = %s, want a binding denial", r.raw)
	}
	runB, tokB := s.brokeredRun(o.pol, con, "")
	if r := s.toolsCall(runB, tokB, "b1", "mcp__linear__whoami", map[string]any{}); r.body["decision"] != "allow" {
		t.Errorf("new run = %s", r.raw)
	}
}

// revokedWhilePending: revoking works from authorization_required too,
// and a pending authorization then cannot complete.
func (o *oauthLife) revokedWhilePending() {
	t, s := o.t, o.s
	other := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear2", "url": o.up.URL, "kind": "shared", "credential": oauthCred(o.p),
	})["id"].(string)
	back := s.authorizeAs(o.p, other, adminToken, o.p.User1())
	if got := s.want(200, "DELETE", "/v1/connections/"+other, adminToken, nil); got["status"] != "revoked" {
		t.Fatalf("revoke an unauthorized oauth connection: %v", got)
	}
	if code, _ := s.browse(back.String()); code != 400 {
		t.Errorf("callback for a revoked connection = %d, want 400", code)
	}
}

// TestOAuthMismatchedResource: protected resource metadata naming another
// resource than the server is refused; no authorization URL is made.
func TestOAuthMismatchedResource(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	p := oauthtest.NewProvider(t, s.url+"/v1/oauth/callback")
	up := oauthtest.NewServer(t, p)
	up.SetResource("https://elsewhere.example/mcp")
	con := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear", "url": up.URL, "kind": "shared", "credential": map[string]any{"type": "oauth", "client_id": p.ClientID, "issuer": p.Issuer},
	})["id"].(string)
	if r := s.call("POST", "/v1/connections/"+con+"/authorize", adminToken, nil); r.status != 409 || strings.Contains(string(r.raw), "authorization_url") {
		t.Errorf("authorize against a mismatched resource = %d %s, want 409", r.status, r.raw)
	}
}

// assertNoSecrets checks stored items, logs and answers for each secret.
func (s *brokerStack) assertNoSecrets(secrets []string) {
	s.t.Helper()
	var stored strings.Builder
	for _, it := range s.items() {
		for k, v := range it {
			stored.WriteString(k + "=" + v + "\n")
		}
	}
	places := map[string]string{"log": s.logs.String(), "responses": s.responses.String(), "table": stored.String()}
	for where, text := range places {
		for _, sec := range secrets {
			if len(sec) >= 8 && strings.Contains(text, sec) {
				s.t.Errorf("a token or client secret appears in the %s", where)
			}
		}
	}
}

// TestOAuthClientMetadataDocument: GET /v1/oauth/client-metadata.json, no
// bearer, is fluidbox's client ID metadata document for the API it is
// served from: its client_id is its own URL and its one redirect URI the
// callback beside it.
func TestOAuthClientMetadataDocument(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	resp, err := http.Get(s.url + "/v1/oauth/client-metadata.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET client-metadata.json = %d %v", resp.StatusCode, err)
	}
	if doc.ClientID != s.url+"/v1/oauth/client-metadata.json" || len(doc.RedirectURIs) != 1 || doc.RedirectURIs[0] != s.url+"/v1/oauth/callback" || doc.AuthMethod != "none" {
		t.Fatalf("document = %+v", doc)
	}
}

// TestOAuthCallbackFromAnotherBrowser: the authorize redirect, opened by
// the member (not sent there by another site), sets its nonce in the
// member's browser (HttpOnly, SameSite=Lax, the callback's path only); the
// provider's response delivered by another browser (the
// authorization server's URL completed by someone else) is refused and
// spends the state, so it cannot be completed afterwards either. GET of
// the connection names the redirect URI to register for its client.
func TestOAuthCallbackFromAnotherBrowser(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	p := oauthtest.NewProvider(t, s.url+"/v1/oauth/callback")
	up := oauthtest.NewServer(t, p)
	created := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear", "url": up.URL, "kind": "shared", "credential": oauthCred(p),
	})
	con := created["id"].(string)
	o, _ := created["oauth"].(map[string]any)
	if o["issuer"] != p.Issuer || o["redirect_uri"] != s.url+"/v1/oauth/callback/"+oauth.IssuerKey(p.Issuer) || o["consent_prompt"] != true {
		t.Fatalf("created oauth = %v", created["oauth"])
	}

	au := s.want(200, "POST", "/v1/connections/"+con+"/authorize", adminToken, nil)["authorization_url"].(string)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// A browser sent there by another site's page is refused, the link
	// left for the member to open.
	for _, site := range []string{"cross-site", "same-site"} {
		req, _ := http.NewRequest(http.MethodGet, au, nil)
		req.Header.Set("Sec-Fetch-Site", site)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || len(resp.Cookies()) != 0 {
			t.Errorf("authorize redirect with Sec-Fetch-Site %s = %d, cookies %v; want 400 and none", site, resp.StatusCode, resp.Cookies())
		}
	}
	req, _ := http.NewRequest(http.MethodGet, au, nil)
	req.Header.Set("Sec-Fetch-Site", "none") // typed or pasted
	resp, c := openAuthorization(t, hc, req)
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/v1/oauth/callback" || c.Value == "" {
		t.Fatalf("nonce cookie %+v", c)
	}
	if code, _ := s.browseIn(nil, au); code != 400 {
		t.Errorf("the authorize redirect opened again = %d, want 400", code)
	}
	// The member's browser took the nonce; the provider's URL goes to
	// someone else, who signs in and is sent back without it.
	loc, _ := resp.Location()
	back, err := p.Login(context.Background(), loc.String(), p.User1())
	if err != nil {
		t.Fatal(err)
	}
	if code, page := s.browseIn(nil, back.String()); code != 400 || !strings.Contains(page, "Not connected") {
		t.Errorf("callback from another browser = %d %q, want 400", code, page)
	}
	if p.Codes() != 0 {
		t.Errorf("%d codes redeemed for another browser's response", p.Codes())
	}
	if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil); got["status"] != "authorization_required" {
		t.Fatalf("after another browser's callback: %v", got)
	}
}

// TestOAuthUnderABasePath: an API served under a path (API Gateway's
// stage, "/api") sets the authorization's nonce cookie for the callback
// under that path, so the member's browser brings it back and the
// authorization completes; a cookie scoped to /v1/oauth/callback would
// never be sent to /api/v1/oauth/callback/{issuer}.
func TestOAuthUnderABasePath(t *testing.T) {
	t.Parallel()
	s := newBrokerStackUnder(t, localSealer(t), 0, "/api", false)
	p := oauthtest.NewProvider(t, s.url+"/v1/oauth/callback")
	up := oauthtest.NewServer(t, p)
	con := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear", "url": up.URL, "kind": "shared", "credential": oauthCred(p),
	})["id"].(string)
	back := s.authorizeAs(p, con, adminToken, p.User1())
	if code, page := s.browse(back.String()); code != 200 || !strings.Contains(page, "Connected") {
		t.Fatalf("callback under /api = %d %q, want 200", code, page)
	}
	if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil); got["status"] != "active" {
		t.Fatalf("after the callback: %v", got)
	}
}

// TestOAuthNonceCookieCannotBeTossed: over HTTPS the authorization's nonce
// is a __Host- cookie (Secure, Path=/, no Domain), which a browser lets no
// other host set: a page on a sibling subdomain that plants a cookie of the
// plain name, holding the nonce of an authorization it started (for its
// own connection), in the member's browser, and then sends the member to
// that authorization's provider URL, gets a refused callback and no code
// redeemed; the member's own authorization completes.
func TestOAuthNonceCookieCannotBeTossed(t *testing.T) {
	t.Parallel()
	s := newBrokerStackUnder(t, localSealer(t), 0, "", true)
	public := "https://" + strings.TrimPrefix(s.url, "http://")
	plain := func(raw string) string { return "http://" + strings.TrimPrefix(raw, "https://") }
	p := oauthtest.NewProvider(t, public+"/v1/oauth/callback")
	up := oauthtest.NewServer(t, p)
	con := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear", "url": up.URL, "kind": "shared", "credential": oauthCred(p),
	})["id"].(string)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// start opens an authorization URL and returns the nonce cookie it set
	// and the provider's answer after the member signed in.
	start := func() (*http.Cookie, *url.URL) {
		au := s.want(200, "POST", "/v1/connections/"+con+"/authorize", adminToken, nil)["authorization_url"].(string)
		req, _ := http.NewRequest(http.MethodGet, plain(au), nil)
		resp, c := openAuthorization(t, hc, req)
		if !strings.HasPrefix(c.Name, "__Host-fbx_oauth_") || c.Path != "/" || !c.Secure || !c.HttpOnly || c.Domain != "" {
			t.Fatalf("nonce cookie over HTTPS = %+v, want a __Host- cookie", c)
		}
		loc, _ := resp.Location()
		back, err := p.Login(context.Background(), loc.String(), p.User1())
		if err != nil {
			t.Fatal(err)
		}
		return c, back
	}
	callback := func(back *url.URL, c *http.Cookie) int {
		req, _ := http.NewRequest(http.MethodGet, plain(back.String()), nil)
		req.AddCookie(c)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	c, back := start()
	tossed := &http.Cookie{Name: strings.TrimPrefix(c.Name, "__Host-"), Value: c.Value}
	if code := callback(back, tossed); code != http.StatusBadRequest {
		t.Errorf("callback with the nonce in a cookie of the plain name = %d, want 400", code)
	}
	if p.Codes() != 0 {
		t.Errorf("%d codes redeemed for a planted nonce", p.Codes())
	}
	c, back = start()
	if code := callback(back, &http.Cookie{Name: c.Name, Value: c.Value}); code != http.StatusOK {
		t.Fatalf("callback with the __Host- cookie = %d, want 200", code)
	}
}

// TestOAuthCallbackWithoutRefreshToken: a provider that gives no refresh
// token (an OpenID provider not sent prompt=consent, the connection's
// consent_prompt off) completes, and the page says the access token is
// used until it expires.
func TestOAuthCallbackWithoutRefreshToken(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	p := oauthtest.NewProvider(t, s.url+"/v1/oauth/callback", oauthtest.StrictOfflineAccess())
	up := oauthtest.NewServer(t, p)
	cred := oauthCred(p)
	cred["consent_prompt"] = false
	con := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{"name": "linear", "url": up.URL, "kind": "shared", "credential": cred})["id"].(string)
	if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil)["oauth"].(map[string]any); got["consent_prompt"] != false {
		t.Fatalf("oauth = %v", got)
	}
	code, page := s.browse(s.authorizeAs(p, con, adminToken, p.User1()).String())
	if code != 200 || !strings.Contains(page, "no refresh token") || !strings.Contains(page, "until it expires") {
		t.Fatalf("callback = %d %q", code, page)
	}
}

// openAuthorization sends req, an authorization URL's GET, through hc
// (which follows no redirect) and fails unless it answers the redirect to
// the provider with one cookie, the nonce: the answer and that cookie.
func openAuthorization(t *testing.T, hc *http.Client, req *http.Request) (*http.Response, *http.Cookie) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusFound || len(cookies) != 1 {
		t.Fatalf("authorize redirect = %d, cookies %v", resp.StatusCode, cookies)
	}
	return resp, cookies[0]
}
