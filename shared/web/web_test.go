package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestAssets(t *testing.T) {
	t.Parallel()
	site := New(Config{})
	tests := []struct {
		name     string
		h        http.Handler
		wantType string
		wantBody string
	}{
		{"page", site.Page(), "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"script", site.Script(), "text/javascript; charset=utf-8", `"use strict";`},
		{"render", site.Render(), "text/javascript; charset=utf-8", `window.fluidboxRender`},
		{"style", site.Style(), "text/css; charset=utf-8", ".approval"},
		{"config", site.ConfigJSON(), "application/json", `{"sign_in":"token"}`},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		tt.h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 200 || rec.Header().Get("Content-Type") != tt.wantType {
			t.Errorf("%s: status %d, Content-Type %q; want 200, %q", tt.name, rec.Code, rec.Header().Get("Content-Type"), tt.wantType)
		}
		if got, want := rec.Header().Get("Content-Security-Policy"), site.ContentSecurityPolicy(); got != want {
			t.Errorf("%s: Content-Security-Policy = %q, want %q", tt.name, got, want)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no X-Content-Type-Options: nosniff", tt.name)
		}
		if !strings.Contains(rec.Body.String(), tt.wantBody) {
			t.Errorf("%s: body lacks %q", tt.name, tt.wantBody)
		}
	}
}

// The CSP is what stops an injected script if a sink slipped in; it must
// not be loosened. With SSO it adds exactly the token endpoint's origin to
// connect-src, and only for endpoints a browser may be sent to.
func TestContentSecurityPolicyIsStrict(t *testing.T) {
	t.Parallel()
	good := &OIDC{Issuer: "https://idp.example.com", ClientID: "fluidbox", RolesClaim: "fluidbox_roles",
		AuthorizationEndpoint: "https://idp.example.com/authorize", TokenEndpoint: "https://login.example.com:8443/oauth/token"}
	local := &OIDC{Issuer: "http://127.0.0.1:9999", ClientID: "fluidbox",
		AuthorizationEndpoint: "http://127.0.0.1:9999/authorize", TokenEndpoint: "http://127.0.0.1:9999/token"}
	bad := func(f func(o *OIDC)) *OIDC { o := *good; f(&o); return &o }
	tests := []struct {
		name        string
		cfg         Config
		wantSignIn  string
		wantConnect string
	}{
		{"single admin", Config{}, SignInToken, "connect-src 'self';"},
		{"sso", Config{OIDC: good}, SignInSSO, "connect-src 'self' https://login.example.com:8443;"},
		{"local issuer over http", Config{OIDC: local}, SignInSSO, "connect-src 'self' http://127.0.0.1:9999;"},
		{"http token endpoint of an https issuer", Config{OIDC: bad(func(o *OIDC) { o.TokenEndpoint = "http://idp.example.com/token" })}, SignInUnavailable, "connect-src 'self';"},
		{"relative token endpoint", Config{OIDC: bad(func(o *OIDC) { o.TokenEndpoint = "/token" })}, SignInUnavailable, "connect-src 'self';"},
		{"javascript authorization endpoint", Config{OIDC: bad(func(o *OIDC) { o.AuthorizationEndpoint = "javascript:alert(1)" })}, SignInUnavailable, "connect-src 'self';"},
		{"user info in the endpoint", Config{OIDC: bad(func(o *OIDC) { o.TokenEndpoint = "https://a:b@idp.example.com/token" })}, SignInUnavailable, "connect-src 'self';"},
		{"no client id", Config{OIDC: bad(func(o *OIDC) { o.ClientID = "" })}, SignInUnavailable, "connect-src 'self';"},
	}
	for _, tt := range tests {
		site := New(tt.cfg)
		csp := site.ContentSecurityPolicy()
		for _, bad := range []string{"'unsafe-inline'", "'unsafe-eval'", "*", "http: ", "https: "} {
			if strings.Contains(csp, bad) {
				t.Errorf("%s: Content-Security-Policy %q allows %s", tt.name, csp, bad)
			}
		}
		for _, must := range []string{"default-src 'none'", "script-src 'self'", "form-action 'none'", "frame-ancestors 'none'", tt.wantConnect} {
			if !strings.Contains(csp, must) {
				t.Errorf("%s: Content-Security-Policy %q lacks %s", tt.name, csp, must)
			}
		}
		rec := httptest.NewRecorder()
		site.ConfigJSON().ServeHTTP(rec, httptest.NewRequest("GET", "/config.json", nil))
		var got struct {
			SignIn string `json:"sign_in"`
			OIDC   *OIDC  `json:"oidc"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: config.json %q: %v", tt.name, rec.Body.String(), err)
		}
		if got.SignIn != tt.wantSignIn || (got.OIDC != nil) != (tt.wantSignIn == SignInSSO) {
			t.Errorf("%s: config.json = %s, want sign_in %q with oidc only for sso", tt.name, rec.Body.String(), tt.wantSignIn)
		}
		if got.OIDC != nil && *got.OIDC != *tt.cfg.OIDC {
			t.Errorf("%s: config.json oidc = %+v, want %+v", tt.name, *got.OIDC, *tt.cfg.OIDC)
		}
	}
}

// The page shows agent-controlled strings (tool inputs); the script must
// never hand them to an HTML parser or evaluator.
func TestScriptHasNoHTMLSinks(t *testing.T) {
	t.Parallel()
	app, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	renderJS, err := static.ReadFile("static/render.js")
	if err != nil {
		t.Fatal(err)
	}
	js := append(append(app, '\n'), renderJS...)
	html, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*["']on|\.src\s*=|localStorage|location\.(search|hash|href)\s*=`)
	if m := sinks.FindAllString(string(js), -1); len(m) > 0 {
		t.Errorf("app.js uses %q; build elements and set textContent instead", m)
	}
	inline := regexp.MustCompile(`(?i)<script>|<style|\son[a-z]+=`)
	if m := inline.FindAllString(string(html), -1); len(m) > 0 {
		t.Errorf("index.html has inline script, style or handlers %q, which the CSP forbids", m)
	}
	if strings.Contains(string(js), `fetch("/`) || strings.Contains(string(js), `"/v1/`) {
		t.Error("app.js uses an absolute API path; use relative paths so the page works under a stage prefix")
	}
}

func TestHeadHasNoBody(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	New(Config{}).Page().ServeHTTP(rec, httptest.NewRequest("HEAD", "/", nil))
	if rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("HEAD / = %d with %d bytes, want 200 and no body", rec.Code, rec.Body.Len())
	}
}
