// Package workspaces serves the routes of a run's code (routes.go,
// Function Broker): the deployment's GitHub App setting (its key sealed on
// arrival), a run's workspace (on the broker's function URL) and its report
// back to the pull request, both with installation tokens minted with the
// key the broker alone opens.
//
// GET /v1/sessions/{id}/workspace is the credentialed git fetch the
// product promises happens control-plane-side: the runner asks with the
// run's session token and gets the archive of the commit the run froze
// (trigger.github.head_sha, from the signed delivery), fetched with an
// installation token minted for that one repository with contents: read.
// The token, the App's key and the git host's answers never reach the
// response, a log line or the ledger.
//
// Guarantees: a run serves only its own frozen commit, never a ref that a
// later push could move; a run with no frozen commit has no workspace
// (404); an ended run gets nothing; every served archive is recorded first
// (workspace.fetched with the commit and the archive's digest), so a fetch
// the ledger cannot record is not served.
package workspaces

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/githubapp"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/redact"
	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
	"github.com/fluidbox/fluidbox/shared/workspace"
)

// CommitHeader names the commit an archive holds.
const CommitHeader = "X-Fluidbox-Commit"

// Config is what the workspace routes need.
type Config struct {
	route.Config
	// Sealer seals the App's key (PUT /v1/github-app) and opens it to mint
	// installation tokens; nil answers both 503.
	Sealer seal.Sealer
	// Egress decides which addresses the App's API and git hosts may be
	// at; nil refuses every internal address.
	Egress *egress.Guard
}

// Server serves the workspace routes.
type Server struct {
	apps    *githubapp.Apps
	reports *report.Service
	led     *ledger.Ledger
	st      *store.Store
	log     *slog.Logger
}

// New builds the workspace routes' handlers.
func New(cfg Config) *Server {
	cfg.Config = cfg.Config.WithDefaults()
	st := cfg.Ledger.Store()
	apps := githubapp.New(st, cfg.Sealer, cfg.Egress, cfg.Now)
	return &Server{apps: apps, reports: report.New(cfg.Ledger, apps, cfg.Now), led: cfg.Ledger, st: st, log: cfg.Logger}
}

// appRequest is the body of PUT /v1/github-app.
type appRequest struct {
	AppID      int64  `json:"app_id"`
	PrivateKey string `json:"private_key"`
	APIURL     string `json:"api_url,omitempty"`
	GitURL     string `json:"git_url,omitempty"`
}

func (s *Server) putApp(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	var req appRequest
	if e := route.Decode(w, r, &req); e != nil {
		return e
	}
	if req.AppID == 0 || req.PrivateKey == "" {
		return route.Invalid("app_id and private_key are required")
	}
	info, err := s.apps.Set(r.Context(), githubapp.Setting{AppID: req.AppID, PrivateKey: []byte(req.PrivateKey), APIURL: req.APIURL, GitURL: req.GitURL}, who.Subject)
	if err != nil {
		return appError(err)
	}
	s.log.InfoContext(r.Context(), "github app set", "app_id", info.AppID, "api_url", info.APIURL, "generation", info.Generation, "by", who.Subject)
	route.WriteJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) getApp(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	info, err := s.apps.Get(r.Context())
	if err != nil {
		return appError(err)
	}
	route.WriteJSON(w, http.StatusOK, info)
	return nil
}

func appError(err error) error {
	var inv *githubapp.InvalidError
	switch {
	case errors.As(err, &inv):
		return route.Invalid("%s", inv.Message)
	case errors.Is(err, githubapp.ErrNoApp):
		return route.NotFound("github app")
	case errors.Is(err, githubapp.ErrChanged):
		return route.Conflict("the GitHub App was replaced concurrently; retry")
	case errors.Is(err, githubapp.ErrNoSealer), errors.Is(err, seal.ErrUnavailable):
		return route.ErrUnavailable
	}
	return err
}

var errNoWorkspace = &route.Error{Status: http.StatusNotFound, Code: "not_found",
	Message: "this run has no workspace: only a run a GitHub pull request started has a frozen commit to serve"}

// workspace serves GET /v1/sessions/{id}/workspace.
func (s *Server) workspace(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := route.RunID(r)
	if err != nil {
		return err
	}
	h, err := s.st.GetHead(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return route.NotFound("session " + id)
	}
	if err != nil {
		return err
	}
	gh := h.GitHub
	if gh == nil || gh.HeadSHA == "" || gh.Repository == "" {
		return errNoWorkspace
	}
	if h.Status == vocab.Ended {
		return route.Conflict("run %s has ended", id)
	}
	inst, err := s.apps.Installation(r.Context(), gh.Repository, githubapp.ReadContents)
	if err != nil {
		return s.unavailable(r, id, "mint an installation token", err)
	}
	a, err := workspace.Fetch(r.Context(), workspace.Source{
		URL:      inst.GitURL + "/" + gh.Repository + ".git",
		Username: "x-access-token",
		Password: inst.Token.Reveal(),
		Commit:   gh.HeadSHA,
	})
	switch {
	case errors.Is(err, workspace.ErrTooLarge):
		return &route.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
			Message: fmt.Sprintf("commit %s holds more than %d files or %d bytes: too large to serve as a workspace", gh.HeadSHA, workspace.MaxFiles, workspace.MaxBytes)}
	case errors.Is(err, workspace.ErrUnsafeTree):
		return route.Conflict("commit %s holds a path no checkout may write (absolute, \"..\", or \".git\"); it is not served", gh.HeadSHA)
	case err != nil:
		return s.unavailable(r, id, "fetch the frozen commit", err)
	}
	digest := redact.DigestBytes(a.Gzip)
	ev, err := redact.New(redact.WorkspaceFetched{Repository: gh.Repository, PullRequest: gh.PullRequest,
		Commit: a.Commit, ArchiveDigest: digest, ArchiveBytes: int64(len(a.Gzip)), Files: a.Files})
	if err != nil {
		return err
	}
	_, err = s.led.Append(r.Context(), id, func(h store.Head) (store.Batch, error) {
		if h.Status == vocab.Ended {
			return store.Batch{}, run.ErrRunEnded
		}
		return store.Batch{Events: []redact.Envelope{ev}}, nil
	})
	if errors.Is(err, run.ErrRunEnded) {
		return route.Conflict("run %s has ended", id)
	}
	if err != nil {
		return fmt.Errorf("workspaces: record the fetch of %s: %w", id, err)
	}
	s.log.InfoContext(r.Context(), "workspace served", "run", id, "repository", gh.Repository, "commit", a.Commit,
		"files", a.Files, "bytes", len(a.Gzip), "digest", digest.String(), "by", string(who.Kind))
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set(CommitHeader, a.Commit)
	w.Header().Set("Content-Length", strconv.Itoa(len(a.Gzip)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(a.Gzip)
	return nil
}

// unavailable logs why the workspace could not be fetched (the error names
// kinds and statuses, never a token) and answers 503: the runner retries
// or fails the run; it never gets a partial workspace.
func (s *Server) unavailable(r *http.Request, id, what string, err error) error {
	s.log.ErrorContext(r.Context(), "workspace unavailable", "run", id, "step", what, "err", err)
	msg := "the workspace cannot be fetched right now; retry"
	switch {
	case errors.Is(err, githubapp.ErrNoApp):
		msg = "no GitHub App is configured on this deployment (PUT /v1/github-app)"
	case errors.Is(err, githubapp.ErrNotInstalled):
		msg = "the GitHub App is not installed on this run's repository"
	}
	return &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: msg}
}

// report serves POST /v1/sessions/{id}/report: once the run has ended, its
// stored result goes to its pull request as its trigger says (package
// report). The caller only asks; nothing of the request is posted.
func (s *Server) report(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := route.RunID(r)
	if err != nil {
		return err
	}
	out, err := s.reports.Report(r.Context(), id)
	switch {
	case errors.Is(err, run.ErrNotFound):
		return route.NotFound("session " + id)
	case errors.Is(err, report.ErrNoPullRequest):
		return &route.Error{Status: http.StatusNotFound, Code: "not_found", Message: "this run did not come from a pull request: there is nothing to report to"}
	case errors.Is(err, report.ErrNotEnded):
		return route.Conflict("run %s has not ended; it reports once it has", id)
	case errors.Is(err, report.ErrReported):
		return route.Conflict("run %s reported already", id)
	case err != nil:
		return s.unavailable(r, id, "report", err)
	}
	s.log.InfoContext(r.Context(), "run reported", "run", id, "kind", out.Kind, "github_id", out.ID, "by", string(who.Kind))
	route.WriteJSON(w, http.StatusOK, out)
	return nil
}
