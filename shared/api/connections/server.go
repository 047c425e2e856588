// Package connections serves the routes of upstream MCP servers
// (routes.go, Function Broker): creating, reading, replacing and revoking a
// connection, and the routes that open its credential or talk to its OAuth
// provider: refreshing its tools, a brokered tools/call, starting an OAuth
// authorization and its callback. Only the broker mounts it: it links the
// MCP client and the OAuth token exchange, which no other function does.
//
// Guarantees: a credential is sealed the moment it arrives and never
// returned; every error body is built here or by packages whose error
// texts never hold a credential (seal, broker); reading and revoking need
// no key, so revoking works while KMS is down.
package connections

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/runner"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/connection"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/permission"
	"github.com/fluidbox/fluidbox/shared/seal"
)

// Config is what the connection routes need.
type Config struct {
	route.Config
	// Sealer seals credentials (create, replace) and opens them (refresh,
	// tools/call); nil answers those 503.
	Sealer seal.Sealer
	// UpstreamToolsTTL is how long the broker may trust its last look at an
	// upstream's tool list; 0 looks on every brokered call.
	UpstreamToolsTTL time.Duration
	// Scheduler arranges the expiry of approvals a brokered call files;
	// nil is approval.Lazy.
	Scheduler approval.Scheduler
	// Observer, when set, is told of every committed approval transition,
	// InputObserver of every input request transition.
	Observer      approval.Observer
	InputObserver elicitation.Observer
	// MaxPendingApprovals is how many approvals one run may have waiting;
	// 0 is gate.DefaultMaxPendingApprovals. Past it a require_approval is
	// denied (source approval_limit).
	MaxPendingApprovals int
	// BaseURL gives the API's public base URL (<ApiUrl>) for a request:
	// the OAuth redirect URI is BaseURL+CallbackPath, the client metadata
	// document's URL BaseURL+ClientMetadataPath. nil derives it from the
	// request's host.
	BaseURL func(*http.Request) string
	// OAuthClient talks to OAuth providers; nil dials through Egress.
	OAuthClient *http.Client
	// Egress decides which addresses connection URLs may reach, at creation
	// and at every dial; nil refuses every internal address.
	Egress *egress.Guard
}

// Server serves the connection routes.
type Server struct {
	cfg    Config
	conns  *connection.Service
	broker *connection.Broker
	log    *slog.Logger
}

// New builds the connection routes' handlers.
func New(cfg Config) *Server {
	cfg.Config = cfg.Config.WithDefaults()
	if cfg.Scheduler == nil {
		cfg.Scheduler = approval.Lazy{}
	}
	approvals := approval.NewService(cfg.Ledger, cfg.Now)
	if cfg.Observer != nil {
		approvals.Observe(cfg.Observer)
	}
	perm := permission.NewService(cfg.Ledger, approvals, cfg.Scheduler, cfg.Logger, cfg.Now)
	perm.LimitPending(cfg.MaxPendingApprovals)
	conns := connection.NewService(cfg.Ledger.Store(), cfg.Sealer, connection.Options{
		Now: cfg.Now, UpstreamToolsTTL: cfg.UpstreamToolsTTL, OAuthClient: cfg.OAuthClient, Logger: cfg.Logger, Egress: cfg.Egress,
	})
	broker := connection.NewBroker(conns, perm, cfg.Logger)
	if cfg.InputObserver != nil {
		broker.ObserveInputs(cfg.InputObserver)
	}
	return &Server{cfg: cfg, conns: conns, broker: broker, log: cfg.Logger}
}

// The core's helpers, under the names the handlers use.
var (
	writeJSON             = route.WriteJSON
	decode                = route.Decode
	invalid               = route.Invalid
	notFound              = route.NotFound
	conflict              = route.Conflict
	errUnavailable        = route.ErrUnavailable
	readPermissionRequest = runner.ReadPermissionRequest
)
