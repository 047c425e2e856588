package egress

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// FuzzCheckURL: whatever a member sends as a URL, what the strict guard
// accepts is https, and a literal host it accepts is not internal; what the
// dev guard accepts over http names a loopback host.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://mcp.example.com/mcp", "http://127.0.0.1:8080/mcp", "https://[::ffff:169.254.169.254]/",
		"https://[fe80::1%25eth0]/", "https://0x7f.1/", "https://2130706433/", "http://localhost./",
		"https://[64:ff9b::a9fe:a9fe]/", "https://[2002:a9fe:a9fe::]/", "HTTP://LOCALHOST/", "https://[::7f00:1]/",
	} {
		f.Add(s)
	}
	strict, dev := New(nil), New(Loopback)
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		if strict.CheckURL(u) == nil {
			if u.Scheme != "https" {
				t.Fatalf("strict accepted scheme %q of %q", u.Scheme, raw)
			}
			if a, err := netip.ParseAddr(host); err == nil && internal(a.WithZone("")) != "" {
				t.Fatalf("strict accepted internal literal %q", raw)
			}
			if host == "localhost" || strings.HasSuffix(host, ".localhost") {
				t.Fatalf("strict accepted loopback name %q", raw)
			}
		}
		if dev.CheckURL(u) == nil && u.Scheme == "http" {
			a, err := netip.ParseAddr(host)
			if !(host == "localhost" || strings.HasSuffix(host, ".localhost") || (err == nil && a.Unmap().IsLoopback())) {
				t.Fatalf("dev accepted http to a non-loopback host %q", raw)
			}
		}
	})
}
