package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/web"
)

// The page is served by the same handler as the API, without a token; the
// API around it keeps answering in its own error shape.
func TestApprovalsPageRoutes(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tests := []struct {
		method, path string
		wantStatus   int
		wantType     string
		wantCSP      bool
	}{
		{"GET", "/", 200, "text/html; charset=utf-8", true},
		{"HEAD", "/", 200, "text/html; charset=utf-8", true},
		{"GET", "/app.js", 200, "text/javascript; charset=utf-8", true},
		{"GET", "/app.css", 200, "text/css; charset=utf-8", true},
		{"GET", "/render.js", 200, "text/javascript; charset=utf-8", true},
		{"GET", "/config.json", 200, "application/json", true},
		{"GET", "/index.html", 404, "application/json", false},
		{"POST", "/", 405, "application/json", false},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, s.url+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.wantStatus || resp.Header.Get("Content-Type") != tt.wantType {
			t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), tt.wantStatus, tt.wantType)
		}
		if got := resp.Header.Get("Content-Security-Policy"); (got == web.New(web.Config{}).ContentSecurityPolicy()) != tt.wantCSP {
			t.Errorf("%s %s: Content-Security-Policy = %q, want it set: %v", tt.method, tt.path, got, tt.wantCSP)
		}
		if tt.path == "/" && tt.method == "GET" && !strings.Contains(string(body), "Needs attention") {
			t.Errorf("GET / does not serve the approvals page")
		}
	}
}
