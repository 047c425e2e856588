// Package githubapp keeps the deployment's GitHub App and mints its
// installation tokens, on the control plane only.
//
// Guarantees:
//   - The App's private key is sealed the moment it arrives (seal.Sealer,
//     context "github-app" at the App's generation) and only the sealed form
//     is stored; replacing the App bumps the generation, so a key sealed for
//     an older setting never opens again.
//   - An installation token is minted per use, for one repository and the
//     narrowest permissions the use needs (contents: read to fetch a
//     workspace), with ghinstallation; it lives in a Token, which redacts
//     itself in every printed form, and it never leaves the control plane:
//     the sandbox gets an archive, never a credential.
//   - Every dial to the App's API host goes through the egress guard, and
//     the API and git URLs are checked when they are set: https, or http to
//     loopback where the guard allows loopback.
package githubapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v88/github"

	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// SealID is the seal.Context connection id the App's private key is sealed
// under.
const SealID = "github-app"

// GitHub's hosts, the defaults of a setting that names none.
const (
	DefaultAPIURL = "https://api.github.com"
	DefaultGitURL = "https://github.com"
)

// Errors of the App setting.
var (
	// ErrNoApp: the operator has not configured a GitHub App.
	ErrNoApp = errors.New("githubapp: no GitHub App configured")
	// ErrNoSealer: this process has no key service.
	ErrNoSealer = errors.New("githubapp: no key service configured")
	// ErrChanged: the App was replaced concurrently; try again.
	ErrChanged = errors.New("githubapp: GitHub App changed concurrently")
	// ErrNotInstalled: the App is not installed on the repository (GitHub
	// answered 404), so nothing of it can be read.
	ErrNotInstalled = errors.New("githubapp: the GitHub App is not installed on the repository")
	// ErrUnavailable: GitHub could not be reached or failed.
	ErrUnavailable = errors.New("githubapp: GitHub unavailable")
)

// InvalidError is a setting the operator must correct; Message names the
// field, never the key.
type InvalidError struct{ Message string }

func (e *InvalidError) Error() string { return e.Message }

// Info describes the App without its key.
type Info struct {
	AppID      int64  `json:"app_id"`
	APIURL     string `json:"api_url"`
	GitURL     string `json:"git_url"`
	Generation int    `json:"generation"`
	UpdatedAt  string `json:"updated_at"`
	UpdatedBy  string `json:"updated_by"`
}

func info(a store.GitHubApp) Info {
	return Info{AppID: a.AppID, APIURL: a.APIURL, GitURL: a.GitURL, Generation: a.Generation, UpdatedAt: a.UpdatedAt, UpdatedBy: a.UpdatedBy}
}

// Setting is what an operator gives: the App's id and PEM private key,
// and optionally the hosts of a GitHub Enterprise Server.
type Setting struct {
	AppID      int64
	PrivateKey []byte
	APIURL     string
	GitURL     string
}

// Apps keeps the GitHub App, its key sealed.
type Apps struct {
	st     *store.Store
	sealer seal.Sealer
	guard  *egress.Guard
	now    func() time.Time
}

// New returns the App setting over st. sealer may be nil in a process with
// no key service: Set and Installation then fail with ErrNoSealer. guard
// decides which addresses the App's hosts may be at (nil refuses every
// internal one).
func New(st *store.Store, sealer seal.Sealer, guard *egress.Guard, now func() time.Time) *Apps {
	if guard == nil {
		guard = egress.New(nil)
	}
	return &Apps{st: st, sealer: sealer, guard: guard, now: now}
}

// checkURL validates a host base URL and returns it without a trailing
// slash. An installation token travels to it, so it must be https, or
// http to loopback where g allows loopback, and no address g refuses.
func checkURL(g *egress.Guard, field, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !u.IsAbs() || (u.Scheme != "https" && u.Scheme != "http") {
		return "", &InvalidError{field + ": must be an absolute http(s) URL"}
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", &InvalidError{field + ": must not carry user info, a query or a fragment"}
	}
	if err := g.CheckURL(u); err != nil {
		return "", &InvalidError{field + ": " + strings.TrimPrefix(err.Error(), egress.ErrRefused.Error()+": ")}
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Set replaces the GitHub App: the key is checked (an RSA private key in
// PEM, as GitHub issues), sealed at once under the next generation, and
// only the sealed form is stored.
func (a *Apps) Set(ctx context.Context, in Setting, by string) (Info, error) {
	if a.sealer == nil {
		return Info{}, ErrNoSealer
	}
	if in.AppID <= 0 {
		return Info{}, &InvalidError{"app_id: must be the App's positive numeric id"}
	}
	if len(in.PrivateKey) > seal.MaxPlaintext {
		return Info{}, &InvalidError{fmt.Sprintf("private_key: at most %d bytes", seal.MaxPlaintext)}
	}
	if _, err := ghinstallation.NewAppsTransport(http.DefaultTransport, in.AppID, in.PrivateKey); err != nil {
		// The parser's message may quote the input: say only what is wrong.
		return Info{}, &InvalidError{"private_key: must be the App's RSA private key in PEM, as GitHub downloads it"}
	}
	if in.APIURL == "" {
		in.APIURL = DefaultAPIURL
	}
	if in.GitURL == "" {
		in.GitURL = DefaultGitURL
	}
	apiURL, err := checkURL(a.guard, "api_url", in.APIURL)
	if err != nil {
		return Info{}, err
	}
	gitURL, err := checkURL(a.guard, "git_url", in.GitURL)
	if err != nil {
		return Info{}, err
	}
	for range 3 {
		prev := 0
		cur, err := a.st.GetGitHubApp(ctx)
		switch {
		case err == nil:
			prev = cur.Generation
		case !errors.Is(err, store.ErrNotFound):
			return Info{}, err
		}
		app := store.GitHubApp{AppID: in.AppID, APIURL: apiURL, GitURL: gitURL, Generation: prev + 1,
			UpdatedAt: store.FormatTime(a.now()), UpdatedBy: by}
		app.Sealed, err = a.sealer.Seal(ctx, in.PrivateKey, seal.Context{ConnectionID: SealID, Generation: app.Generation})
		if err != nil {
			return Info{}, fmt.Errorf("githubapp: seal private key: %w", err)
		}
		err = a.st.PutGitHubApp(ctx, app, prev)
		if errors.Is(err, store.ErrGitHubAppChanged) {
			continue
		}
		if err != nil {
			return Info{}, err
		}
		return info(app), nil
	}
	return Info{}, ErrChanged
}

// Get describes the App.
func (a *Apps) Get(ctx context.Context) (Info, error) {
	app, err := a.st.GetGitHubApp(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return Info{}, ErrNoApp
	}
	if err != nil {
		return Info{}, err
	}
	return info(app), nil
}

// Token is an installation token. It prints as "[redacted]" everywhere:
// only Reveal gives it, to the one request that carries it to GitHub.
type Token struct{ s string }

// Reveal returns the token itself.
func (t Token) Reveal() string { return t.s }

// String redacts the token.
func (Token) String() string { return "[redacted]" }

// GoString redacts the token.
func (Token) GoString() string { return "[redacted]" }

// LogValue redacts the token.
func (Token) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// MarshalJSON redacts the token.
func (Token) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// Permission is what an installation token may do with a repository,
// named as GitHub's installation permissions.
type Permission int

// The permissions fluidbox asks for, each on its own token.
const (
	// ReadContents fetches a workspace.
	ReadContents Permission = iota
	// WriteChecks posts a run's check run.
	WriteChecks
	// WritePullRequests comments on a pull request.
	WritePullRequests
)

func (p Permission) options(repo string) *github.InstallationTokenOptions {
	name := repo[strings.IndexByte(repo, '/')+1:]
	opts := &github.InstallationTokenOptions{Repositories: []string{name}, Permissions: &github.InstallationPermissions{}}
	switch p {
	case ReadContents:
		opts.Permissions.Contents = github.Ptr("read")
	case WriteChecks:
		opts.Permissions.Checks = github.Ptr("write")
	case WritePullRequests:
		opts.Permissions.PullRequests = github.Ptr("write")
	}
	return opts
}

// Installation is a minted installation token for one repository, the
// git host to use it with, and a REST client that presents it.
type Installation struct {
	Token  Token
	GitURL string
	Client *github.Client
	// AppID and AppSlug name the App: GitHub names it as the author of
	// the check runs the installation posts, and its bot user
	// (AppSlug + "[bot]") as the author of its comments.
	AppID   int64
	AppSlug string
}

// Installation mints a token of the App's installation on repo ("owner/
// name") restricted to that repository and perm.
func (a *Apps) Installation(ctx context.Context, repo string, perm Permission) (Installation, error) {
	if a.sealer == nil {
		return Installation{}, ErrNoSealer
	}
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return Installation{}, fmt.Errorf("githubapp: repository %q is not owner/name", repo)
	}
	app, err := a.st.GetGitHubApp(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return Installation{}, ErrNoApp
	}
	if err != nil {
		return Installation{}, err
	}
	key, err := a.sealer.Open(ctx, app.Sealed, seal.Context{ConnectionID: SealID, Generation: app.Generation})
	if err != nil {
		return Installation{}, fmt.Errorf("githubapp: open private key: %w", err)
	}
	tr := &http.Transport{DialContext: a.guard.DialContext, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second}
	apps, err := ghinstallation.NewAppsTransport(tr, app.AppID, key)
	if err != nil {
		return Installation{}, fmt.Errorf("githubapp: the stored private key does not parse: %w", ErrNoApp)
	}
	apps.BaseURL = app.APIURL
	base := app.APIURL + "/"
	gh, err := github.NewClient(github.WithHTTPClient(&http.Client{Transport: apps, Timeout: 30 * time.Second}), github.WithURLs(&base, &base))
	if err != nil {
		return Installation{}, fmt.Errorf("githubapp: client: %w", err)
	}
	inst, resp, err := gh.Apps.GetRepositoryInstallation(ctx, owner, name)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return Installation{}, ErrNotInstalled
		}
		return Installation{}, fmt.Errorf("%w: find the installation of %s: %s", ErrUnavailable, repo, statusOf(resp))
	}
	itr := ghinstallation.NewFromAppsTransport(apps, inst.GetID())
	itr.InstallationTokenOptions = perm.options(repo)
	tok, err := itr.Token(ctx)
	if err != nil {
		var he *ghinstallation.HTTPError
		if errors.As(err, &he) && he.Response != nil && (he.Response.StatusCode == http.StatusNotFound || he.Response.StatusCode == http.StatusUnprocessableEntity) {
			return Installation{}, ErrNotInstalled
		}
		return Installation{}, fmt.Errorf("%w: mint an installation token for %s", ErrUnavailable, repo)
	}
	client, err := github.NewClient(github.WithHTTPClient(&http.Client{Transport: itr, Timeout: 30 * time.Second}), github.WithURLs(&base, &base))
	if err != nil {
		return Installation{}, fmt.Errorf("githubapp: client: %w", err)
	}
	return Installation{Token: Token{s: tok}, GitURL: app.GitURL, Client: client, AppID: app.AppID, AppSlug: inst.GetAppSlug()}, nil
}

// statusOf names a GitHub response's status for an error, never its body.
func statusOf(resp *github.Response) string {
	if resp == nil || resp.Response == nil {
		return "no response"
	}
	return resp.Status
}
