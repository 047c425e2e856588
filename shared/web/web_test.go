package web

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestAssets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		h        http.Handler
		wantType string
		wantBody string
	}{
		{"page", Page(), "text/html; charset=utf-8", `<script src="app.js" defer></script>`},
		{"script", Script(), "text/javascript; charset=utf-8", `"use strict";`},
		{"style", Style(), "text/css; charset=utf-8", ".approval"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		tt.h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 200 || rec.Header().Get("Content-Type") != tt.wantType {
			t.Errorf("%s: status %d, Content-Type %q; want 200, %q", tt.name, rec.Code, rec.Header().Get("Content-Type"), tt.wantType)
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != ContentSecurityPolicy {
			t.Errorf("%s: Content-Security-Policy = %q, want %q", tt.name, got, ContentSecurityPolicy)
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
// not be loosened.
func TestContentSecurityPolicyIsStrict(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"'unsafe-inline'", "'unsafe-eval'", "*", "http:", "https:"} {
		if strings.Contains(ContentSecurityPolicy, bad) {
			t.Errorf("Content-Security-Policy allows %s", bad)
		}
	}
	for _, must := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, must) {
			t.Errorf("Content-Security-Policy lacks %s", must)
		}
	}
}

// The page shows agent-controlled strings (tool inputs); the script must
// never hand them to an HTML parser or evaluator.
func TestScriptHasNoHTMLSinks(t *testing.T) {
	t.Parallel()
	js, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	html, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	sinks := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\(\s*["']on|\.src\s*=|localStorage`)
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
	Page().ServeHTTP(rec, httptest.NewRequest("HEAD", "/", nil))
	if rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("HEAD / = %d with %d bytes, want 200 and no body", rec.Code, rec.Body.Len())
	}
}
