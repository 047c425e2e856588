// Package approvals serves the approvals function's routes (route.Table,
// Function Approvals): the humans' side of the gate — pending approvals,
// one approval, deciding it, a run's approvals and its session grants.
//
// Guarantees: an approval moves only through approval.Service's
// compare-and-swap (pending -> settled, once; expiry is deny), and who may
// decide is approval.MayDecide's answer, asked after route.Deciders has
// let any signed-in person through.
package approvals

import (
	"log/slog"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Config is what the approvals routes need.
type Config struct {
	route.Config
	// Observer, when set, is told of every committed approval transition
	// (the dev server prints them as notifications).
	Observer approval.Observer
}

// Server serves the approvals routes.
type Server struct {
	st        *store.Store
	runs      *run.Service
	approvals *approval.Service
	log       *slog.Logger
}

// New builds the approvals routes' handlers.
func New(cfg Config) *Server {
	cfg.Config = cfg.Config.WithDefaults()
	s := &Server{
		st:        cfg.Ledger.Store(),
		runs:      run.NewService(cfg.Ledger, cfg.Now),
		approvals: approval.NewService(cfg.Ledger, cfg.Now),
		log:       cfg.Logger,
	}
	if cfg.Observer != nil {
		s.approvals.Observe(cfg.Observer)
	}
	return s
}

// Endpoints gives the handler of each approvals row.
func (s *Server) Endpoints() route.Endpoints {
	return route.Endpoints{
		"GET /v1/approvals":                              route.Authenticated(s.listPendingApprovals),
		"GET /v1/approvals/{approval}":                   route.Authenticated(s.getApproval),
		"POST /v1/approvals/{approval}/decision":         route.Authenticated(s.decideApproval),
		"GET /v1/sessions/{id}/approvals":                route.Authenticated(s.listRunApprovals),
		"GET /v1/sessions/{id}/grants":                   route.Authenticated(s.listGrants),
		"DELETE /v1/sessions/{id}/grants/{scope_key...}": route.Authenticated(s.revokeGrant),
	}
}

// The core's helpers, under the names the handlers use.
var (
	writeJSON    = route.WriteJSON
	decode       = route.Decode
	invalid      = route.Invalid
	notFound     = route.NotFound
	runID        = route.RunID
	errForbidden = route.ErrForbidden
)
