// Package oauthtest runs, on 127.0.0.1 and in process, a real OAuth 2 /
// OpenID authorization server (zitadel/oidc's op package over its example
// in-memory storage, with refresh token rotation) and an MCP server from the
// MCP Go SDK that requires its tokens (auth.RequireBearerToken, protected
// resource metadata at its well-known URL). Tests drive the whole MCP
// authorization flow against them; nothing here fakes the protocol.
package oauthtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/fluidbox/fluidbox/shared/oauth"
)

// The example storage's users (storage.NewUserStore).
const (
	Password = "verysecure"
	// User2 is the second user's login name; the first's is User1(issuer).
	User2 = "test-user2"
)

// Provider is the authorization server.
type Provider struct {
	Issuer    string
	ClientID  string
	Secret    string
	srv       *httptest.Server
	store     *storage.Storage
	refreshes atomic.Int64
	codes     atomic.Int64
	mu        sync.Mutex
	issued    []string // every token the token endpoint answered with
	resources []string // the resource parameter of every token request
	prompts   []string // the prompt parameter of every authorization request
}

// Issued is every access, refresh and ID token the provider handed out,
// and the client secret: what must never be found stored or logged.
func (p *Provider) Issued() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{p.Secret}, p.issued...)
}

// TokenResources is the resource parameter of every token request, in order.
func (p *Provider) TokenResources() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.resources)
}

type teeWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (t *teeWriter) Write(b []byte) (int, error) {
	t.buf.Write(b)
	return t.ResponseWriter.Write(b)
}

// User1 is the first example user's login name.
func (p *Provider) User1() string {
	u, _ := url.Parse(p.Issuer)
	return "test-user@" + u.Hostname()
}

// Refreshes counts refresh_token grants the token endpoint answered.
func (p *Provider) Refreshes() int64 { return p.refreshes.Load() }

// Codes counts authorization_code grants.
func (p *Provider) Codes() int64 { return p.codes.Load() }

// authorizePath is the provider's authorization endpoint.
const authorizePath = "/auth"

// ProviderOption changes how NewProvider's provider behaves.
type ProviderOption func(*providerOptions)

type providerOptions struct{ strictOffline bool }

// StrictOfflineAccess makes the provider grant offline_access (a refresh
// token) only to an authorization request with prompt=consent, as OpenID
// Connect Core 1.0 section 11 has a certified provider do.
func StrictOfflineAccess() ProviderOption { return func(o *providerOptions) { o.strictOffline = true } }

// Prompts is the prompt parameter of every authorization request, in order.
func (p *Provider) Prompts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.prompts)
}

// NewProvider starts the authorization server with one confidential web
// client (ClientID, Secret) allowed to redirect to fluidbox's redirect URI
// for this server under callback (oauth.Site.RedirectURIFor its issuer),
// as an operator registers it.
func NewProvider(t testing.TB, callback string, opts ...ProviderOption) *Provider {
	t.Helper()
	p := &Provider{ClientID: "fluidbox-web", Secret: "client-secret-CANARY-7f3a"}
	var o providerOptions
	for _, opt := range opts {
		opt(&o)
	}
	var handler http.Handler
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == authorizePath {
			q := r.URL.Query()
			p.mu.Lock()
			p.prompts = append(p.prompts, q.Get("prompt"))
			p.mu.Unlock()
			if o.strictOffline && !slices.Contains(strings.Fields(q.Get("prompt")), "consent") {
				// OpenID Connect Core 1.0 section 11: offline_access is
				// ignored unless the request says prompt=consent.
				q.Set("scope", strings.Join(slices.DeleteFunc(strings.Fields(q.Get("scope")), func(s string) bool { return s == oidc.ScopeOfflineAccess }), " "))
				r.URL.RawQuery = q.Encode()
			}
		}
		if r.Method != http.MethodPost || r.URL.Path != "/oauth/token" {
			handler.ServeHTTP(w, r)
			return
		}
		_ = r.ParseForm()
		switch r.PostForm.Get("grant_type") {
		case "refresh_token":
			p.refreshes.Add(1)
		case "authorization_code":
			p.codes.Add(1)
		}
		p.mu.Lock()
		p.resources = append(p.resources, r.PostForm.Get("resource"))
		p.mu.Unlock()
		tee := &teeWriter{ResponseWriter: w}
		handler.ServeHTTP(tee, r)
		var issued struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
			IDToken      string `json:"id_token"`
		}
		if json.Unmarshal(tee.buf.Bytes(), &issued) == nil {
			p.mu.Lock()
			for _, tok := range []string{issued.AccessToken, issued.RefreshToken, issued.IDToken} {
				if tok != "" {
					p.issued = append(p.issued, tok)
				}
			}
			p.mu.Unlock()
		}
	}))
	t.Cleanup(p.srv.Close)
	p.Issuer = p.srv.URL
	client := storage.WebClient(p.ClientID, p.Secret, oauth.Site{RedirectURI: callback}.RedirectURIFor(p.Issuer))
	p.store = storage.NewStorageWithClients(storage.NewUserStore(p.Issuer), map[string]*storage.Client{p.ClientID: client})
	handler = exampleop.SetupServer(p.Issuer, p.store, nil, false)
	return p
}

// RevokeAll ends every session of the client: its access and refresh
// tokens stop working (a member revoking the grant at the provider).
func (p *Provider) RevokeAll(ctx context.Context) error {
	for _, uid := range []string{"id1", "id2"} {
		if err := p.store.TerminateSession(ctx, uid, p.ClientID); err != nil {
			return err
		}
	}
	return nil
}

// Login follows an authorization URL as a browser would: the provider's
// login form is submitted for user, and the redirect to the client is
// returned unfollowed (the caller delivers it to the callback).
func (p *Provider) Login(ctx context.Context, authURL, user string) (*url.URL, error) {
	jar, _ := cookiejar.New(nil)
	return p.LoginIn(ctx, jar, authURL, user)
}

// LoginIn is Login in the browser whose cookies are jar: authURL may be
// fluidbox's authorize redirect, whose cookie the browser keeps for the
// callback.
func (p *Provider) LoginIn(ctx context.Context, jar http.CookieJar, authURL, user string) (*url.URL, error) {
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), p.Issuer) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("oauthtest: authorize: HTTP %d", resp.StatusCode)
	}
	id := resp.Request.URL.Query().Get("authRequestID")
	if id == "" {
		return nil, errors.New("oauthtest: the provider did not show its login page")
	}
	form := url.Values{"id": {id}, "username": {user}, "password": {Password}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/login/username", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = hc.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("oauthtest: login: HTTP %d", resp.StatusCode)
	}
	return resp.Request.URL.Parse(resp.Header.Get("Location"))
}

// Server is the MCP server behind RequireBearerToken.
type Server struct {
	URL string // the MCP endpoint
	srv *httptest.Server
	p   *Provider
	// Resource overrides the resource its metadata names ("" is URL).
	resource atomic.Pointer[string]
	// authServer overrides the authorization server its metadata names
	// ("" is the provider's issuer).
	authServer atomic.Pointer[string]
	mu         sync.Mutex
	seen       map[string]time.Time // token -> first seen
	cutoff     time.Time            // tokens first seen before it are expired
	rejects    atomic.Int64
	// introspect: learn a token's scopes at the provider's introspection
	// endpoint (for StepUpTool).
	introspect  bool
	stepUpCalls atomic.Int64
	listScope   atomic.Pointer[string]
}

// ServerOption changes how NewServer's server asks for tokens.
type ServerOption func(*serverOptions)

type serverOptions struct {
	refuseInit    bool
	openHandshake bool
	stepUpTool    string
	stepUpScope   string
}

// RefuseInitialize makes the server answer the 2025-11-25 initialize with
// 400, as a server of the 2026-07-28 revision only does (the MCP
// conformance suite's are such; the Go SDK's always answers it): only its
// stateless requests are served, behind the token check.
func RefuseInitialize() ServerOption { return func(o *serverOptions) { o.refuseInit = true } }

// OpenHandshake makes the server answer initialize and notifications
// without a token and ask for one only for operations (tools/list,
// tools/call), as some servers do.
func OpenHandshake() ServerOption { return func(o *serverOptions) { o.openHandshake = true } }

// StepUpTool adds a tool, name, that needs scope on top of what the other
// tools need: its tools/call with a token lacking the scope (as the
// provider's introspection endpoint says) is answered 403 by the SDK's own
// auth.RequireBearerToken with Scopes, whose challenge names the scope
// (MCP step-up authorization). The tool answers like whoami.
func StepUpTool(name, scope string) ServerOption {
	return func(o *serverOptions) { o.stepUpTool, o.stepUpScope = name, scope }
}

// NewServer starts the MCP server: one tool, whoami, answering with the
// subject of the token that called it, and protected resource metadata at
// /.well-known/oauth-protected-resource/mcp naming the provider.
func NewServer(t testing.TB, p *Provider, opts ...ServerOption) *Server {
	t.Helper()
	s := &Server{p: p, seen: map[string]time.Time{}}
	ms := mcp.NewServer(&mcp.Implementation{Name: "oauth-upstream", Version: "1"}, nil)
	type none struct{}
	type who struct {
		Subject string `json:"subject"`
	}
	whoami := func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, who, error) {
		ti := req.Extra.TokenInfo
		if ti == nil {
			return nil, who{}, errors.New("no token")
		}
		return nil, who{Subject: ti.UserID}, nil
	}
	mcp.AddTool(ms, &mcp.Tool{Name: "whoami", Description: "says whose token called it"}, whoami)
	var o serverOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.stepUpTool != "" {
		s.introspect = true
		mcp.AddTool(ms, &mcp.Tool{Name: o.stepUpTool, Description: "says whose token called it, if it has scope " + o.stepUpScope}, whoami)
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil)
	mux := http.NewServeMux()
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL + "/mcp"
	prmURL := s.srv.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := s.URL
		if p := s.resource.Load(); p != nil {
			res = *p
		}
		as := p.Issuer
		if p := s.authServer.Load(); p != nil {
			as = *p
		}
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource: res, AuthorizationServers: []string{as}, ScopesSupported: []string{oidc.ScopeOpenID},
		}).ServeHTTP(w, r)
	}))
	guarded := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL})(mcpHandler)
	if !o.openHandshake && o.stepUpTool == "" && !o.refuseInit {
		mux.Handle("/mcp", guarded)
		return s
	}
	stepUp := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL, Scopes: []string{o.stepUpScope}})(mcpHandler)
	listScope := func() string {
		if p := s.listScope.Load(); p != nil {
			return *p
		}
		return ""
	}
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(b, &msg)
		switch {
		case o.refuseInit && msg.Method == "initialize":
			http.Error(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"initialize is not served"}}`, http.StatusBadRequest)
		case o.openHandshake && (msg.Method == "initialize" || strings.HasPrefix(msg.Method, "notifications/")):
			mcpHandler.ServeHTTP(w, r)
		case o.stepUpTool != "" && msg.Method == "tools/call" && msg.Params.Name == o.stepUpTool:
			s.stepUpCalls.Add(1)
			stepUp.ServeHTTP(w, r)
		case msg.Method == "tools/list" && listScope() != "":
			auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL, Scopes: []string{listScope()}})(mcpHandler).ServeHTTP(w, r)
		default:
			guarded.ServeHTTP(w, r)
		}
	}))
	return s
}

// RequireListScope makes tools/list need scope too, from now on (only on a
// server with a StepUpTool, which learns a token's scopes).
func (s *Server) RequireListScope(scope string) { s.listScope.Store(&scope) }

// StepUpCalls counts tools/call requests of the StepUpTool, answered or
// refused.
func (s *Server) StepUpCalls() int64 { return s.stepUpCalls.Load() }

// SetResource makes the metadata name another resource than the server.
func (s *Server) SetResource(r string) { s.resource.Store(&r) }

// SetAuthorizationServer makes its metadata name issuer as its
// authorization server from now on (an upstream that switches servers).
func (s *Server) SetAuthorizationServer(issuer string) { s.authServer.Store(&issuer) }

// ExpireTokens makes every token seen so far expired (as if its lifetime
// had run out), so the next call with one gets a 401.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutoff = time.Now()
}

// Rejects counts requests refused with 401.
func (s *Server) Rejects() int64 { return s.rejects.Load() }

// verify checks a token at the provider's userinfo endpoint (the provider
// knows whether it is live) and applies ExpireTokens.
func (s *Server) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	s.mu.Lock()
	first, ok := s.seen[token]
	if !ok {
		first = time.Now()
		s.seen[token] = first
	}
	expired := !first.After(s.cutoff) && !s.cutoff.IsZero()
	s.mu.Unlock()
	if expired {
		s.rejects.Add(1)
		return nil, auth.ErrInvalidToken
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.p.Issuer+"/userinfo", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.rejects.Add(1)
		return nil, auth.ErrInvalidToken
	}
	var info oidc.UserInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
		return nil, err
	}
	ti := &auth.TokenInfo{UserID: info.Subject, Expiration: time.Now().Add(time.Hour)}
	if s.introspect {
		if ti.Scopes, err = s.scopes(ctx, token); err != nil {
			return nil, err
		}
	}
	return ti, nil
}

// scopes asks the provider's introspection endpoint (RFC 7662), as the
// client the tokens were issued to, which scopes token carries.
func (s *Server) scopes(ctx context.Context, token string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.p.Issuer+"/oauth/introspect", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(s.p.ClientID, s.p.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var in oidc.IntrospectionResponse
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&in) != nil {
		return nil, fmt.Errorf("oauthtest: introspection: HTTP %d", resp.StatusCode)
	}
	if !in.Active {
		s.rejects.Add(1)
		return nil, auth.ErrInvalidToken
	}
	return in.Scope, nil
}

// Verify exposes the server's token check (for asserting a token is dead).
func (s *Server) Verify(ctx context.Context, token string) error {
	_, err := s.verify(ctx, token, nil)
	return err
}
