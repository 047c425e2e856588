package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/oidcissuer"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/sso"
)

// TestConnectionsPaged: GET /v1/connections answers one page at a time,
// newest first, with the cursor of the other listings, and each caller's
// pages hold only the connections they may see.
func TestConnectionsPaged(t *testing.T) {
	t.Parallel()
	iss := oidcissuer.Start(t, ssoAudience)
	verifier, err := sso.NewVerifier(context.Background(), sso.Config{Issuer: iss.URL, Audience: ssoAudience})
	if err != nil {
		t.Fatal(err)
	}
	st, db := roleStore(t)
	led := ledger.New(st, time.Now)
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, OIDC: verifier, Sealer: localSealer(t), Egress: testenv.Loopback})))
	t.Cleanup(srv.Close)
	s := &ssoStack{stack: &stack{t: t, url: srv.URL, st: st, db: db, led: led}, iss: iss}
	alice, bob := s.user("alice", "member"), s.user("bob", "member")

	create := func(token, name, kind string) string {
		return s.must(201, "POST", "/v1/connections", token, map[string]any{
			"name": name, "url": "http://127.0.0.1:9/mcp", "kind": kind,
			"credential": map[string]any{"type": "bearer", "token": "secret-" + name},
		})["id"].(string)
	}
	var all []string // newest first
	for i, c := range []struct{ token, name, kind string }{
		{adminToken, "shared-a", "shared"}, {alice, "alice-1", "personal"}, {bob, "bob-1", "personal"},
		{adminToken, "shared-b", "shared"}, {alice, "alice-2", "personal"}, {adminToken, "shared-c", "shared"},
	} {
		if i > 0 {
			time.Sleep(time.Millisecond) // distinct creation times order the listing
		}
		all = append([]string{create(c.token, c.name, c.kind)}, all...)
	}

	list := func(token string, limit int) (ids []string, pages int) {
		t.Helper()
		q := url.Values{"limit": {fmt.Sprint(limit)}}
		for {
			out := s.must(200, "GET", "/v1/connections?"+q.Encode(), token, nil)
			pages++
			got := out["connections"].([]any)
			if len(got) > limit {
				t.Fatalf("a page of %d for limit %d", len(got), limit)
			}
			for _, c := range got {
				ids = append(ids, c.(map[string]any)["name"].(string))
			}
			next, _ := out["next_cursor"].(string)
			if next == "" {
				return ids, pages
			}
			q.Set("cursor", next)
		}
	}
	names := map[string]string{}
	for _, id := range all {
		names[id] = s.must(200, "GET", "/v1/connections/"+id, adminToken, nil)["name"].(string)
	}
	var want []string
	for _, id := range all {
		want = append(want, names[id])
	}
	if got, pages := list(adminToken, 2); strings.Join(got, ",") != strings.Join(want, ",") || pages < 3 {
		t.Errorf("admin, pages of 2: %v in %d pages, want %v", got, pages, want)
	}
	if got, _ := list(adminToken, 50); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("admin, one page: %v, want %v", got, want)
	}
	if got, _ := list(alice, 2); strings.Join(got, ",") != "shared-c,alice-2,shared-b,alice-1,shared-a" {
		t.Errorf("alice sees %v; want the shared ones and hers, newest first", got)
	}
	if got, _ := list(bob, 1); strings.Join(got, ",") != "shared-c,shared-b,bob-1,shared-a" {
		t.Errorf("bob sees %v", got)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if out := s.must(200, "GET", "/v1/connections?created_after="+future, adminToken, nil); len(out["connections"].([]any)) != 0 || out["next_cursor"] != nil {
		t.Errorf("created_after in the future: %v", out)
	}
	for _, q := range []string{"limit=0", "limit=101", "cursor=nope", "created_before=soon"} {
		if r := s.do("GET", "/v1/connections?"+q, adminToken, nil); r.status != 400 {
			t.Errorf("GET /v1/connections?%s = %d %s, want 400", q, r.status, r.raw)
		}
	}
}
