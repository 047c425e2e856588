package broker

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/redact"
)

// FuzzLinkOf: whatever an upstream sends as a link, what linkOf lets
// through is an absolute http or https URL with a host, the ledger's link
// carries no user info, query or fragment (and redact keeps it as it is),
// and the person's link is the ledger's with at most a query added.
func FuzzLinkOf(f *testing.F) {
	for _, s := range []string{
		"https://auth.example.com/consent?state=x#frag",
		"http://user:pw@auth.example.com/c",
		"javascript:alert(1)",
		"https://auth.example.com/%zz",
		"https://[::1]:8443/a?b=c",
		"HTTPS://Example.COM/a/../b?x",
		"https:/relative",
		"data:text/html,x",
		"https://a.example.com/\u202e?x=1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		link, full, ok := linkOf(raw)
		if !ok {
			if link != "" || full != "" {
				t.Fatalf("linkOf(%q) refused but returned %q, %q", raw, link, full)
			}
			return
		}
		u, err := url.Parse(link)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
			t.Fatalf("linkOf(%q) = link %q, not a plain http(s) link", raw, link)
		}
		if !strings.HasPrefix(full, link) || strings.Contains(full[len(link):], "#") || (len(full) > len(link) && full[len(link)] != '?') {
			t.Fatalf("linkOf(%q) = full %q, want link %q with at most a query", raw, full, link)
		}
		env, err := redact.New(redact.InputRequested{InputRequestID: "inp_x", Link: link})
		if err != nil || !strings.Contains(string(env.Data()), `"link":`) {
			t.Fatalf("input.requested with link %q: %s, %v", link, env.Data(), err)
		}
		var back struct {
			Link string `json:"link"`
		}
		if err := json.Unmarshal(env.Data(), &back); err != nil || back.Link != link {
			t.Fatalf("the ledger keeps link %q as %q (%v)", link, back.Link, err)
		}
	})
}
