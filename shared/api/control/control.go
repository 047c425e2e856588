// Package control serves the control function's own routes (routes.go,
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
	"github.com/fluidbox/fluidbox/shared/sso"
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
	// Page is the approvals page's configuration (PageConfig).
	Page web.Config
}

// PageConfig is the approvals page's configuration: with SSO (v not nil)
// it signs people in with v's issuer, else it asks for the admin token.
func PageConfig(v *sso.Verifier) web.Config {
	if v == nil {
		return web.Config{}
	}
	b := v.BrowserSignIn()
	return web.Config{OIDC: &web.OIDC{
		Issuer: b.Issuer, ClientID: b.ClientID, RolesClaim: b.RolesClaim,
		AuthorizationEndpoint: b.AuthorizationEndpoint, TokenEndpoint: b.TokenEndpoint,
	}}
}

// Server serves the control routes.
type Server struct {
	cfg  Config
	st   *store.Store
	led  *ledger.Ledger
	runs *run.Service
	log  *slog.Logger
	site *web.Site
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
		site: web.New(cfg.Page),
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
