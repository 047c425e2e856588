package api_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
)

// workspaceStack is a stack that takes webhook deliveries and seals, with
// a GitHub stand-in holding the repositories of the testdata payloads.
type workspaceStack struct {
	*stack
	gh   *githubtest.Server
	logs *syncBuffer
}

func newWorkspaceStack(t *testing.T) *workspaceStack {
	t.Helper()
	st, db := roleStore(t)
	led := ledger.New(st, time.Now)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, Logger: log,
		GitHubWebhookSecret: webhookSecret, Sealer: localSealer(t), Egress: testenv.Loopback})))
	t.Cleanup(srv.Close)
	return &workspaceStack{stack: &stack{t: t, url: srv.URL, st: st, db: db, led: led}, gh: githubtest.New(t), logs: logs}
}

// pullRequestRun delivers payload name with its head commit replaced by
// sha and returns the run and its session token.
func (s *workspaceStack) pullRequestRun(name, oldSHA, sha, id string) (run, token string) {
	s.t.Helper()
	body := bytes.ReplaceAll(payload(s.t, name), []byte(oldSHA), []byte(sha))
	r := s.deliver(signed(id, body))
	if r.status != http.StatusCreated {
		s.t.Fatalf("delivery = %d %s, want 201", r.status, r.raw)
	}
	run = r.body["session_id"].(string)
	return run, s.must(200, "POST", "/v1/sessions/"+run+"/token", adminToken, nil)["token"].(string)
}

func (s *workspaceStack) setApp() {
	s.t.Helper()
	r := s.do("PUT", "/v1/github-app", adminToken, map[string]any{
		"app_id": githubtest.AppID, "private_key": string(s.gh.PrivateKey), "api_url": s.gh.API, "git_url": s.gh.Git})
	if r.status != http.StatusOK {
		s.t.Fatalf("PUT /v1/github-app = %d %s", r.status, r.raw)
	}
	if bytes.Contains(r.raw, []byte("PRIVATE KEY")) {
		s.t.Errorf("PUT /v1/github-app answers the key: %s", r.raw)
	}
}

// tarFiles unpacks a gzip'd tar into name -> contents (links as "-> target").
func tarFiles(t *testing.T, gz []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("workspace is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("workspace tar: %v", err)
		}
		b, _ := io.ReadAll(tr)
		if h.Typeflag == tar.TypeSymlink {
			b = []byte("-> " + h.Linkname)
		}
		out[h.Name] = string(b)
	}
}

func (s *workspaceStack) fetch(run, token string) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.url+"/v1/sessions/"+run+"/workspace", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestWorkspaceFromPullRequest: a pull request's run gets the archive of
// the commit its signed delivery named, fetched with an installation token
// minted for that repository and contents: read only; the ledger records
// the fetch with the archive's digest; no GitHub credential reaches the
// answer, the ledger or a log line.
func TestWorkspaceFromPullRequest(t *testing.T) {
	t.Parallel()
	s := newWorkspaceStack(t)
	const repo = "Codertocat/Hello-World"
	s.trigger(repo, nil)
	s.gh.Install(repo, 11)
	s.gh.Install("Codertocat/other", 11)
	sha := s.gh.Commit(repo, "refs/pull/2/head", map[string]githubtest.File{
		"README.md":             {Content: "hello\n"},
		".claude/settings.json": {Content: `{"disableAllHooks":true}`},
		"run.sh":                {Content: "#!/bin/sh\n", Executable: true},
		"link":                  {Content: "README.md", Symlink: true},
	})
	// The branch moves on after the delivery: the run still reviews sha.
	s.gh.Commit(repo, "refs/pull/2/head", map[string]githubtest.File{"README.md": {Content: "later\n"}})
	run, token := s.pullRequestRun("same_repo.opened.json", "ec26c3e57ca3a959ca5aad62de7213c562f8c821", sha, "d-ws-1")

	if r := s.do("GET", "/v1/sessions/"+run+"/workspace", token, nil); r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.raw), "PUT /v1/github-app") {
		t.Errorf("workspace before the App is set = %d %s, want 503 naming PUT /v1/github-app", r.status, r.raw)
	}
	s.setApp()
	if got := s.must(200, "GET", "/v1/github-app", adminToken, nil); got["app_id"] != float64(githubtest.AppID) || got["generation"] != float64(1) || got["private_key"] != nil {
		t.Errorf("GET /v1/github-app = %v, want app_id %d, generation 1, no key", got, githubtest.AppID)
	}

	resp := s.fetch(run, token)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/gzip" || resp.Header.Get("X-Fluidbox-Commit") != sha {
		t.Fatalf("workspace = %d %q commit %q, want 200 application/gzip commit %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Fluidbox-Commit"), sha, body)
	}
	want := map[string]string{"README.md": "hello\n", ".claude/settings.json": `{"disableAllHooks":true}`, "run.sh": "#!/bin/sh\n", "link": "-> README.md"}
	if diff := cmp.Diff(want, tarFiles(t, body)); diff != "" {
		t.Errorf("workspace files (-want +got):\n%s", diff)
	}

	checkMinted(t, s, repo)
	checkFetchRecorded(t, s, run, repo, sha, body)
	checkWhoMayFetch(t, s, run, token)
}

// checkMinted: every installation token was minted for repo alone, to
// read its contents, and only repo was fetched.
func checkMinted(t *testing.T, s *workspaceStack, repo string) {
	t.Helper()
	grants := s.gh.Grants()
	if len(grants) == 0 {
		t.Fatal("no installation token was minted")
	}
	for _, g := range grants {
		if diff := cmp.Diff(githubtest.Grant{Installation: 11, Repositories: []string{repo}, Permissions: map[string]string{"contents": "read"}}, g); diff != "" {
			t.Errorf("minted token's grant (-want +got):\n%s", diff)
		}
	}
	if got := s.gh.Fetches(); !cmp.Equal(got, []string{repo}) {
		t.Errorf("repositories fetched = %v, want [%s]", got, repo)
	}
}

// checkFetchRecorded: the ledger records the fetch of body with its
// digest; no installation token reaches the ledger, the logs or the
// archive, nor the App's key the logs.
func checkFetchRecorded(t *testing.T, s *workspaceStack, run, repo, sha string, body []byte) {
	t.Helper()
	events := s.must(200, "GET", "/v1/sessions/"+run+"/events", adminToken, nil)["events"].([]any)
	var fetched map[string]any
	for _, e := range events {
		if ev := e.(map[string]any); ev["type"] == "workspace.fetched" {
			fetched = ev["data"].(map[string]any)
		}
	}
	wantEv := map[string]any{"repository": repo, "pull_request": float64(2), "commit": sha,
		"archive_digest": redact.DigestBytes(body).String(), "archive_bytes": float64(len(body)), "files": float64(4)}
	if diff := cmp.Diff(wantEv, fetched); diff != "" {
		t.Errorf("workspace.fetched (-want +got):\n%s", diff)
	}
	ledgerJSON, _ := json.Marshal(events)
	for _, tok := range s.gh.Tokens() {
		for where, text := range map[string]string{"ledger": string(ledgerJSON), "logs": s.logs.String(), "archive": string(body)} {
			if strings.Contains(text, tok) {
				t.Errorf("the installation token reached the %s", where)
			}
		}
	}
	if strings.Contains(s.logs.String(), "PRIVATE KEY") {
		t.Errorf("the App's key reached the logs")
	}
}

// checkWhoMayFetch: the run's session token and the operator, no one
// else; a commit the host lacks is 503, a manual run's workspace 404, an
// ended run's 409.
func checkWhoMayFetch(t *testing.T, s *workspaceStack, run, token string) {
	t.Helper()
	other, otherToken := s.pullRequestRun("same_repo.opened.json", "ec26c3e57ca3a959ca5aad62de7213c562f8c821", strings.Repeat("0", 40), "d-ws-2")
	if r := s.do("GET", "/v1/sessions/"+run+"/workspace", otherToken, nil); r.status != http.StatusForbidden {
		t.Errorf("workspace with another run's token = %d %s, want 403", r.status, r.raw)
	}
	if r := s.do("GET", "/v1/sessions/"+other+"/workspace", otherToken, nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("workspace of a commit the host lacks = %d %s, want 503", r.status, r.raw)
	}
	if r := s.do("GET", "/v1/sessions/"+run+"/workspace", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("workspace with no token = %d, want 401", r.status)
	}
	manual, manualToken := s.session(map[string]any{"policy_id": s.policy(basicPolicy), "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}})
	if r := s.do("GET", "/v1/sessions/"+manual+"/workspace", manualToken, nil); r.status != http.StatusNotFound {
		t.Errorf("workspace of a manual run = %d %s, want 404", r.status, r.raw)
	}
	s.must(200, "POST", "/v1/sessions/"+run+"/end", adminToken, nil)
	if r := s.do("GET", "/v1/sessions/"+run+"/workspace", token, nil); r.status != http.StatusConflict {
		t.Errorf("workspace of an ended run = %d %s, want 409", r.status, r.raw)
	}
}

// TestWorkspaceFromFork: a fork's run is read_only and gets the fork's
// head, fetched from the base repository (where GitHub keeps every pull
// request's head), never from the fork, with a token for the base only.
func TestWorkspaceFromFork(t *testing.T) {
	t.Parallel()
	s := newWorkspaceStack(t)
	const base = "KaTeX/KaTeX"
	s.trigger(base, nil)
	s.gh.Install(base, 21)
	s.setApp()
	sha := s.gh.Commit(base, "refs/pull/2388/head", map[string]githubtest.File{"fork.txt": {Content: "from the fork\n"}})
	body := bytes.ReplaceAll(payload(t, "fork.opened.json"), []byte("3ae9c36f8a03c1bd7e352bc683f72943dc92422e"), []byte(sha))
	r := s.deliver(signed("d-fork-1", body))
	if r.status != http.StatusCreated || r.body["trust_tier"] != "read_only" {
		t.Fatalf("fork delivery = %d %s, want 201 read_only", r.status, r.raw)
	}
	run := r.body["session_id"].(string)
	token := s.must(200, "POST", "/v1/sessions/"+run+"/token", adminToken, nil)["token"].(string)
	resp := s.fetch(run, token)
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Fluidbox-Commit") != sha {
		t.Fatalf("fork workspace = %d commit %q: %s", resp.StatusCode, resp.Header.Get("X-Fluidbox-Commit"), got)
	}
	if diff := cmp.Diff(map[string]string{"fork.txt": "from the fork\n"}, tarFiles(t, got)); diff != "" {
		t.Errorf("fork workspace (-want +got):\n%s", diff)
	}
	if f := s.gh.Fetches(); !cmp.Equal(f, []string{base}) {
		t.Errorf("repositories fetched = %v, want only the base %s", f, base)
	}
	for _, g := range s.gh.Grants() {
		if !cmp.Equal(g.Repositories, []string{base}) {
			t.Errorf("a token was minted for %v, want only %s", g.Repositories, base)
		}
	}
	if tier := s.must(200, "GET", "/v1/sessions/"+run, token, nil)["trust_tier"]; tier != "read_only" {
		t.Errorf("fork run's tier after the fetch = %v, want read_only", tier)
	}
}
