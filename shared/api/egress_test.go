package api_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/ledger"
)

// TestConnectionsCannotPointInside: with the production guard (no range
// allowed), creating a connection or setting the model upstream refuses
// every URL that can never be dialled, and a connection stored while
// loopback was allowed is refused at refresh, before any request reaches
// it. Every server here is on 127.0.0.1; the refused addresses are never
// dialled (the URL check refuses literals, the dial guard the rest).
func TestConnectionsCannotPointInside(t *testing.T) {
	t.Parallel()
	up := newMCPUpstream(t, canary)
	up.addEcho("Echo.")
	sealer := localSealer(t)
	// A control plane that allowed loopback stores a connection to the
	// upstream, as `fluidbox dev` would.
	s := newBrokerStack(t, sealer, 0)
	con := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "local", "url": up.url(), "kind": "shared", "credential": map[string]any{"type": "bearer", "token": canary},
	})["id"].(string)

	// The same table behind a server whose guard allows nothing.
	strict := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: ledger.New(s.st, time.Now), Sealer: sealer,
		Logger: slog.New(slog.NewTextHandler(s.logs, nil))})))
	t.Cleanup(strict.Close)
	p := &stack{t: t, url: strict.URL, st: s.st, db: s.db, led: s.led}

	for _, u := range []string{
		up.url(), // http to loopback, not allowed here
		strings.Replace(up.url(), "127.0.0.1", "localhost", 1),
		"https://127.0.0.1/mcp", "https://localhost/mcp", "https://[::1]/mcp",
		"http://169.254.169.254/latest/meta-data/", "https://169.254.169.254/",
		"https://[fd00:ec2::254]/", "https://[fe80::1]/", "https://10.0.0.5/mcp", "https://192.168.1.1/",
		"https://172.16.0.1/", "https://100.64.0.1/", "https://[::ffff:127.0.0.1]/", "https://0.0.0.0/",
		"https://[64:ff9b::a9fe:a9fe]/", "http://mcp.example.com/mcp", "ftp://mcp.example.com/",
	} {
		r := p.do("POST", "/v1/connections", adminToken, map[string]any{
			"name": "inside", "url": u, "kind": "shared", "credential": map[string]any{"type": "bearer", "token": canary},
		})
		if r.status != 400 || !strings.Contains(string(r.raw), "url") {
			t.Errorf("POST /v1/connections url %s = %d %s, want 400 naming url", u, r.status, r.raw)
		}
		if strings.Contains(string(r.raw), u) {
			t.Errorf("the refusal of %s quotes the URL: %s", u, r.raw)
		}
		mr := p.do("PUT", "/v1/model-upstream", adminToken, map[string]any{
			"url": u, "credential": map[string]any{"type": "header", "name": "x-api-key", "value": canary},
		})
		if mr.status != 400 {
			t.Errorf("PUT /v1/model-upstream url %s = %d %s, want 400", u, mr.status, mr.raw)
		}
	}
	// A public https name is accepted at creation: it is judged again, after
	// resolution, at every dial.
	p.must(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "public", "url": "https://mcp.example.com/mcp", "kind": "shared", "credential": map[string]any{"type": "bearer", "token": canary},
	})

	before := up.requests.Load()
	r := p.do("POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
	if r.status != 409 || !strings.Contains(string(r.raw), "nothing was sent") {
		t.Errorf("refresh of a loopback connection where loopback is refused = %d %s, want 409 saying nothing was sent", r.status, r.raw)
	}
	if n := up.requests.Load() - before; n != 0 {
		t.Errorf("the upstream got %d requests from the strict server, want 0", n)
	}
	// Where loopback is allowed the same connection refreshes.
	s.want(200, "POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
	s.assertNoCanary()
}

// TestUpstreamForbiddenIsNotABadCredential: an upstream that answers 403
// (it understood the credential and refuses the request) is reported as
// such on refresh, not as a credential to replace.
func TestUpstreamForbiddenIsNotABadCredential(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "this token may not list tools "+canary, http.StatusForbidden)
	}))
	t.Cleanup(up.Close)
	s := newBrokerStack(t, localSealer(t), 0)
	con := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "scoped", "url": up.URL, "kind": "shared", "credential": map[string]any{"type": "bearer", "token": canary},
	})["id"].(string)
	r := s.call("POST", "/v1/connections/"+con+"/tools/refresh", adminToken, nil)
	if r.status != 409 || !strings.Contains(string(r.raw), "did not reject the credential") || strings.Contains(string(r.raw), "replace it") {
		t.Errorf("refresh against a 403 = %d %s, want 409 saying the credential was not rejected", r.status, r.raw)
	}
	s.assertNoCanary()
}
