// Package model serves the model routes (routes.go, Function Broker): the
// operator's model upstream setting (through API Gateway; its key sealed
// on arrival) and the model proxy (on the broker's streaming function URL,
// where the key is opened per request).
//
// The model proxy speaks the Anthropic Messages API under
// /v1/sessions/{id}/model, so a sandbox's ANTHROPIC_BASE_URL is that path
// and its API key is its session token. Its errors use Anthropic's shape,
// not the API's, because its clients are Anthropic clients: that is why its
// routes are RunKey access, checked here, and not a bearer route.
//
// Guarantees: the upstream key is sealed on arrival and opened per request;
// only the run's own session token spends the run's budget; every request
// is admitted before it is forwarded and reconciled after.
package model

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/modelproxy"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/ratelimit"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Config is what the model routes need.
type Config struct {
	route.Config
	// Sealer seals the upstream's credential (PUT /v1/model-upstream) and
	// opens it in the proxy; nil answers both 503.
	Sealer seal.Sealer
	// Prices prices model requests; nil is budget.DefaultPrices().
	Prices *budget.Prices
	// Client forwards proxied requests upstream; nil is a default that
	// dials only what Egress allows.
	Client *http.Client
	// Egress decides which addresses the model upstream may be at, when it
	// is set and at every dial of the default client; nil refuses every
	// internal address.
	Egress *egress.Guard
	// Halted, when set, is told of each run the proxy halted, after the
	// commit (the dev server's notifications; in AWS the table's stream
	// carries run.halted).
	Halted func(context.Context, store.Halted)
}

// budgetDeps is what the model endpoints use.
type budgetDeps struct {
	upstreams *modelproxy.Upstreams
	proxy     *modelproxy.Proxy
}

// Server serves the model routes.
type Server struct {
	budget budgetDeps
	keys   *route.SessionKeys
	limit  *ratelimit.Limiter
	log    *slog.Logger
}

// New builds the model routes' handlers.
func New(cfg Config) *Server {
	cfg.Config = cfg.Config.WithDefaults()
	st := cfg.Ledger.Store()
	admit := admission.New(cfg.Ledger, cfg.Prices, cfg.Now)
	upstreams := modelproxy.NewUpstreams(st, cfg.Sealer, cfg.Egress, cfg.Now)
	// The proxy asks the gate about a request's server tools; it holds no
	// request for a human, so the judge needs no approval service.
	judge := permission.NewService(cfg.Ledger, nil, nil, cfg.Logger, cfg.Now)
	halted := func(ctx context.Context, h store.Halted) {
		cfg.Telemetry.RunHalted(ctx, h.Reason)
		if cfg.Halted != nil {
			cfg.Halted(ctx, h)
		}
	}
	verify := modelproxy.NewVerifier(cfg.Ledger, run.NewService(cfg.Ledger, cfg.Now), halted, cfg.Logger, cfg.Now)
	proxy := modelproxy.New(admit, upstreams, judge, verify, cfg.Client, cfg.Logger)
	proxy.Record(cfg.Telemetry)
	return &Server{
		budget: budgetDeps{upstreams: upstreams, proxy: proxy},
		keys:   route.NewSessionKeys(st, cfg.Logger),
		// The model proxy takes the session token like every route of the
		// run, so its requests count against the same per-run limit.
		limit: ratelimit.New(st, cfg.RunRequestsPerMinute, cfg.Now),
		log:   cfg.Logger,
	}
}

// The core's helpers, under the names the handlers use.
var (
	writeJSON      = route.WriteJSON
	decode         = route.Decode
	invalid        = route.Invalid
	notFound       = route.NotFound
	conflict       = route.Conflict
	errUnavailable = route.ErrUnavailable
)

// notAnthropicPath answers every other Anthropic path 404 in Anthropic's
// error shape.
func notAnthropicPath(w http.ResponseWriter, _ *http.Request) {
	modelproxy.WriteError(w, http.StatusNotFound, "not_found_error", "fluidbox's model proxy serves POST /v1/messages only")
}
