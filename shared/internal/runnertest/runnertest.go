// Package runnertest is a control plane on 127.0.0.1 for the runner's and
// the launchers' tests: the whole API over the store (IAM roles enforced),
// a local sealer, a GitHub stand-in (githubtest) holding repository
// acme/app with the App installed, and a trigger for it.
package runnertest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/githubapp"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Fixed credentials of the plane.
const (
	AdminToken    = "test-admin-token-0123456789abcdef"
	WebhookSecret = "test-webhook-secret-0123456789"
	// Repository is the repository its trigger is for.
	Repository = "acme/app"
	// Nobody is the unprivileged user agents run as.
	Nobody = 65534
)

// Plane is the control plane.
type Plane struct {
	t *testing.T
	// URL is its base URL; Addr its host:port.
	URL, Addr string
	Store     *store.Store
	Runs      *run.Service
	// Apps is its GitHub App; Reports reports its runs with it.
	Apps    *githubapp.Apps
	Reports *report.Service
	GitHub  *githubtest.Server
}

// DenyAll is a policy that denies every call.
const DenyAll = `{"name":"deny-all","default_verdict":"deny","rules":[]}`

// New starts a plane whose trigger for Repository runs under policy (a
// document) and has the given extra fields (prompt, timeout_seconds, ...).
func New(t *testing.T, policy string, trigger map[string]any) *Plane {
	t.Helper()
	st, db := testenv.StoreOn(t, roles.Client)
	roles.Enforce(t, db, st.Table())
	led := ledger.New(st, time.Now)
	sealer, err := seal.NewLocal(filepath.Join(t.TempDir(), "seal.key"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: AdminToken, Ledger: led, Logger: slog.New(slog.DiscardHandler),
		GitHubWebhookSecret: WebhookSecret, Sealer: sealer, Egress: testenv.Loopback})))
	t.Cleanup(srv.Close)
	apps := githubapp.New(st, sealer, testenv.Loopback, time.Now)
	p := &Plane{t: t, URL: srv.URL, Addr: strings.TrimPrefix(srv.URL, "http://"), Store: st, Runs: run.NewService(led, time.Now),
		Apps: apps, Reports: report.New(led, apps, time.Now), GitHub: githubtest.New(t)}
	p.Must(200, "PUT", "/v1/github-app", map[string]any{"app_id": githubtest.AppID, "private_key": string(p.GitHub.PrivateKey), "api_url": p.GitHub.API, "git_url": p.GitHub.Git})
	pol := p.Must(201, "POST", "/v1/policies", json.RawMessage(policy))["id"]
	body := map[string]any{"repository": Repository, "policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
	for k, v := range trigger {
		body[k] = v
	}
	p.Must(201, "POST", "/v1/triggers", body)
	p.GitHub.Install(Repository, 5)
	return p
}

// Do calls the API with token.
func (p *Plane) Do(method, path, token string, body any) (int, []byte) {
	p.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.URL+path, r)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// Must calls the API as the operator and fails unless the status is want.
func (p *Plane) Must(want int, method, path string, body any) map[string]any {
	p.t.Helper()
	st, b := p.Do(method, path, AdminToken, body)
	if st != want {
		p.t.Fatalf("%s %s = %d %s, want %d", method, path, st, b, want)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// Deliver commits files as pull request 1's head and delivers the signed
// pull_request event; it returns the run's head.
func (p *Plane) Deliver(files map[string]githubtest.File) store.Head {
	p.t.Helper()
	sha := p.GitHub.Commit(Repository, "refs/pull/1/head", files)
	repo := map[string]any{"id": 100, "full_name": Repository, "fork": false}
	body, _ := json.Marshal(map[string]any{
		"action": "opened", "number": 1, "repository": repo,
		"pull_request": map[string]any{"number": 1, "head": map[string]any{"sha": sha, "repo": repo}, "base": map[string]any{"repo": repo}},
	})
	req, _ := http.NewRequest("POST", p.URL+"/v1/triggers/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "d-"+sha[:12])
	req.Header.Set("X-Hub-Signature-256", githubtest.Sign(WebhookSecret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusCreated {
		p.t.Fatalf("delivery = %d %v", resp.StatusCode, out)
	}
	h, err := p.Store.GetHead(context.Background(), out["session_id"].(string))
	if err != nil {
		p.t.Fatal(err)
	}
	return h
}

// Launch delivers files and launches the run as a launcher would: its id
// and launch credential.
func (p *Plane) Launch(files map[string]githubtest.File) (string, auth.Token) {
	p.t.Helper()
	h := p.Deliver(files)
	cred, err := p.Runs.Launch(context.Background(), h.RunID, "test", "test")
	if err != nil {
		p.t.Fatal(err)
	}
	return h.RunID, cred
}

// EventTypes is the run's ledger, as types.
func (p *Plane) EventTypes(id string) ([]string, map[string]map[string]any) {
	p.t.Helper()
	var types []string
	data := map[string]map[string]any{}
	for _, e := range p.Must(200, "GET", "/v1/sessions/"+id+"/events", nil)["events"].([]any) {
		ev := e.(map[string]any)
		types = append(types, ev["type"].(string))
		data[ev["type"].(string)] = ev["data"].(map[string]any)
	}
	return types, data
}

// Sandbox is a directory the agent's user can reach (t.TempDir is 0700).
func Sandbox(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Build builds a package of this module into dir/name.
func Build(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin", name)
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// NeedRoot skips unless the test runs as root: running the agent as
// another user, and namespaces, need it (the runner runs as root in its
// sandbox: the image, the local launcher).
func NeedRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent runs as another user")
	}
}
