package api_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/oauthtest"
)

// TestOAuthCallbackRepeatedParameters: an authorization response naming a
// parameter twice (RFC 6749 3.1: never more than once) is refused, whatever
// the values. A lenient authorization server that lets a redirect_uri carry
// extra parameters would append its own iss after one an attacker put
// first; reading the first would check the attacker's issuer, not the
// server's (a mix-up RFC 9207 is there to stop). A state is not spent by a
// refused response, and the clean response then completes.
func TestOAuthCallbackRepeatedParameters(t *testing.T) {
	t.Parallel()
	s := newBrokerStack(t, localSealer(t), 0)
	p := oauthtest.NewProvider(t, s.url+"/v1/oauth/callback")
	up := oauthtest.NewServer(t, p)
	con := s.want(201, "POST", "/v1/connections", adminToken, map[string]any{
		"name": "linear", "url": up.URL, "kind": "shared",
		"credential": oauthCred(p),
	})["id"].(string)
	back := s.authorizeAs(p, con, adminToken, p.User1())
	q := back.Query()
	for _, name := range []string{"iss", "code", "state", "error"} {
		// The response's own value first, another after it.
		first := q.Get(name)
		switch {
		case first != "":
		case name == "iss":
			first = p.Issuer // what a lenient server's own iss would be
		default:
			first = "access_denied"
		}
		raw := url.Values{}
		for k, vs := range q {
			if k != name {
				raw[k] = vs
			}
		}
		bad := *back
		bad.RawQuery = name + "=" + url.QueryEscape(first) + "&" + raw.Encode() + "&" + name + "=" + url.QueryEscape("http://127.0.0.1:9/other")
		if code, page := s.browse(bad.String()); code != 400 || !strings.Contains(page, "Not connected") {
			t.Errorf("%s twice = %d %q, want 400", name, code, page)
		}
		if got := s.want(200, "GET", "/v1/connections/"+con, adminToken, nil); got["status"] != "authorization_required" {
			t.Fatalf("after a response with %s twice: %v", name, got)
		}
	}
	if code, page := s.browse(back.String()); code != 200 || !strings.Contains(page, "Connected") {
		t.Errorf("the clean response = %d %q, want 200", code, page)
	}
}
