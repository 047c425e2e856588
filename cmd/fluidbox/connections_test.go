package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestConnectionsAuthorize: the command asks the API for the URL and
// prints it; a URL that is not http(s) is refused, not printed. (The flow
// behind the route is tested in shared/api against a real provider.)
func TestConnectionsAuthorize(t *testing.T) {
	t.Parallel()
	const good = "https://auth.example/authorize?state=s&code_challenge=c"
	var answer atomic.Pointer[string]
	answer.Store(new(string))
	*answer.Load() = good
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/connections/con_abc/authorize" || r.Header.Get("Authorization") != "Bearer "+adminToken {
			http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"authorization_url": *answer.Load(), "expires_at": "2030-01-01T00:00:00Z"})
	}))
	t.Cleanup(srv.Close)
	vars := map[string]string{"FLUIDBOX_URL": srv.URL, "FLUIDBOX_ADMIN_TOKEN": adminToken}
	ctx := context.Background()
	r := fluidbox(ctx, vars, "", "connections", "authorize", "con_abc")
	if r.code != 0 || !strings.Contains(r.stdout, good) {
		t.Fatalf("authorize = %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := fluidbox(ctx, vars, "", "connections", "authorize"); r.code == 0 {
		t.Errorf("without an id: exit 0")
	}
	bad := "javascript:alert(1)"
	answer.Store(&bad)
	if r := fluidbox(ctx, vars, "", "connections", "authorize", "con_abc"); r.code == 0 || strings.Contains(r.stdout, "javascript") {
		t.Errorf("a non-http URL = %d %q", r.code, r.stdout)
	}
}
