package config_test

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/config"
)

// TestPublicURL: FLUIDBOX_PUBLIC_URL, the base of the OAuth redirect URI,
// is https (http to loopback in dev only) without credentials, query or
// fragment, its trailing slash dropped; anything else is reported.
func TestPublicURL(t *testing.T) {
	t.Parallel()
	load := func(v string, mode config.Mode) (config.Config, error) {
		env := map[string]string{"FLUIDBOX_TABLE": "t", "FLUIDBOX_ADMIN_TOKEN": "0123456789abcdef0123", "FLUIDBOX_PUBLIC_URL": v}
		return config.Load(func(k string) string { return env[k] }, mode)
	}
	for v, want := range map[string]string{
		"https://fluidbox.example.com":      "https://fluidbox.example.com",
		"https://fluidbox.example.com/api/": "https://fluidbox.example.com/api",
	} {
		if c, err := load(v, config.Lambda); err != nil || c.PublicURL != want {
			t.Errorf("%q = %q, %v; want %q", v, c.PublicURL, err, want)
		}
	}
	if c, err := load("http://127.0.0.1:8080", config.Dev); err != nil || c.PublicURL != "http://127.0.0.1:8080" {
		t.Errorf("dev loopback http = %q, %v", c.PublicURL, err)
	}
	for _, bad := range []string{"http://127.0.0.1:8080", "http://fluidbox.example.com", "https://u:p@fluidbox.example.com",
		"https://fluidbox.example.com/?a=b", "https://fluidbox.example.com/#x", "fluidbox.example.com", "https://", "javascript:alert(1)"} {
		if _, err := load(bad, config.Lambda); err == nil {
			t.Errorf("%q accepted in Lambda", bad)
		}
	}
}
