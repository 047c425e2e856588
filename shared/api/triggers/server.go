// Package triggers serves the trigger routes (routes.go): trigger
// configurations (Function Control, admin) and GitHub's webhook deliveries
// (Function GitHub, which holds the webhook secret and no admin token, and
// authenticates each delivery by its signature: route.Signed).
//
// Guarantees: nothing of a delivery is parsed or written before its
// signature is checked over the exact bytes read; one delivery creates at
// most one run; a trigger-created run's tier comes from the payload and the
// configuration can only narrow it.
package triggers

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Config is what the trigger routes need.
type Config struct {
	route.Config
	// GitHubWebhookSecret verifies POST /v1/triggers/github deliveries
	// (FLUIDBOX_GITHUB_WEBHOOK_SECRET). Empty: every delivery is refused.
	GitHubWebhookSecret string
	// RunCreated, when set, is told of each run a delivery created (the
	// dev server publishes session.created with it; in AWS the notify
	// function reads the head's insert from the table's stream).
	RunCreated func(context.Context, store.Head)
}

// Server serves the trigger routes.
type Server struct {
	cfg  Config
	st   *store.Store
	runs *run.Service
	log  *slog.Logger
}

// New builds the trigger routes' handlers.
func New(cfg Config) *Server {
	cfg.Config = cfg.Config.WithDefaults()
	return &Server{cfg: cfg, st: cfg.Ledger.Store(), runs: run.NewService(cfg.Ledger, cfg.Now), log: cfg.Logger}
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	route.Fail(s.log, w, r, err)
}

// The core's helpers, under the names the handlers use.
var (
	writeJSON   = route.WriteJSON
	decode      = route.Decode
	readBody    = route.ReadBody
	readBodyMax = route.ReadBodyMax
	invalid     = route.Invalid
	notFound    = route.NotFound
	conflict    = route.Conflict
)
