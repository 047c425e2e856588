// Package control serves the control function's own routes (route.Table,
// Function Control): policies, capability bundles, runs and their event
// streams, and the approvals page. The control function also mounts the
// control rows of connections, model, triggers and members.
//
// Guarantees: a policy or bundle is stored only once it parses and
// validates, as immutable versions; a run is created only through
// run.Service, everything it may do frozen at creation; an event stream
// resumes exactly after Last-Event-ID.
package control

import (
	"log/slog"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/web"
)

// Config is what the control routes need.
type Config struct {
	route.Config
	// SSEMaxDuration bounds one event-stream response; 0 streams until the
	// client leaves. Behind API Gateway (which buffers a Lambda's response)
	// it is short, and clients resume with Last-Event-ID.
	SSEMaxDuration time.Duration
}

// Server serves the control routes.
type Server struct {
	cfg  Config
	st   *store.Store
	led  *ledger.Ledger
	runs *run.Service
	log  *slog.Logger
}

// New builds the control routes' handlers.
func New(cfg Config) *Server {
	cfg.Config = cfg.Config.WithDefaults()
	return &Server{
		cfg:  cfg,
		st:   cfg.Ledger.Store(),
		led:  cfg.Ledger,
		runs: run.NewService(cfg.Ledger, cfg.Now),
		log:  cfg.Logger,
	}
}

// Endpoints gives the handler of each control row. The approvals page
// needs no token to load: it asks the user for one and calls the API with
// it like any other client.
func (s *Server) Endpoints() route.Endpoints {
	return route.Endpoints{
		"GET /{$}":                           route.Raw(web.Page()),
		"GET /app.js":                        route.Raw(web.Script()),
		"GET /app.css":                       route.Raw(web.Style()),
		"POST /v1/policies":                  route.Authenticated(s.createPolicy),
		"GET /v1/policies/{id}":              route.Authenticated(s.getPolicy),
		"PUT /v1/policies/{id}":              route.Authenticated(s.updatePolicy),
		"GET /v1/policies/{id}/versions/{n}": route.Authenticated(s.getPolicyVersion),
		"POST /v1/capabilities":              route.Authenticated(s.createCapability),
		"GET /v1/capabilities":               route.Authenticated(s.listCapabilities),
		"GET /v1/capabilities/{id}":          route.Authenticated(s.getCapability),
		"POST /v1/sessions":                  route.Authenticated(s.createSession),
		"GET /v1/sessions/{id}":              route.Authenticated(s.getSession),
		"POST /v1/sessions/{id}/end":         route.Authenticated(s.endSession),
		"GET /v1/sessions/{id}/events":       route.Authenticated(s.events),
	}
}

// The core's helpers, under the names the handlers use.
var (
	writeJSON   = route.WriteJSON
	decode      = route.Decode
	readBody    = route.ReadBody
	invalid     = route.Invalid
	notFound    = route.NotFound
	conflict    = route.Conflict
	runID       = route.RunID
	waitSeconds = route.WaitSeconds
)
