package oauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fluidbox/fluidbox/shared/broker"
	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
	"github.com/fluidbox/fluidbox/shared/oauth"
)

// TestDiscoverIgnoresOversizedChallenge: the probe's WWW-Authenticate is
// the MCP server's to make as large as its transport lets it (megabytes),
// and the SDK's parser is quadratic in its commas. Like the broker's, the
// probe reads a challenge only within broker.MaxChallengeBytes: past that
// it is not parsed, and its resource_metadata is not followed (the
// well-known URLs remain; here there are none, so discovery fails).
func TestDiscoverIgnoresOversizedChallenge(t *testing.T) {
	t.Parallel()
	p := oauthtest.NewProvider(t, redirect)
	up := oauthtest.NewServer(t, p)
	prm := strings.TrimSuffix(up.URL, "/mcp") + "/.well-known/oauth-protected-resource/mcp"
	var pad atomic.Value
	pad.Store("")
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+prm+`"`+pad.Load().(string))
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(front.Close)
	up.SetResource(front.URL + "/mcp")

	// Within the bound, the challenge leads to the metadata.
	ctx := context.Background()
	if _, err := oauth.Discover(ctx, loopbackClient(), front.URL+"/mcp", nil); err != nil {
		t.Fatalf("Discover through a small challenge: %v", err)
	}
	// Over it, the challenge is not read.
	pad.Store(`, error_description="` + strings.Repeat(",", broker.MaxChallengeBytes) + `"`)
	if _, err := oauth.Discover(ctx, loopbackClient(), front.URL+"/mcp", nil); !errors.Is(err, oauth.ErrDiscovery) {
		t.Fatalf("Discover through an oversized challenge = %v, want ErrDiscovery", err)
	}
}
