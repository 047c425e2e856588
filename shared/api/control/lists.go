package control

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// repositoryFilter is GitHub's "owner/name".
var repositoryFilter = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$`)

// triggerFilter is what a run's trigger can be.
var triggerFilter = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// listSessions serves GET /v1/sessions: runs newest first, one page at a
// time, filtered by status, trigger, repository and creation time.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	q, err := route.ParseList(r)
	if err != nil {
		return err
	}
	v := r.URL.Query()
	f := store.RunFilter{ListQuery: q, Trigger: v.Get("trigger"), Repository: v.Get("repository")}
	if s := v.Get("status"); s != "" {
		if f.Status, err = vocab.ParseRunStatus(s); err != nil {
			return invalid("status: %q is not one of running, awaiting_approval, ended", s)
		}
	}
	if f.Trigger != "" && !triggerFilter.MatchString(f.Trigger) {
		return invalid("trigger: must be a trigger type such as manual or github")
	}
	if f.Repository != "" && !repositoryFilter.MatchString(f.Repository) {
		return invalid("repository: must be a GitHub repository as \"owner/name\"")
	}
	page, err := s.runs.List(r.Context(), f)
	if err != nil {
		return err
	}
	runs := page.Runs
	if runs == nil {
		runs = []run.View{}
	}
	writeJSON(w, http.StatusOK, route.WithCursor(map[string]any{"sessions": runs}, page.Next))
	return nil
}

// policySummary is a policy in GET /v1/policies: its latest version.
type policySummary struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Version   int    `json:"version"`
	Digest    string `json:"digest"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// listPolicies serves GET /v1/policies: policies newest first, each with
// its latest version's name and digest (the document: GET
// /v1/policies/{id}).
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	q, err := route.ParseList(r)
	if err != nil {
		return err
	}
	page, err := s.st.ListPolicies(r.Context(), q)
	if err != nil {
		return err
	}
	out := make([]policySummary, len(page.Policies))
	for i, p := range page.Policies {
		out[i] = policySummary{ID: p.Latest.PolicyID, Name: p.Latest.Name, Version: p.Latest.Version, Digest: p.Latest.Digest, CreatedAt: p.CreatedAt, UpdatedAt: p.Latest.CreatedAt}
	}
	writeJSON(w, http.StatusOK, route.WithCursor(map[string]any{"policies": out}, page.Next))
	return nil
}

// issueToken serves POST /v1/sessions/{id}/token: a triggered run's session
// and runner tokens, once, to the operator, an SSO admin or the runner key
// of the run's trigger.
func (s *Server) issueToken(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	t, err := s.runs.IssueTokens(r.Context(), who, id)
	if who.Kind == auth.KindLaunch && (errors.Is(err, run.ErrTokensIssued) || errors.Is(err, run.ErrLaunchUsed)) {
		// The credential was spent: whoever holds this copy is not the
		// runner it was handed to. Record it (once) and refuse.
		s.log.WarnContext(r.Context(), "launch credential reused", "run", id)
		if rerr := s.runs.RecordLaunchReuse(r.Context(), id); rerr != nil {
			return fmt.Errorf("api: record the reuse of %s's launch credential: %w", id, rerr)
		}
		return conflict("the launch credential of run %s was used already; this reuse is recorded", id)
	}
	switch {
	case errors.Is(err, run.ErrTokensIssued):
		return conflict("the tokens of run %s were issued already (at creation for a manual run); they are shown once", id)
	case errors.Is(err, run.ErrRunEnded):
		return conflict("run %s has ended", id)
	case err != nil:
		return err
	}
	s.log.InfoContext(r.Context(), "run tokens issued", "run", id, "by", who.Subject, "kind", who.Kind)
	writeJSON(w, http.StatusOK, t)
	return nil
}
