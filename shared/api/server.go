// Package api serves fluidbox's HTTP API (API.md) as one http.Handler. The
// dev server and every Lambda function behind API Gateway run this same
// handler; a function simply receives only the routes its API events name.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Config is what the handler needs.
type Config struct {
	AdminToken string
	Ledger     *ledger.Ledger
	Logger     *slog.Logger
	Now        func() time.Time
	// SSEMaxDuration bounds one event-stream response; 0 streams until the
	// client leaves. Behind API Gateway (which buffers a Lambda's response)
	// it is short, and clients resume with Last-Event-ID.
	SSEMaxDuration time.Duration
	// Scheduler arranges each new approval's expiry.
	Scheduler approval.Scheduler
	// Observer, when set, is told of every committed approval transition
	// (the dev server prints them as notifications).
	Observer approval.Observer
	// GitHubWebhookSecret verifies POST /v1/triggers/github deliveries
	// (FLUIDBOX_GITHUB_WEBHOOK_SECRET). Empty: every delivery is refused.
	GitHubWebhookSecret string
	// OIDC, when set, is SSO mode: a bearer that is neither the admin token
	// nor a session token is verified as a JWT from the issuer, and the
	// user's roles decide what it may do (see authorize). The admin token
	// still works in SSO mode: it is the operator's way in when the
	// identity provider is down, and how the first admin is helped in.
	OIDC *auth.OIDC
	// Prices prices model requests (admissions, the model proxy); nil is
	// budget.DefaultPrices().
	Prices *budget.Prices
	// Sealer seals the model upstream's credential (PUT /v1/model-upstream)
	// and opens it in the model proxy; nil disables both (503). It also
	// seals connection credentials (create, replace) and opens them for
	// refresh and brokered calls; nil answers those 503, while reading and
	// revoking connections need no key (revoking must work when KMS is down).
	Sealer seal.Sealer
	// UpstreamToolsTTL is how long the broker may trust its last look at an
	// upstream's tool list (FLUIDBOX_UPSTREAM_TOOLS_TTL_SECONDS); 0 looks
	// on every brokered call.
	UpstreamToolsTTL time.Duration
	// ModelClient forwards model-proxy requests upstream; nil is a default.
	ModelClient *http.Client
	// MaxPendingApprovals is how many approvals one run may have waiting
	// (FLUIDBOX_MAX_PENDING_APPROVALS); 0 is gate.DefaultMaxPendingApprovals.
	MaxPendingApprovals int
	// RunRequestsPerMinute bounds each run's session-token requests
	// (FLUIDBOX_RUN_REQUESTS_PER_MINUTE); 0 is DefaultRunRequestsPerMinute.
	RunRequestsPerMinute int
	// ConnectionAllowCIDRs are the otherwise refused address ranges
	// (loopback, link-local, private, unique-local) connection and model
	// upstream URLs may reach (FLUIDBOX_CONNECTION_ALLOW_CIDRS).
	ConnectionAllowCIDRs []netip.Prefix
}

// Server is the API handler.
type Server struct {
	cfg       Config
	st        *store.Store
	led       *ledger.Ledger
	runs      *run.Service
	perm      *permission.Service
	approvals *approval.Service
	log       *slog.Logger
	mux       *http.ServeMux
	tokens    tokenCache
	budget    budgetDeps
	conns     *connection.Service
	broker    *connection.Broker
	// egress decides which addresses connection and model-upstream URLs
	// may reach.
	egress *egress.Guard
}

// New builds the handler.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:    cfg,
		st:     cfg.Ledger.Store(),
		led:    cfg.Ledger,
		runs:   run.NewService(cfg.Ledger, cfg.Now),
		log:    cfg.Logger,
		mux:    http.NewServeMux(),
		egress: egress.New(cfg.ConnectionAllowCIDRs),
	}
	s.approvals = approval.NewService(cfg.Ledger, cfg.Now)
	if cfg.Observer != nil {
		s.approvals.Observe(cfg.Observer)
	}
	if cfg.Scheduler == nil {
		cfg.Scheduler = approval.Lazy{}
	}
	s.perm = permission.NewService(cfg.Ledger, s.approvals, cfg.Scheduler, cfg.Logger, cfg.Now)
	s.perm.LimitPending(cfg.MaxPendingApprovals)
	s.conns = connection.NewService(s.st, cfg.Sealer, connection.Options{Now: cfg.Now, UpstreamToolsTTL: cfg.UpstreamToolsTTL, Egress: s.egress})
	s.broker = connection.NewBroker(s.conns, s.perm, cfg.Logger)
	s.initBudget()
	s.routes()
	return s
}

// handler is an endpoint: it returns an error to be answered, or nil once it
// has written its response.
type handler func(w http.ResponseWriter, r *http.Request, who auth.Principal) error

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.handle("POST /v1/policies", adminOnly, s.createPolicy)
	s.handle("GET /v1/policies/{id}", adminOnly, s.getPolicy)
	s.handle("PUT /v1/policies/{id}", adminOnly, s.updatePolicy)
	s.handle("GET /v1/policies/{id}/versions/{n}", adminOnly, s.getPolicyVersion)
	s.handle("POST /v1/capabilities", adminOnly, s.createCapability)
	s.handle("GET /v1/capabilities", adminOnly, s.listCapabilities)
	s.handle("GET /v1/capabilities/{id}", adminOnly, s.getCapability)
	s.handle("POST /v1/sessions", adminOnly, s.createSession)
	s.handle("GET /v1/sessions/{id}", runScoped, s.getSession)
	s.handle("POST /v1/sessions/{id}/end", adminOnly, s.endSession)
	s.handle("GET /v1/sessions/{id}/events", runScoped, s.events)
	s.handle("POST /v1/sessions/{id}/permission", runScoped, s.permission)
	s.approvalRoutes()
	s.connectionRoutes()
	s.webRoutes()
	s.budgetRoutes()
	s.memberRoutes()
	s.triggerRoutes()
}

// access says who may call a route.
type access int

const (
	// adminOnly: the operator.
	adminOnly access = iota
	// runScoped: the operator, or the session token of the run in the path.
	runScoped
	// approvers: the operator, and SSO users with role admin or approver.
	approvers
	// deciders: the operator and every SSO user; the handler then asks
	// approval.MayDecide, since the invoker of a run decides the calls on
	// their personal connections whatever their role.
	deciders
	// people: the operator and every SSO user (never a session token); the
	// handler decides further (connections: owner or admin).
	people
)

func (s *Server) handle(pattern string, acc access, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		who, e := s.authenticate(r)
		if e == nil {
			e = authorize(who, acc, r.PathValue("id"))
		}
		if e != nil {
			writeError(w, e)
			return
		}
		if err := h(w, r, who); err != nil {
			s.fail(w, r, err)
		}
	})
}

// authorize says whether who may call a route of the given access. The
// operator and SSO admins may call every route.
func authorize(who auth.Principal, acc access, runID string) *Error {
	switch {
	case who.IsAdmin():
		return nil
	case acc == runScoped && who.MayActOnRun(runID):
		return nil
	case acc == approvers && who.HasRole(auth.RoleApprover):
		return nil
	case acc == deciders && who.Kind == auth.KindUser:
		return nil
	case acc == people && who.Kind == auth.KindUser:
		return nil
	}
	return errForbidden
}

// authenticate identifies the caller. A session token is checked against
// the hash stored on the run named in the path; it is good for that run only.
// In SSO mode any other bearer is verified as the issuer's JWT
// (authenticateUser).
func (s *Server) authenticate(r *http.Request) (auth.Principal, *Error) {
	tok := auth.Bearer(r)
	if auth.AdminMatches(tok, s.cfg.AdminToken) {
		return auth.Principal{Kind: auth.KindAdmin, Subject: "admin"}, nil
	}
	if s.cfg.OIDC != nil && tok != "" && !strings.HasPrefix(tok, auth.SessionTokenPrefix) {
		return s.authenticateUser(r, tok)
	}
	runID := r.PathValue("id")
	switch s.sessionKey(r, tok, runID) {
	case keyOK:
		return auth.Principal{Kind: auth.KindSession, Subject: runID, RunID: runID}, nil
	case keyUnavailable:
		return auth.Principal{}, errUnavailable
	}
	return auth.Principal{}, errUnauthenticated
}

type keyCheck int

const (
	keyRefused keyCheck = iota
	keyOK
	keyUnavailable
)

// sessionKey checks a session token against the hash stored on runID: a
// token is good for its own run only. A store failure is keyUnavailable
// (503, deny), never a pass.
func (s *Server) sessionKey(r *http.Request, tok, runID string) keyCheck {
	if runID == "" || !strings.HasPrefix(tok, auth.SessionTokenPrefix) {
		return keyRefused
	}
	hash, err := s.tokens.hash(r.Context(), s.st, runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return keyRefused
	case err != nil:
		s.log.ErrorContext(r.Context(), "authenticate", "run", runID, "err", err)
		return keyUnavailable
	case !auth.TokenMatches(tok, hash):
		return keyRefused
	}
	return keyOK
}

// fail answers an error a handler returned. API errors go out as they are;
// known sentinels map to their codes; anything else is logged once and
// answered without its text.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	var inv *run.InvalidError
	var forb *run.ForbiddenError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &inv):
		e = invalid("%s", inv.Error())
	case errors.As(err, &forb):
		e = &Error{http.StatusForbidden, "forbidden", forb.Message}
	case errors.Is(err, run.ErrNotFound):
		e = notFound("session " + r.PathValue("id"))
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ledger.ErrContention):
		s.log.ErrorContext(r.Context(), "unavailable", "route", r.Pattern, "err", err)
		e = errUnavailable
	default:
		s.log.ErrorContext(r.Context(), "internal error", "route", r.Pattern, "err", err)
		e = errInternal
	}
	writeError(w, e)
}

// ServeHTTP routes a request, answering unknown paths and methods in the
// API's error shape, and logs it once without its body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		probe := &statusRecorder{ResponseWriter: discard{}, status: http.StatusOK}
		h, _ := s.mux.Handler(r)
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			writeError(rec, &Error{http.StatusMethodNotAllowed, "method_not_allowed", r.Method + " is not allowed on " + r.URL.Path})
		} else {
			writeError(rec, notFound("route "+r.URL.Path))
		}
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	s.log.InfoContext(r.Context(), "request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "ms", s.cfg.Now().Sub(start).Milliseconds())
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush lets event streams flush through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
