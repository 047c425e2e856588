package config_test

import (
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/config"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadSSO(t *testing.T) {
	t.Parallel()
	base := func(extra map[string]string) map[string]string {
		m := map[string]string{"FLUIDBOX_TABLE": "fluidbox", "FLUIDBOX_ADMIN_TOKEN": "0123456789abcdef0123"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		c, err := config.Load(env(base(map[string]string{"FLUIDBOX_OIDC_ISSUER": "https://idp.example.com"})), config.Lambda)
		if err != nil || c.RequireSSO || c.OIDCIssuer != "" {
			t.Fatalf("Load without FLUIDBOX_REQUIRE_SSO = %+v, %v; want SSO off and OIDC unread", c, err)
		}
	})
	t.Run("on", func(t *testing.T) {
		t.Parallel()
		c, err := config.Load(env(base(map[string]string{
			"FLUIDBOX_REQUIRE_SSO": "true", "FLUIDBOX_OIDC_ISSUER": "https://idp.example.com", "FLUIDBOX_OIDC_AUDIENCE": "fluidbox",
		})), config.Lambda)
		if err != nil || !c.RequireSSO || c.OIDCIssuer != "https://idp.example.com" || c.OIDCAudience != "fluidbox" || c.OIDCRolesClaim != "fluidbox_roles" {
			t.Fatalf("Load = %+v, %v; want SSO on with the default roles claim", c, err)
		}
	})
	t.Run("roles claim", func(t *testing.T) {
		t.Parallel()
		c, err := config.Load(env(base(map[string]string{
			"FLUIDBOX_REQUIRE_SSO": "true", "FLUIDBOX_OIDC_ISSUER": "http://127.0.0.1:9000", "FLUIDBOX_OIDC_AUDIENCE": "fluidbox", "FLUIDBOX_OIDC_ROLES_CLAIM": "groups",
		})), config.Dev)
		if err != nil || c.OIDCRolesClaim != "groups" {
			t.Fatalf("Load = %+v, %v; want roles claim groups (and http allowed in dev)", c, err)
		}
	})
	problems := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"every missing variable at once", map[string]string{"FLUIDBOX_REQUIRE_SSO": "true", "FLUIDBOX_TABLE": "", "FLUIDBOX_ADMIN_TOKEN": ""},
			[]string{"FLUIDBOX_OIDC_ISSUER", "FLUIDBOX_OIDC_AUDIENCE", "FLUIDBOX_TABLE", "FLUIDBOX_ADMIN_TOKEN"}},
		{"not a boolean", map[string]string{"FLUIDBOX_REQUIRE_SSO": "yes please"}, []string{"FLUIDBOX_REQUIRE_SSO"}},
		{"http issuer outside dev", map[string]string{"FLUIDBOX_REQUIRE_SSO": "true", "FLUIDBOX_OIDC_ISSUER": "http://idp.example.com", "FLUIDBOX_OIDC_AUDIENCE": "a"}, []string{"FLUIDBOX_OIDC_ISSUER"}},
		{"issuer not a URL", map[string]string{"FLUIDBOX_REQUIRE_SSO": "true", "FLUIDBOX_OIDC_ISSUER": "idp", "FLUIDBOX_OIDC_AUDIENCE": "a"}, []string{"FLUIDBOX_OIDC_ISSUER"}},
	}
	for _, c := range problems {
		_, err := config.Load(env(base(c.env)), config.Lambda)
		if err == nil {
			t.Errorf("%s: Load = nil error, want one naming %v", c.name, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Load error %q does not name %s", c.name, err, w)
			}
		}
	}
}

func TestSlackVariables(t *testing.T) {
	t.Parallel()
	base := map[string]string{"FLUIDBOX_TABLE": "t", "FLUIDBOX_ADMIN_TOKEN": "0123456789abcdef0123"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	all := map[string]string{"FLUIDBOX_SLACK_BOT_TOKEN": "xoxb-1", "FLUIDBOX_SLACK_SIGNING_SECRET": "s", "FLUIDBOX_SLACK_CHANNEL": "C1"}
	cases := []struct {
		name string
		env  map[string]string
		mode config.Mode
		ok   bool
	}{
		{"none", base, config.Lambda, true},
		{"all", with(all), config.Lambda, true},
		{"token only", with(map[string]string{"FLUIDBOX_SLACK_BOT_TOKEN": "xoxb-1"}), config.Lambda, false},
		{"http API URL in Lambda", with(map[string]string{"FLUIDBOX_SLACK_API_URL": "http://127.0.0.1:9/api/"}), config.Lambda, false},
		{"loopback API URL in dev", with(map[string]string{"FLUIDBOX_SLACK_API_URL": "http://127.0.0.1:9/api/"}), config.Dev, true},
		{"http elsewhere in dev", with(map[string]string{"FLUIDBOX_SLACK_API_URL": "http://slack.example/api/"}), config.Dev, false},
		{"slack function without a channel", with(map[string]string{"FLUIDBOX_SLACK_BOT_TOKEN": "xoxb-1"}), config.Slack, false},
		{"slack function", with(map[string]string{"FLUIDBOX_SLACK_BOT_TOKEN": "xoxb-1", "FLUIDBOX_SLACK_CHANNEL": "C1"}), config.Slack, true},
	}
	for _, c := range cases {
		_, err := config.Load(env(c.env), c.mode)
		if (err == nil) != c.ok {
			t.Errorf("Load(%s) = %v, want ok %v", c.name, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "xoxb-1") {
			t.Errorf("Load(%s) error %v names the token", c.name, err)
		}
	}
}
