package model

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/modelproxy"
	"github.com/fluidbox/fluidbox/shared/ratelimit"
	"github.com/fluidbox/fluidbox/shared/seal"
)

func (s *Server) modelBase(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write([]byte("fluidbox model proxy: POST /v1/messages with the session token as x-api-key\n"))
	}
}

func (s *Server) modelMessages(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !ids.Valid("ses_", id) {
		modelproxy.WriteError(w, http.StatusNotFound, "not_found_error", "fluidbox: no such run")
		return
	}
	switch s.keys.Check(r, modelKey(r), id) {
	case route.KeyOK:
		if s.limited(w, r, id) {
			return
		}
		s.budget.proxy.ServeMessages(w, r, id)
	case route.KeyUnavailable:
		modelproxy.WriteError(w, http.StatusServiceUnavailable, "api_error", "fluidbox cannot check credentials right now")
	default:
		modelproxy.WriteError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key: use this run's session token")
	}
}

// limited counts a request of the run against its per-run limit and, past
// it, answers 429 in Anthropic's shape with Retry-After (Anthropic's
// clients wait and retry); nothing is admitted or recorded, so a sandbox
// cannot flood the ledger with refusals. A count that cannot be kept is
// 503, never a pass.
func (s *Server) limited(w http.ResponseWriter, r *http.Request, runID string) bool {
	err := s.limit.Allow(r.Context(), runID)
	var lim *ratelimit.LimitedError
	switch {
	case err == nil:
		return false
	case errors.As(err, &lim):
		secs := lim.RetryAfterSeconds()
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		s.log.WarnContext(r.Context(), "model request rate limited", "run", runID, "limit_per_minute", lim.Limit)
		modelproxy.WriteError(w, http.StatusTooManyRequests, "rate_limit_error",
			fmt.Sprintf("fluidbox: this run made more than %d requests this minute (FLUIDBOX_RUN_REQUESTS_PER_MINUTE, counted with its other requests); nothing was forwarded: retry after %d s", lim.Limit, secs))
	default:
		s.log.ErrorContext(r.Context(), "rate limit unavailable", "run", runID, "err", err)
		modelproxy.WriteError(w, http.StatusServiceUnavailable, "api_error", "fluidbox cannot count this run's requests right now; retry")
	}
	return true
}

// modelKey reads the run's session token as the Anthropic API sends keys:
// x-api-key, or a bearer token (as anthropic-sdk-go v2 and
// ANTHROPIC_AUTH_TOKEN send it). Only that run's token is accepted: the
// proxy spends the run's budget.
func modelKey(r *http.Request) string {
	if tok := strings.TrimSpace(r.Header.Get("X-Api-Key")); tok != "" {
		return tok
	}
	return auth.Bearer(r)
}

// modelUpstreamRequest is the body of PUT /v1/model-upstream.
type modelUpstreamRequest struct {
	URL        string           `json:"url"`
	Credential *seal.Credential `json:"credential"`
}

func (s *Server) putModelUpstream(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	var req modelUpstreamRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	if req.URL == "" || req.Credential == nil {
		return invalid("url and credential are required")
	}
	info, err := s.budget.upstreams.Set(r.Context(), req.URL, *req.Credential, who.Subject)
	if err != nil {
		return upstreamError(err)
	}
	s.log.InfoContext(r.Context(), "model upstream set", "url", info.URL, "generation", info.Generation, "by", who.Subject)
	writeJSON(w, http.StatusOK, info)
	return nil
}

func (s *Server) getModelUpstream(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	info, err := s.budget.upstreams.Info(r.Context())
	if err != nil {
		return upstreamError(err)
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

func upstreamError(err error) error {
	var inv *modelproxy.InvalidError
	switch {
	case errors.As(err, &inv):
		return invalid("%s", inv.Message)
	case errors.Is(err, modelproxy.ErrNoUpstream):
		return notFound("model upstream")
	case errors.Is(err, modelproxy.ErrChanged):
		return conflict("the model upstream was replaced concurrently; retry")
	case errors.Is(err, modelproxy.ErrNoSealer), errors.Is(err, seal.ErrUnavailable):
		return errUnavailable
	}
	return err
}
