// Package githubtest runs, on 127.0.0.1 and in process, a stand-in for the
// parts of GitHub a GitHub App uses: the REST API's installation lookup and
// installation-token minting (checking the App's RS256 JWT as GitHub does),
// and git's smart-HTTP protocol, served by the real `git http-backend`
// through net/http/cgi over bare repositories built with the git CLI. The
// git side takes only tokens the API side minted, for the repositories and
// permissions they were minted for, so a test sees exactly which credential
// reached which host.
package githubtest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// AppID is the stand-in App's id; AppSlug its slug, whose bot user
// (AppSlug + "[bot]") writes what the App posts.
const (
	AppID   = 4242
	AppSlug = "fluidbox-test"
)

// Grant is what a minted installation token may do.
type Grant struct {
	Installation int64
	Repositories []string
	Permissions  map[string]string
}

// Server is the stand-in. API is the REST base URL, Git the git host's.
type Server struct {
	API, Git string
	// PrivateKey is the App's key in PEM, as GitHub downloads it.
	PrivateKey []byte

	t     *testing.T
	root  string
	key   *rsa.PrivateKey
	mu    sync.Mutex
	inst  map[string]int64 // "owner/name" -> installation id
	mint  map[string]Grant // token -> grant
	fetch []string         // repositories fetched, in order
	posts []Post
	fail  int // posts still to answer 502
	// planted and plantedComments were not posted through the stand-in.
	planted         []plantedRun
	plantedComments []plantedComment
}

// Post is a check run or a comment a token posted.
type Post struct {
	Kind       string // check_run or comment
	Repository string
	Number     string // the pull request of a comment
	Body       map[string]any
}

// Posts returns what was posted, in order.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.posts)
}

// FailPosts makes the next n posts fail with 502 Bad Gateway, as GitHub
// does when it is having a bad day.
func (s *Server) FailPosts(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = n
}

// post accepts a POST from a token minted for the repository with perm:
// write, as GitHub checks an installation token.
func (s *Server) post(perm, kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		repo := r.PathValue("owner") + "/" + r.PathValue("repo")
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, `{"message":"Problems parsing JSON"}`, http.StatusBadRequest)
			return
		}
		g, minted := s.grantOf(r)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !minted || !slices.Contains(g.Repositories, repo) || g.Permissions[perm] != "write" {
			http.Error(w, `{"message":"Resource not accessible by integration"}`, http.StatusForbidden)
			return
		}
		if s.fail > 0 {
			s.fail--
			http.Error(w, `{"message":"Server Error"}`, http.StatusBadGateway)
			return
		}
		s.posts = append(s.posts, Post{Kind: kind, Repository: repo, Number: r.PathValue("number"), Body: body})
		writeJSON(w, http.StatusCreated, map[string]any{"id": 9000 + len(s.posts)})
	}
}

// checkRun is a check run as GET .../check-runs lists it.
type checkRun struct {
	ID         int64          `json:"id"`
	Name       string         `json:"name"`
	HeadSHA    string         `json:"head_sha"`
	ExternalID string         `json:"external_id"`
	App        map[string]any `json:"app"`
}

// PlantCheckRun adds a check run on repo's commit sha that the stand-in
// did not take from fluidbox: by App appID (AppID for this App's own),
// named name, with externalID. It is not among Posts.
func (s *Server) PlantCheckRun(repo, sha, name, externalID string, appID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.planted = append(s.planted, plantedRun{repo: repo, run: checkRun{ID: int64(8000 + len(s.planted)), Name: name, HeadSHA: sha, ExternalID: externalID, App: map[string]any{"id": appID}}})
}

type plantedRun struct {
	repo string
	run  checkRun
}

// comment is an issue comment as GET .../comments lists it.
type comment struct {
	ID   int64          `json:"id"`
	Body string         `json:"body"`
	User map[string]any `json:"user"`
}

type plantedComment struct {
	repo, number string
	c            comment
}

// PlantComment adds a comment on pull request number of repo that the
// stand-in did not take from fluidbox, by user login (of type Bot when it
// ends in "[bot]"). It is not among Posts.
func (s *Server) PlantComment(repo string, number int, login, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plantedComments = append(s.plantedComments, plantedComment{repo: repo, number: strconv.Itoa(number),
		c: comment{ID: int64(7000 + len(s.plantedComments)), Body: body, User: user(login)}})
}

func user(login string) map[string]any {
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	return map[string]any{"login": login, "type": typ}
}

// comments answers GET /repos/{owner}/{repo}/issues/{number}/comments to a
// token of the repository with pull_requests (read or write): the planted
// and posted comments, paged as checkRuns pages.
func (s *Server) comments(w http.ResponseWriter, r *http.Request) {
	repo, number := r.PathValue("owner")+"/"+r.PathValue("repo"), r.PathValue("number")
	g, minted := s.grantOf(r)
	if !minted || !slices.Contains(g.Repositories, repo) || (g.Permissions["pull_requests"] != "read" && g.Permissions["pull_requests"] != "write") {
		http.Error(w, `{"message":"Resource not accessible by integration"}`, http.StatusForbidden)
		return
	}
	s.mu.Lock()
	var all []comment
	for _, p := range s.plantedComments {
		if p.repo == repo && p.number == number {
			all = append(all, p.c)
		}
	}
	for i, p := range s.posts {
		if p.Kind == "comment" && p.Repository == repo && p.Number == number {
			body, _ := p.Body["body"].(string)
			all = append(all, comment{ID: int64(9001 + i), Body: body, User: user(AppSlug + "[bot]")})
		}
	}
	s.mu.Unlock()
	writePage(w, r, all)
}

// writePage answers one page of all, of per_page (default 30) items,
// with GitHub's Link header naming the next page: a bare array, or, when
// wrap names a key, the items under it beside total_count (as GitHub
// wraps check runs).
func writePage[T any](w http.ResponseWriter, r *http.Request, all []T, wrap ...string) {
	q := r.URL.Query()
	per, page := 30, 1
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 && n <= 100 {
		per = n
	}
	if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
		page = n
	}
	from, to := min((page-1)*per, len(all)), min(page*per, len(all))
	if to < len(all) {
		next := *r.URL
		q.Set("page", strconv.Itoa(page+1))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, next.RequestURI()))
	}
	if len(wrap) == 0 {
		writeJSON(w, http.StatusOK, all[from:to])
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(all), wrap[0]: all[from:to]})
}

// checkRuns answers GET /repos/{owner}/{repo}/commits/{ref}/check-runs to
// a token of the repository with checks (read or write): the check runs on
// that commit, planted and posted, filtered by check_name and app_id, a
// page at a time (writePage).
func (s *Server) checkRuns(w http.ResponseWriter, r *http.Request) {
	repo := r.PathValue("owner") + "/" + r.PathValue("repo")
	g, minted := s.grantOf(r)
	if !minted || !slices.Contains(g.Repositories, repo) || (g.Permissions["checks"] != "read" && g.Permissions["checks"] != "write") {
		http.Error(w, `{"message":"Resource not accessible by integration"}`, http.StatusForbidden)
		return
	}
	q := r.URL.Query()
	s.mu.Lock()
	var all []checkRun
	for _, p := range s.planted {
		if p.repo == repo && p.run.HeadSHA == r.PathValue("ref") {
			all = append(all, p.run)
		}
	}
	for i, p := range s.posts {
		if p.Kind == "check_run" && p.Repository == repo && p.Body["head_sha"] == r.PathValue("ref") {
			name, _ := p.Body["name"].(string)
			ext, _ := p.Body["external_id"].(string)
			all = append(all, checkRun{ID: int64(9001 + i), Name: name, HeadSHA: r.PathValue("ref"), ExternalID: ext, App: map[string]any{"id": AppID}})
		}
	}
	s.mu.Unlock()
	all = slices.DeleteFunc(all, func(c checkRun) bool {
		return q.Has("check_name") && c.Name != q.Get("check_name") || q.Has("app_id") && fmt.Sprint(c.App["id"]) != q.Get("app_id")
	})
	writePage(w, r, all, "check_runs")
}

// grantOf is the grant of the request's installation token. GitHub takes
// "token X" (what ghinstallation sends) and "Bearer X".
func (s *Server) grantOf(r *http.Request) (Grant, bool) {
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "token ")
	if !ok {
		tok, _ = strings.CutPrefix(auth, "Bearer ")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, minted := s.mint[tok]
	return g, minted
}

// New starts the stand-in; it stops when the test ends.
func New(t *testing.T) *Server {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, root: t.TempDir(), key: key, inst: map[string]int64{}, mint: map[string]Grant{},
		PrivateKey: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})}
	api := http.NewServeMux()
	api.HandleFunc("GET /repos/{owner}/{repo}/installation", s.installation)
	api.HandleFunc("POST /app/installations/{id}/access_tokens", s.accessToken)
	api.HandleFunc("POST /repos/{owner}/{repo}/check-runs", s.post("checks", "check_run"))
	api.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", s.checkRuns)
	api.HandleFunc("GET /repos/{owner}/{repo}/issues/{number}/comments", s.comments)
	api.HandleFunc("POST /repos/{owner}/{repo}/issues/{number}/comments", s.post("pull_requests", "comment"))
	api.HandleFunc("GET /repos/{owner}/{repo}", s.repository)
	api.HandleFunc("GET /repos/{owner}/{repo}/branches/{branch...}", s.branch)
	s.API = serve(t, api)
	s.Git = serve(t, http.HandlerFunc(s.git))
	return s
}

func serve(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("stand-in listens on %s, want loopback", srv.URL)
	}
	return srv.URL
}

// reader is the repository a GET names, if the request's token was minted
// for it with contents read or write ("" otherwise, answered 404 as
// GitHub answers a repository a token cannot see).
func (s *Server) reader(w http.ResponseWriter, r *http.Request) string {
	repo := r.PathValue("owner") + "/" + r.PathValue("repo")
	g, minted := s.grantOf(r)
	if !minted || !slices.Contains(g.Repositories, repo) || (g.Permissions["contents"] != "read" && g.Permissions["contents"] != "write") {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return ""
	}
	return repo
}

// repository answers GET /repos/{owner}/{repo}: its default branch is the
// bare repository's HEAD.
func (s *Server) repository(w http.ResponseWriter, r *http.Request) {
	repo := s.reader(w, r)
	if repo == "" {
		return
	}
	out, err := s.git1(repo, "symbolic-ref", "--short", "HEAD")
	if err != nil {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"full_name": repo, "default_branch": out})
}

// branch answers GET /repos/{owner}/{repo}/branches/{branch}.
func (s *Server) branch(w http.ResponseWriter, r *http.Request) {
	repo := s.reader(w, r)
	if repo == "" {
		return
	}
	name := r.PathValue("branch")
	sha, err := s.git1(repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+name+"^{commit}")
	if err != nil {
		http.Error(w, `{"message":"Branch not found"}`, http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "commit": map[string]any{"sha": sha}})
}

// git1 runs git in repo's bare repository and returns its one line.
func (s *Server) git1(repo string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = filepath.Join(s.root, repo+".git")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// Install installs the App on repo with installation id.
func (s *Server) Install(repo string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inst[repo] = id
}

// Uninstall removes the App from repo, as its owner may at any time.
func (s *Server) Uninstall(repo string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inst, repo)
}

// Grants returns every token minted so far.
func (s *Server) Grants() []Grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Grant
	for _, g := range s.mint {
		out = append(out, g)
	}
	return out
}

// Tokens returns every token minted so far.
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for tok := range s.mint {
		out = append(out, tok)
	}
	return out
}

// Fetches returns the repositories fetched with a good token, in order.
func (s *Server) Fetches() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fetch)
}

// File is one file of a commit.
type File struct {
	Content    string
	Executable bool
	// Symlink makes the file a symbolic link to Content.
	Symlink bool
}

// Commit commits files (the whole tree) onto ref of repo's bare
// repository, creating it, and returns the commit id.
func (s *Server) Commit(repo, ref string, files map[string]File) string {
	s.t.Helper()
	bare := filepath.Join(s.root, repo+".git")
	if _, err := os.Stat(bare); err != nil {
		s.run("", "init", "--bare", "-q", "-b", "main", bare)
		// GitHub serves a commit it holds by id (what a fetch of a frozen
		// head asks for), even once a force-push left it unreachable; git
		// does when told so.
		s.run(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
		s.run(bare, "config", "http.receivepack", "false")
	}
	work := s.t.TempDir()
	s.run(work, "init", "-q", "-b", "main")
	for name, f := range files {
		p := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			s.t.Fatal(err)
		}
		var err error
		switch {
		case f.Symlink:
			err = os.Symlink(f.Content, p)
		case f.Executable:
			err = os.WriteFile(p, []byte(f.Content), 0o755)
		default:
			err = os.WriteFile(p, []byte(f.Content), 0o644)
		}
		if err != nil {
			s.t.Fatal(err)
		}
	}
	s.run(work, "add", "-A")
	s.run(work, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "fixture")
	sha := strings.TrimSpace(s.run(work, "rev-parse", "HEAD"))
	s.run(work, "push", "-q", "--force", bare, "HEAD:"+ref)
	return sha
}

func (s *Server) run(dir string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// appAuth checks the App's JWT as GitHub does: RS256 under the App's key,
// issuer the App's id, unexpired.
func (s *Server) appAuth(r *http.Request) bool {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	claims := &jwt.RegisteredClaims{}
	tok, err := jwt.ParseWithClaims(raw, claims, func(tok *jwt.Token) (any, error) {
		if tok.Method != jwt.SigningMethodRS256 {
			return nil, fmt.Errorf("method %v", tok.Method)
		}
		return &s.key.PublicKey, nil
	})
	return err == nil && tok.Valid && claims.Issuer == strconv.Itoa(AppID)
}

func (s *Server) installation(w http.ResponseWriter, r *http.Request) {
	if !s.appAuth(r) {
		http.Error(w, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	id, ok := s.inst[r.PathValue("owner")+"/"+r.PathValue("repo")]
	s.mu.Unlock()
	if !ok {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "app_id": AppID, "app_slug": AppSlug})
}

func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if !s.appAuth(r) {
		http.Error(w, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var body struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"message":"Problems parsing JSON"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var owner string
	for repo, inst := range s.inst {
		if inst == id {
			owner, _, _ = strings.Cut(repo, "/")
		}
	}
	if owner == "" {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	g := Grant{Installation: id, Permissions: body.Permissions}
	for _, name := range body.Repositories {
		if _, ok := s.inst[owner+"/"+name]; !ok {
			http.Error(w, `{"message":"There is at least one repository that does not exist or is not accessible"}`, http.StatusUnprocessableEntity)
			return
		}
		g.Repositories = append(g.Repositories, owner+"/"+name)
	}
	tok := s.mintLocked(g)
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
}

func (s *Server) mintLocked(g Grant) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	tok := "ghs_" + hex.EncodeToString(b)
	s.mint[tok] = g
	return tok
}

// Mint mints a token for repo with the given contents permission, as the
// API would for the App's installation there (for tests of the git side
// alone).
func (s *Server) Mint(repo, contents string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mintLocked(Grant{Installation: s.inst[repo], Repositories: []string{repo}, Permissions: map[string]string{"contents": contents}})
}

// git serves /<owner>/<name>.git/... to a token minted for that repository
// with contents read or write, through git http-backend.
func (s *Server) git(w http.ResponseWriter, r *http.Request) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 3 || !strings.HasSuffix(parts[1], ".git") {
		http.NotFound(w, r)
		return
	}
	repo := parts[0] + "/" + strings.TrimSuffix(parts[1], ".git")
	user, pass, ok := r.BasicAuth()
	s.mu.Lock()
	g, minted := s.mint[pass]
	good := ok && user == "x-access-token" && minted && slices.Contains(g.Repositories, repo) &&
		(g.Permissions["contents"] == "read" || g.Permissions["contents"] == "write")
	if good && strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
		s.fetch = append(s.fetch, repo)
	}
	s.mu.Unlock()
	if !good {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	backend := filepath.Join(gitExecPath(s.t), "git-http-backend")
	h := &cgi.Handler{Path: backend, Env: []string{
		"GIT_PROJECT_ROOT=" + s.root, "GIT_HTTP_EXPORT_ALL=1",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	}}
	h.ServeHTTP(w, r)
}

var execPath struct {
	once sync.Once
	dir  string
	err  error
}

func gitExecPath(t *testing.T) string {
	execPath.once.Do(func() {
		out, err := exec.Command("git", "--exec-path").Output()
		execPath.dir, execPath.err = strings.TrimSpace(string(out)), err
	})
	if execPath.err != nil {
		t.Errorf("git --exec-path: %v", execPath.err)
	}
	return execPath.dir
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Sign is GitHub's X-Hub-Signature-256 of body under secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
