// Package route is the core every HTTP handler of fluidbox shares: the
// shape of a route (Route: pattern, who may call it, which function serves
// it, its handler and its documentation), who may call a route (Access)
// and the authentication behind it (the admin token, per-run session
// tokens, and in SSO mode a UserAuthenticator), the API's error envelope
// and JSON reading, and New, which builds the mux of one function from
// the rows its handler packages give.
//
// Handlers live in packages named for their resource (shared/api/control,
// runner, approvals, connections, model, triggers, members, workspaces);
// each lists its rows (Routes), handler and documentation in the same
// value. New serves exactly the rows its Target selects: a row without a
// handler, a handler of the wrong kind for its row's access, or a row given
// twice is an error at start-up. A package serving rows of several
// functions is mounted by each, and each serves only its own rows; each
// function's test holds what its main serves to the surface's rows that
// name it (shared/api.Surface), so a function can neither miss nor grow a
// route unseen.
//
// Guarantees: every route that takes a bearer authenticates and authorises
// it before its handler runs; a failure to check a credential is 503 and
// never a pass; error bodies are built here or by the handlers, never from
// an internal error's text; unknown paths and methods answer in the API's
// error shape.
//
// This package links no MCP, OIDC or KMS code: the gate function imports it.
package route

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/ratelimit"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/telemetry"
)

// Config is what every handler package and the core share.
type Config struct {
	AdminToken string
	Ledger     *ledger.Ledger
	Logger     *slog.Logger
	Now        func() time.Time
	// Users, when set, is SSO mode: a bearer that is neither the admin
	// token nor a session token is a person's, verified by Users (the
	// members package). The admin token still works in SSO mode: it is the
	// operator's way in when the identity provider is down.
	Users UserAuthenticator
	// RunRequestsPerMinute bounds the requests one run's session token may
	// make per minute, across every instance (FLUIDBOX_RUN_REQUESTS_PER_MINUTE);
	// 0 is ratelimit.DefaultPerMinute.
	RunRequestsPerMinute int
	// RunMaxOpenRequests bounds the requests one run's session token may
	// have open at once, across every instance, long polls included
	// (FLUIDBOX_RUN_MAX_OPEN_REQUESTS); 0 is ratelimit.DefaultMaxOpen.
	RunMaxOpenRequests int
	// Telemetry records each request's span and the handlers' acts; nil
	// is off (package telemetry).
	Telemetry *telemetry.Telemetry
}

// ConfigFrom is what a deployed function's handler packages take from its
// configuration, the same for every function.
func ConfigFrom(c config.Config, led *ledger.Ledger, log *slog.Logger) Config {
	return Config{AdminToken: c.AdminToken, Ledger: led, Logger: log, RunRequestsPerMinute: c.RunRequestsPerMinute, RunMaxOpenRequests: c.RunMaxOpenRequests}
}

// WithDefaults fills the clock and the logger.
func (c Config) WithDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// UserAuthenticator verifies a person's bearer token (SSO mode). Its error
// is the answer to send.
type UserAuthenticator interface {
	AuthenticateUser(r *http.Request, tok string) (auth.Principal, *Error)
}

// HandlerFunc is an endpoint behind a bearer: it returns an error to be
// answered (Fail), or nil once it has written its response.
type HandlerFunc func(w http.ResponseWriter, r *http.Request, who auth.Principal) error

// Endpoint is what serves one row: an authenticated HandlerFunc, or a raw
// http.Handler for the rows that take no bearer (Public, Signed, RunKey).
type Endpoint struct {
	fn  HandlerFunc
	raw http.Handler
}

// Authenticated serves a row whose access takes a bearer.
func Authenticated(h HandlerFunc) Endpoint { return Endpoint{fn: h} }

// Raw serves a row that answers for itself.
func Raw(h http.Handler) Endpoint { return Endpoint{raw: h} }

// Group is a handler package's contribution: its rows.
type Group interface {
	Routes() []Route
}

// Server is one function's HTTP handler (or everything, for fluidbox dev).
type Server struct {
	cfg    Config
	keys   *SessionKeys
	limit  *ratelimit.Limiter
	open   *ratelimit.Open
	log    *slog.Logger
	mux    *http.ServeMux
	routes []Route
}

// New builds the handler serving the rows of groups that t selects. It
// fails when a selected row has no handler or one of the wrong kind for
// its access, when a row is given twice, or when one pattern is given two
// accesses.
func New(cfg Config, t Target, groups ...Group) (*Server, error) {
	cfg = cfg.WithDefaults()
	s := &Server{cfg: cfg, keys: newLedgerKeys(cfg.Ledger, cfg.Logger), log: cfg.Logger, mux: http.NewServeMux(),
		limit: ratelimit.New(cfg.Ledger.Store(), cfg.RunRequestsPerMinute, cfg.Now),
		open:  ratelimit.NewOpen(cfg.Ledger.Store(), cfg.RunMaxOpenRequests, cfg.Now)}
	var rows []Route
	for _, g := range groups {
		rows = append(rows, g.Routes()...)
	}
	if err := Check(rows); err != nil {
		return nil, err
	}
	registered := map[string]bool{}
	for _, r := range Of(rows, t) {
		if registered[r.Pattern] {
			continue // GET /healthz, on two functions, served once by dev
		}
		e := r.Handler
		if e.raw != nil {
			s.mux.Handle(r.Pattern, e.raw)
		} else {
			s.handle(r, e.fn)
		}
		registered[r.Pattern] = true
		s.routes = append(s.routes, r)
	}
	return s, nil
}

// Check reports, as an error, the first way rows cannot be served: a row
// without a handler or with one of the wrong kind for its access, a row
// given twice for one function and way in, or one pattern given two
// accesses.
func Check(rows []Route) error {
	access := map[string]Access{}
	seen := map[Target]map[string]bool{}
	for _, r := range rows {
		e := r.Handler
		switch {
		case e.fn == nil && e.raw == nil:
			return fmt.Errorf("route: %s (%s via %s) has no handler", r.Pattern, r.Function, r.Via)
		case r.Access.bearer() && e.fn == nil:
			return fmt.Errorf("route: %s takes a bearer (%s) but its handler is raw", r.Pattern, r.Access)
		case !r.Access.bearer() && e.raw == nil:
			return fmt.Errorf("route: %s is %s but its handler expects a bearer", r.Pattern, r.Access)
		}
		if a, ok := access[r.Pattern]; ok && a != r.Access {
			return fmt.Errorf("route: %s has two accesses, %s and %s", r.Pattern, a, r.Access)
		}
		access[r.Pattern] = r.Access
		k := Target{Function: r.Function, Via: r.Via}
		if seen[k] == nil {
			seen[k] = map[string]bool{}
		}
		if seen[k][r.Pattern] {
			return fmt.Errorf("route: %s is given twice on %s via %s", r.Pattern, r.Function, r.Via)
		}
		seen[k][r.Pattern] = true
	}
	return nil
}

// Liveness is the row of GET /healthz on fn via v: 200 {"status":"ok"}
// once the function can serve. One function's row documents it; another's
// says why it is not documented again (undocumented).
func Liveness(fn Function, v Via, undocumented string) Route {
	r := Route{Pattern: "GET /healthz", Access: Public, Function: fn, Via: v, Undocumented: undocumented,
		Handler: Raw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}))}
	if undocumented == "" {
		r.Doc = liveness
	}
	return r
}

var liveness = Doc{ID: "healthz", Tag: "health", Summary: "Liveness; 200 once the server can serve.", Errors: []int{503}, OpenAPI: `
responses:
  '200':
    description: Ready.
    content:
      application/json:
        schema:
          type: object
          required: [status]
          properties:
            status:
              const: ok
`}

// Routes returns the rows s serves.
func (s *Server) Routes() []Route { return append([]Route(nil), s.routes...) }

func (s *Server) handle(row Route, h HandlerFunc) {
	acc := row.Access
	s.mux.HandleFunc(row.Pattern, func(w http.ResponseWriter, r *http.Request) {
		who, e := s.authenticate(r, acc)
		if e == nil {
			e = authorize(who, acc, r.PathValue("id"))
		}
		if e == nil && who.Kind == auth.KindSession {
			e = s.rateLimit(w, r, who.RunID)
		}
		var slot *ratelimit.Slot
		switch {
		case e != nil || who.Kind != auth.KindSession:
		case row.OpenOnlyToWait:
			r = r.WithContext(ratelimit.WithHolder(r.Context(), s.holder(w, r, who.RunID)))
		default:
			slot, e = s.enter(w, r, who.RunID)
		}
		if e != nil {
			WriteError(w, e)
			return
		}
		if slot != nil {
			defer s.leave(r, who.RunID, slot)
		}
		if err := h(w, r, who); err != nil {
			Fail(s.log, w, r, err)
		}
	})
}

// rateLimit counts a request of a run's session token, the sandbox's one
// credential: over the run's limit it answers 429 with Retry-After; a count
// that cannot be kept is 503 (deny and retry), never a pass. Rejected
// requests are not counted: they cost nothing downstream.
func (s *Server) rateLimit(w http.ResponseWriter, r *http.Request, runID string) *Error {
	err := s.limit.Allow(r.Context(), runID)
	var lim *ratelimit.LimitedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &lim):
		secs := lim.RetryAfterSeconds()
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		s.log.WarnContext(r.Context(), "rate limited", "run", runID, "limit_per_minute", lim.Limit)
		return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Message: fmt.Sprintf("this run made more than %d requests this minute (FLUIDBOX_RUN_REQUESTS_PER_MINUTE); nothing was done: retry after %d s (Retry-After), and treat this as deny until then", lim.Limit, secs)}
	}
	s.log.ErrorContext(r.Context(), "rate limit unavailable", "run", runID, "err", err)
	return ErrUnavailable
}

// enter takes one of the run's open-request slots for this request: with
// the run's limit open it answers 429 (a long poll holds its slot while it
// waits); a count that cannot be kept is 503, never a pass.
func (s *Server) enter(w http.ResponseWriter, r *http.Request, runID string) (*ratelimit.Slot, *Error) {
	slot, err := s.open.Enter(r.Context(), runID)
	var busy *ratelimit.BusyError
	switch {
	case err == nil:
		return slot, nil
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", "1")
		s.log.WarnContext(r.Context(), "too many open requests", "run", runID, "limit", busy.Limit)
		return nil, &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Message: fmt.Sprintf("this run already has %d requests open, the most it may (FLUIDBOX_RUN_MAX_OPEN_REQUESTS); nothing was done: retry once one of them ends, and treat this as deny until then", busy.Limit)}
	}
	s.log.ErrorContext(r.Context(), "open-request count unavailable", "run", runID, "err", err)
	return nil, ErrUnavailable
}

// holder takes the request's slot when it is about to wait (a route whose
// row is OpenOnlyToWait), with the answers enter gives: the error is the
// 429 or 503 the request then ends with.
func (s *Server) holder(w http.ResponseWriter, r *http.Request, runID string) ratelimit.Holder {
	return func(ctx context.Context) (func(), error) {
		slot, e := s.enter(w, r.WithContext(ctx), runID)
		if e != nil {
			return nil, e
		}
		return func() { s.leave(r, runID, slot) }, nil
	}
}

// leave releases the request's slot, even when the request was cancelled;
// a slot that cannot be released is freed when its lease expires.
func (s *Server) leave(r *http.Request, runID string, slot *ratelimit.Slot) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if err := slot.Release(ctx); err != nil {
		s.log.WarnContext(ctx, "release an open-request slot; its lease frees it", "run", runID, "err", err)
	}
}

// authorize says whether who may call a route of the given access. The
// operator and SSO admins may call every route.
func authorize(who auth.Principal, acc Access, runID string) *Error {
	switch {
	case who.IsAdmin():
		return nil
	case (acc == RunScoped || acc == Runner || acc == Reviewers) && who.MayActOnRun(runID):
		return nil
	case acc == Reviewers && who.HasRole(auth.RoleApprover):
		return nil
	case acc == Admitters && (who.MayActOnRun(runID) || who.MayReportUsage(runID)):
		return nil
	case acc == Reporters && who.MayReportUsage(runID):
		return nil
	case acc == Reporters && who.Kind == auth.KindSession && who.RunID == runID:
		return errSessionCannotReport
	case acc == Deciders && who.Kind == auth.KindUser:
		return nil
	case acc == People && who.Kind == auth.KindUser:
		return nil
	case acc == Issuers && who.MayIssueTokens(runID):
		return nil
	case who.Kind == auth.KindSession:
		return errSessionElsewhere
	case who.Kind == auth.KindRunner:
		return errRunnerElsewhere
	}
	return ErrForbidden
}

// authenticate identifies the caller. A session token is checked against
// the hash stored on the run named in the path; it is good for that run only.
// A runner token is checked the same way. In SSO mode any other bearer is
// a person's (UserAuthenticator), except on Runner and Admitters routes.
func (s *Server) authenticate(r *http.Request, acc Access) (auth.Principal, *Error) {
	tok := auth.Bearer(r)
	if auth.AdminMatches(tok, s.cfg.AdminToken) {
		return auth.Principal{Kind: auth.KindAdmin, Subject: string(auth.Operator)}, nil
	}
	if s.cfg.Users != nil && !acc.personless() && tok != "" && !strings.HasPrefix(tok, auth.SessionTokenPrefix) && !strings.HasPrefix(tok, auth.RunnerTokenPrefix) && !strings.HasPrefix(tok, auth.TriggerKeyPrefix) && !strings.HasPrefix(tok, auth.LaunchCredentialPrefix) {
		return s.cfg.Users.AuthenticateUser(r, tok)
	}
	runID := r.PathValue("id")
	if strings.HasPrefix(tok, auth.LaunchCredentialPrefix) {
		if acc != Issuers {
			return auth.Principal{}, ErrUnauthenticated
		}
		switch s.keys.CheckLaunch(r, tok, runID) {
		case KeyOK:
			return auth.Principal{Kind: auth.KindLaunch, Subject: "launch", RunID: runID}, nil
		case KeyUnavailable:
			return auth.Principal{}, ErrUnavailable
		}
		return auth.Principal{}, ErrUnauthenticated
	}
	if strings.HasPrefix(tok, auth.TriggerKeyPrefix) {
		if acc != Issuers {
			return auth.Principal{}, ErrUnauthenticated
		}
		trigger, check := s.keys.CheckTrigger(r, tok, runID)
		switch check {
		case KeyOK:
			return auth.Principal{Kind: auth.KindTrigger, Subject: trigger, RunID: runID}, nil
		case KeyUnavailable:
			return auth.Principal{}, ErrUnavailable
		}
		return auth.Principal{}, ErrUnauthenticated
	}
	if strings.HasPrefix(tok, auth.RunnerTokenPrefix) {
		switch s.keys.CheckRunner(r, tok, runID) {
		case KeyOK:
			return auth.Principal{Kind: auth.KindRunner, Subject: runID, RunID: runID}, nil
		case KeyUnavailable:
			return auth.Principal{}, ErrUnavailable
		}
		return auth.Principal{}, errRunnerElsewhere
	}
	switch s.keys.Check(r, tok, runID) {
	case KeyOK:
		return auth.Principal{Kind: auth.KindSession, Subject: runID, RunID: runID}, nil
	case KeyUnavailable:
		return auth.Principal{}, ErrUnavailable
	}
	if strings.HasPrefix(tok, auth.SessionTokenPrefix) {
		return auth.Principal{}, errSessionElsewhere
	}
	return auth.Principal{}, ErrUnauthenticated
}

// A run's token used where it is not good: 403 with a hint, not 401, so a
// runner that sent its session token to the wrong route or run learns why
// instead of suspecting a bad token. Any string with the prefix gets the
// same answer, whether or not it is some run's token, so the answer tells
// nothing about which tokens exist.
var (
	errSessionElsewhere = &Error{Status: http.StatusForbidden, Code: "forbidden",
		Message: "a session token is good only on the routes of the run it was issued for (its permission, tools/call, admissions, events, approvals and GET of the run); this request names another run or a route that needs the admin token or a person's token, or the token is not this run's (check that the run id and the token belong together)"}
	errRunnerElsewhere = &Error{Status: http.StatusForbidden, Code: "forbidden",
		Message: "a runner token is good only on the routes of the run it was issued for (its admissions, usage reports and ending the run); this request names another run or a route that needs the admin token or a person's token, or the token is not this run's"}
)

// KeyCheck is the outcome of checking a session token.
type KeyCheck int

// Outcomes of a session-token check.
const (
	KeyRefused KeyCheck = iota
	KeyOK
	KeyUnavailable
)

// SessionKeys checks session tokens: a token is good for its own run only.
// It caches the runs' token hashes, which never change.
type SessionKeys struct {
	st     *store.Store
	log    *slog.Logger
	tokens tokenCache
	// readHead reads a run's head when its hashes are not cached.
	readHead func(ctx context.Context, runID string) (store.Head, error)
}

// NewSessionKeys checks tokens against the runs in st.
func NewSessionKeys(st *store.Store, log *slog.Logger) *SessionKeys {
	return &SessionKeys{st: st, log: log, readHead: st.GetHead}
}

// newLedgerKeys checks tokens against the runs of led, reading a run
// through the ledger (Ledger.Load): the request's own decision then needs
// no read of the run's head or frozen state of its own.
func newLedgerKeys(led *ledger.Ledger, log *slog.Logger) *SessionKeys {
	k := NewSessionKeys(led.Store(), log)
	k.readHead = led.Load
	return k
}

// Check checks tok against the hash stored on runID. A store failure is
// KeyUnavailable (503, deny), never a pass. The model proxy calls it for
// its RunKey route, whose errors are its own.
func (k *SessionKeys) Check(r *http.Request, tok, runID string) KeyCheck {
	return k.check(r, tok, runID, auth.SessionTokenPrefix, runHashes.sessionHash)
}

// errSessionCannotReport answers a session token on a Reporters route.
var errSessionCannotReport = &Error{Status: http.StatusForbidden, Code: "forbidden",
	Message: "a session token cannot report usage or end its run: the runner does, with the runner token issued beside it, which never enters the sandbox"}

// CheckRunner checks a runner token against the hash stored on runID, as
// Check does a session token.
func (k *SessionKeys) CheckRunner(r *http.Request, tok, runID string) KeyCheck {
	return k.check(r, tok, runID, auth.RunnerTokenPrefix, runHashes.runnerHash)
}

// check checks a token of the given prefix against the hash pick reads
// from runID's cached hashes.
func (k *SessionKeys) check(r *http.Request, tok, runID, prefix string, pick func(runHashes) string) KeyCheck {
	if runID == "" || !strings.HasPrefix(tok, prefix) {
		return KeyRefused
	}
	h, err := k.tokens.get(r.Context(), k.readHead, runID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return KeyRefused
	case err != nil:
		k.log.ErrorContext(r.Context(), "authenticate", "run", runID, "err", err)
		return KeyUnavailable
	case !auth.TokenMatches(tok, pick(h)):
		return KeyRefused
	}
	return KeyOK
}

// CheckTrigger checks a trigger runner key against the trigger that created
// runID and returns that trigger's id. Nothing is cached: the key is used
// once per run, and a trigger deleted or given a new key must stop it.
func (k *SessionKeys) CheckTrigger(r *http.Request, tok, runID string) (string, KeyCheck) {
	if runID == "" || !strings.HasPrefix(tok, auth.TriggerKeyPrefix) {
		return "", KeyRefused
	}
	head, err := k.st.GetHead(r.Context(), runID)
	if err == nil && head.GitHub == nil {
		return "", KeyRefused
	}
	var t store.Trigger
	if err == nil {
		t, err = k.st.GetTrigger(r.Context(), head.GitHub.TriggerID)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", KeyRefused
	case err != nil:
		k.log.ErrorContext(r.Context(), "authenticate", "run", runID, "err", err)
		return "", KeyUnavailable
	case !auth.TokenMatches(tok, t.RunnerKeyHash):
		return "", KeyRefused
	}
	return t.ID, KeyOK
}

// Fail answers an error a handler returned. API errors go out as they are;
// known sentinels map to their codes; anything else is logged once and
// answered without its text.
func Fail(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	var inv *run.InvalidError
	var forb *run.ForbiddenError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &inv):
		e = Invalid("%s", inv.Error())
	case errors.As(err, &forb):
		e = &Error{Status: http.StatusForbidden, Code: "forbidden", Message: forb.Message}
	case errors.Is(err, run.ErrNotFound):
		e = NotFound("session " + r.PathValue("id"))
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ledger.ErrContention):
		log.ErrorContext(r.Context(), "unavailable", "route", r.Pattern, "err", err)
		e = ErrUnavailable
	default:
		log.ErrorContext(r.Context(), "internal error", "route", r.Pattern, "err", err)
		e = ErrInternal
	}
	WriteError(w, e)
}

// ServeHTTP routes a request, answering unknown paths and methods in the
// API's error shape, and logs it once without its body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	_, pattern := s.mux.Handler(r)
	// The span is named by the route table's pattern, never the raw path,
	// and continues the runner's trace (traceparent).
	ctx, end := s.cfg.Telemetry.StartRequest(s.cfg.Telemetry.Extract(r.Context(), r.Header), pattern)
	defer func() { end(rec.status) }()
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	if pattern == "" {
		probe := &statusRecorder{ResponseWriter: discard{}, status: http.StatusOK}
		h, _ := s.mux.Handler(r)
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			WriteError(rec, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: r.Method + " is not allowed on " + r.URL.Path})
		} else {
			WriteError(rec, NotFound("route "+r.URL.Path))
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

// ServesExactly reports, as an error, how the rows s serves differ from
// target's rows of surface (each function's test asks it of the handler
// its main builds, with shared/api.Surface).
func (s *Server) ServesExactly(surface []Route, target Target) error {
	got, want := keys(s.routes), keys(Of(surface, target))
	if len(want) == 0 || !slices.Equal(got, want) {
		return fmt.Errorf("%s via %s serves %v, want %v", target.Function, target.Via, got, want)
	}
	return nil
}

// keys names each row by its pattern, access, function and way in.
func keys(rows []Route) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s (%s, %s via %s)", r.Pattern, r.Access, r.Function, r.Via)
	}
	return out
}
