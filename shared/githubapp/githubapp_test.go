package githubapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/githubapp"
	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/seal"
)

func apps(t *testing.T, guard *egress.Guard) *githubapp.Apps {
	t.Helper()
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	return githubapp.New(testenv.Store(t), sealer, guard, time.Now)
}

// TestSetRefuses: a setting with a bad id, a key that is not an RSA PEM,
// or a host the guard refuses is refused, naming the field and never
// quoting the key.
func TestSetRefuses(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	a := apps(t, testenv.Loopback)
	strict := apps(t, egress.New(nil))
	key := gh.PrivateKey
	for _, tc := range []struct {
		name  string
		a     *githubapp.Apps
		in    githubapp.Setting
		field string
	}{
		{"no id", a, githubapp.Setting{PrivateKey: key, APIURL: gh.API, GitURL: gh.Git}, "app_id"},
		{"not a key", a, githubapp.Setting{AppID: 1, PrivateKey: []byte("-----BEGIN RSA PRIVATE KEY-----\nsecret-canary\n-----END RSA PRIVATE KEY-----\n"), APIURL: gh.API, GitURL: gh.Git}, "private_key"},
		{"too large", a, githubapp.Setting{AppID: 1, PrivateKey: []byte(strings.Repeat("k", seal.MaxPlaintext+1)), APIURL: gh.API, GitURL: gh.Git}, "private_key"},
		{"ftp", a, githubapp.Setting{AppID: 1, PrivateKey: key, APIURL: "ftp://127.0.0.1/", GitURL: gh.Git}, "api_url"},
		{"user info", a, githubapp.Setting{AppID: 1, PrivateKey: key, APIURL: gh.API, GitURL: "http://u:p@127.0.0.1/"}, "git_url"},
		{"loopback refused", strict, githubapp.Setting{AppID: 1, PrivateKey: key, APIURL: gh.API, GitURL: gh.Git}, "api_url"},
	} {
		_, err := tc.a.Set(context.Background(), tc.in, "admin")
		var inv *githubapp.InvalidError
		if !errors.As(err, &inv) || !strings.HasPrefix(inv.Message, tc.field) || strings.Contains(inv.Message, "secret-canary") {
			t.Errorf("Set(%s) = %v, want an InvalidError on %s that does not quote the key", tc.name, err, tc.field)
		}
	}
	if _, err := a.Get(context.Background()); !errors.Is(err, githubapp.ErrNoApp) {
		t.Errorf("Get after refusals = %v, want ErrNoApp", err)
	}
}

// TestInstallation: a token is minted for the one repository and
// permission asked; a repository the App is not installed on is
// ErrNotInstalled; the token never prints.
func TestInstallation(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.Install("acme/app", 3)
	a := apps(t, testenv.Loopback)
	if _, err := a.Installation(context.Background(), "acme/app", githubapp.ReadContents); !errors.Is(err, githubapp.ErrNoApp) {
		t.Errorf("Installation before Set = %v, want ErrNoApp", err)
	}
	info, err := a.Set(context.Background(), githubapp.Setting{AppID: githubtest.AppID, PrivateKey: gh.PrivateKey, APIURL: gh.API + "/", GitURL: gh.Git}, "admin")
	if err != nil || info.Generation != 1 || info.APIURL != gh.API {
		t.Fatalf("Set = %+v, %v", info, err)
	}
	inst, err := a.Installation(context.Background(), "acme/app", githubapp.WriteChecks)
	if err != nil {
		t.Fatalf("Installation: %v", err)
	}
	grants := gh.Grants()
	if len(grants) != 1 || fmt.Sprint(grants[0].Repositories, grants[0].Permissions) != "[acme/app] map[checks:write]" {
		t.Errorf("grants = %+v, want acme/app with checks: write only", grants)
	}
	tok := inst.Token.Reveal()
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "token", inst.Token)
	js, _ := json.Marshal(inst)
	for what, s := range map[string]string{"String": inst.Token.String(), "%v": fmt.Sprintf("%v %+v %#v", inst.Token, inst, inst.Token), "log": logged.String(), "json": string(js)} {
		if strings.Contains(s, tok) {
			t.Errorf("the token shows in %s: %s", what, s)
		}
	}
	if _, err := a.Installation(context.Background(), "acme/other", githubapp.ReadContents); !errors.Is(err, githubapp.ErrNotInstalled) {
		t.Errorf("Installation on a repository without the App = %v, want ErrNotInstalled", err)
	}
}
