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
)

const oauthPolicy = `{"name":"oauth","default_verdict":"deny","rules":[
 {"id":"whoami","tool":"mcp__linear__whoami","verdict":"allow"}]}`

// get fetches a callback URL as the member's browser would, returning
// the status and the page.
func (s *brokerStack) browse(raw string) (int, string) {
	s.t.Helper()
	resp, err := http.Get(raw)
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

// authorizeURL asks for an authorization URL and logs in at the provider
// as user, returning the callback URL the provider redirects to.
func (s *brokerStack) authorizeAs(p *oauthtest.Provider, con, token, user string) *url.URL {
	s.t.Helper()
	au := s.want(200, "POST", "/v1/connections/"+con+"/authorize", token, nil)["authorization_url"].(string)
	back, err := p.Login(context.Background(), au, user)
	if err != nil {
		s.t.Fatalf("login at the provider: %v", err)
	}
	if !strings.HasPrefix(back.String(), s.url+"/v1/oauth/callback?") {
		s.t.Fatalf("the provider redirected to %s", back.Redacted())
	}
	return back
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
	up := oauthtest.NewServer(t, p)
	pol := s.policy(oauthPolicy)

	created := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear", "url": up.URL, "kind": "shared",
		"credential":   map[string]any{"type": "oauth", "client_id": p.ClientID, "client_secret": p.Secret},
		"tool_classes": map[string]string{"whoami": "read"},
	})
	con := created["id"].(string)
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

	// The authorization URL: PKCE S256, the resource, the state.
	au := s.want(200, "POST", "/v1/connections/"+con+"/authorize", adminToken, nil)["authorization_url"].(string)
	u, _ := url.Parse(au)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") != up.URL || q.Get("state") == "" || q.Get("redirect_uri") != s.url+"/v1/oauth/callback" {
		t.Fatalf("authorization URL = %s", au)
	}
	back, err := p.Login(context.Background(), au, p.User1())
	if err != nil {
		t.Fatal(err)
	}

	// An unknown state, and a wrong issuer (RFC 9207), are refused; the
	// wrong issuer consumed its state, so the real response is then spent.
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

	// The real flow: tokens sealed, generation 2, active; a replay fails.
	back = s.authorizeAs(p, con, adminToken, p.User1())
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

	// Brokered calls present the provider's token for this member.
	s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
	runA, tokA := s.brokeredRun(pol, con, "")
	r := s.toolsCall(runA, tokA, "a1", "mcp__linear__whoami", map[string]any{})
	if r.body["decision"] != "allow" || !strings.Contains(resultText(t, r), "id1") {
		t.Fatalf("whoami = %s", r.raw)
	}

	// The access token expires mid-run: the upstream's 401 makes the
	// broker refresh once; the call succeeds; the generation stays.
	up.ExpireTokens()
	before := p.Refreshes()
	r = s.toolsCall(runA, tokA, "a2", "mcp__linear__whoami", map[string]any{})
	if r.body["decision"] != "allow" || !strings.Contains(resultText(t, r), "id1") {
		t.Fatalf("whoami after expiry = %s", r.raw)
	}
	if n := p.Refreshes() - before; n != 1 {
		t.Errorf("refreshes = %d, want 1", n)
	}
	if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil); got["authorization_generation"] != float64(2) {
		t.Errorf("a refresh moved the generation: %v", got)
	}

	// The member revokes the grant at the provider: the refresh is refused
	// for good, the call is denied (binding, re-authorize), the connection
	// needs authorization.
	if err := p.RevokeAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	up.ExpireTokens()
	r = s.toolsCall(runA, tokA, "a3", "mcp__linear__whoami", map[string]any{})
	if r.status != 200 || r.body["decision"] != "deny" || r.body["source"] != "binding" || !strings.Contains(r.body["reason"].(string), "re-authoriz") {
		t.Fatalf("call after revocation = %d %s, want a binding denial saying to re-authorize\n%s", r.status, r.raw, s.logs.String())
	}
	if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil); got["status"] != "authorization_required" || got["authorization_generation"] != float64(2) {
		t.Fatalf("after revocation: %v", got)
	}

	// Re-authorizing moves the generation: the old run refuses, a new one
	// works.
	back = s.authorizeAs(p, con, adminToken, p.User1())
	if code, _ := s.browse(back.String()); code != 200 {
		t.Fatalf("re-authorization callback = %d", code)
	}
	if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil); got["status"] != "active" || got["authorization_generation"] != float64(3) {
		t.Fatalf("after re-authorization: %v", got)
	}
	r = s.toolsCall(runA, tokA, "a4", "mcp__linear__whoami", map[string]any{})
	if r.body["decision"] != "deny" || r.body["source"] != "binding" {
		t.Errorf("old run after re-authorization = %s, want a binding denial", r.raw)
	}
	runB, tokB := s.brokeredRun(pol, con, "")
	if r := s.toolsCall(runB, tokB, "b1", "mcp__linear__whoami", map[string]any{}); r.body["decision"] != "allow" {
		t.Errorf("new run = %s", r.raw)
	}

	// Revoking works from authorization_required too, and a pending
	// authorization then cannot complete.
	other := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear2", "url": up.URL, "kind": "shared", "credential": map[string]any{"type": "oauth", "client_id": p.ClientID, "client_secret": p.Secret},
	})["id"].(string)
	back = s.authorizeAs(p, other, adminToken, p.User1())
	if got := s.want(200, "DELETE", "/v1/connections/"+other, adminToken, nil); got["status"] != "revoked" {
		t.Fatalf("revoke an unauthorized oauth connection: %v", got)
	}
	if code, _ := s.browse(back.String()); code != 400 {
		t.Errorf("callback for a revoked connection = %d, want 400", code)
	}

	// Every token request carried the resource (RFC 8707).
	for i, res := range p.TokenResources() {
		if res != up.URL {
			t.Errorf("token request %d: resource %q, want %q", i, res, up.URL)
		}
	}
	// No token, no client secret anywhere.
	s.assertNoSecrets(p.Issued())
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
		"name": "linear", "url": up.URL, "kind": "shared", "credential": map[string]any{"type": "oauth", "client_id": p.ClientID},
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
