// Package runner serves the gate function's routes (routes.go, Function
// Gate): what a run's runner calls on every tool call and model request —
// the permission gate and budget admission and reconciliation. Every route
// is Runner access: the run's own session token, or the admin token.
//
// Guarantees: the import graph holds no MCP, OIDC or KMS code (a gate that
// cannot read a secret cannot leak one; functions/gate's test lists the
// forbidden packages); a decision comes only from permission.Service, so
// every failure it can reach ends in deny or 503, never allow.
package runner

import (
	"log/slog"

	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/permission"
)

// Config is what the gate's routes need.
type Config struct {
	route.Config
	// Scheduler arranges each new approval's expiry; nil is approval.Lazy
	// (lazy expiry on read and the sweep).
	Scheduler approval.Scheduler
	// Observer, when set, is told of every committed approval transition.
	Observer approval.Observer
	// MaxPendingApprovals is how many approvals one run may have waiting;
	// 0 is gate.DefaultMaxPendingApprovals. Past it a require_approval is
	// denied (source approval_limit).
	MaxPendingApprovals int
	// Prices prices admissions; nil is budget.DefaultPrices().
	Prices *budget.Prices
}

// Server serves the gate's routes.
type Server struct {
	cfg    Config
	perm   *permission.Service
	budget budgetDeps
	log    *slog.Logger
}

// New builds the gate's handlers.
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
	return &Server{
		cfg:    cfg,
		perm:   perm,
		budget: budgetDeps{admit: admission.New(cfg.Ledger, cfg.Prices, cfg.Now)},
		log:    cfg.Logger,
	}
}

// The core's helpers, under the names the handlers use.
var (
	writeJSON   = route.WriteJSON
	decode      = route.Decode
	invalid     = route.Invalid
	notFound    = route.NotFound
	conflict    = route.Conflict
	runID       = route.RunID
	waitSeconds = route.WaitSeconds
)
