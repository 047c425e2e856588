package broker_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/broker"
)

// TestScopeChallenge: a 403 with error="insufficient_scope" is
// ErrInsufficientScope carrying the challenge's scopes, read with the SDK's
// parser; a 401's scopes are carried too. A challenge a hostile upstream
// shaped (the credential as a scope, invalid scope tokens, too many, too
// long, unparsable) is ignored: a plain refusal, no scopes kept.
func TestScopeChallenge(t *testing.T) {
	t.Parallel()
	var many []string
	for i := range broker.MaxScopes + 1 {
		many = append(many, fmt.Sprintf("s%d", i))
	}
	cases := []struct {
		name       string
		status     int
		header     []string
		want       error
		wantScopes []string
	}{
		{"step-up", 403, []string{`Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://x/.well-known/oauth-protected-resource"`}, broker.ErrInsufficientScope, []string{"mcp:basic", "mcp:write"}},
		{"duplicates kept once", 403, []string{`Bearer scope="repo:a repo:b repo:a", error="insufficient_scope"`}, broker.ErrInsufficientScope, []string{"repo:a", "repo:b"}},
		{"401 with a scope", 401, []string{`Bearer scope="files:read", resource_metadata="http://x/m"`}, broker.ErrUnauthorized, []string{"files:read"}},
		{"another scheme first", 403, []string{`Basic realm="x", Bearer error="insufficient_scope", scope="repo:a"`}, broker.ErrInsufficientScope, []string{"repo:a"}},
		{"403 without an error (the Go SDK's)", 403, []string{`Bearer resource_metadata="http://x/m", scope="repo:w"`}, broker.ErrInsufficientScope, []string{"repo:w"}},
		{"403 with another error", 403, []string{`Bearer error="invalid_token", scope="a"`}, broker.ErrForbidden, nil},
		{"403 without scope", 403, []string{`Bearer error="insufficient_scope"`}, broker.ErrForbidden, nil},
		{"the credential as a scope", 403, []string{`Bearer error="insufficient_scope", scope="a ` + canary + `"`}, broker.ErrForbidden, nil},
		{"the credential inside a scope", 403, []string{`Bearer error="insufficient_scope", scope="x` + canary + `y"`}, broker.ErrForbidden, nil},
		{"a quote in a scope", 403, []string{`Bearer error="insufficient_scope", scope="a\"b"`}, broker.ErrForbidden, nil},
		{"a backslash in a scope", 403, []string{`Bearer error="insufficient_scope", scope="a\\\\b"`}, broker.ErrForbidden, nil},
		{"a tab", 403, []string{"Bearer error=\"insufficient_scope\", scope=\"a\tb\""}, broker.ErrForbidden, nil},
		{"a double space", 403, []string{`Bearer error="insufficient_scope", scope="a  b"`}, broker.ErrForbidden, nil},
		{"non-ASCII", 403, []string{`Bearer error="insufficient_scope", scope="caf` + "\u00e9" + `"`}, broker.ErrForbidden, nil},
		{"too many", 403, []string{`Bearer error="insufficient_scope", scope="` + strings.Join(many, " ") + `"`}, broker.ErrForbidden, nil},
		{"too long", 403, []string{`Bearer error="insufficient_scope", scope="` + strings.Repeat("x", broker.MaxScopeLen+1) + `"`}, broker.ErrForbidden, nil},
		{"oversized header", 403, []string{`Bearer error="insufficient_scope", scope="a", x="` + strings.Repeat("y", broker.MaxChallengeBytes) + `"`}, broker.ErrForbidden, nil},
		{"unparsable", 403, []string{`Bearer error="insufficient_scope", scope="a`}, broker.ErrForbidden, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, h := range c.header {
					w.Header().Add("WWW-Authenticate", h)
				}
				http.Error(w, "refused; you sent "+r.Header.Get("Authorization"), c.status)
			}))
			t.Cleanup(srv.Close)
			_, err := broker.ListTools(t.Context(), loopback, srv.URL, goodCred)
			var uerr *broker.UpstreamError
			if !errors.Is(err, c.want) || !errors.As(err, &uerr) || uerr.Status != c.status {
				t.Fatalf("ListTools = %v, want %v with HTTP %d", err, c.want, c.status)
			}
			if !slices.Equal(uerr.Scopes, c.wantScopes) {
				t.Errorf("scopes = %q, want %q", uerr.Scopes, c.wantScopes)
			}
			if c.want != broker.ErrInsufficientScope && errors.Is(err, broker.ErrInsufficientScope) {
				t.Errorf("%v is ErrInsufficientScope", err)
			}
			assertNoSecret(t, err)
			for _, s := range c.wantScopes {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error's text %q names the upstream's scope %q", err, s)
				}
			}
		})
	}
}

// FuzzParseScopes: whatever the upstream sends, the scopes kept are
// distinct valid scope tokens within the bounds.
func FuzzParseScopes(f *testing.F) {
	for _, s := range []string{"", "a", "mcp:basic mcp:write", "a  b", "a\"b", " a", "a ", "x\x00y", strings.Repeat("s ", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, scope string) {
		scopes, ok := broker.ParseScopes(scope)
		if !ok {
			if scopes != nil {
				t.Fatalf("refused %q but returned %q", scope, scopes)
			}
			return
		}
		if len(scopes) > broker.MaxScopes {
			t.Fatalf("%d scopes", len(scopes))
		}
		seen := map[string]bool{}
		for _, s := range scopes {
			if !broker.ValidScope(s) || seen[s] || !strings.Contains(" "+scope+" ", " "+s+" ") {
				t.Fatalf("ParseScopes(%q) kept %q", scope, s)
			}
			seen[s] = true
		}
	})
}
