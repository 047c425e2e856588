// Package members serves the members routes (routes.go, Function
// Control) and is the SSO user authenticator (route.UserAuthenticator) of
// every function that serves people: a person's JWT is verified by the
// identity provider's keys (package sso), and then by fluidbox's own
// switch, the member record an admin can deactivate.
//
// Guarantees: a deactivated member is refused on every request however
// fresh its token; a token whose sub names the operator, the system or a
// trigger is refused; a failure to read the member record is 503, never a
// pass.
package members

import (
	"log/slog"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/sso"
	"github.com/fluidbox/fluidbox/shared/store"
)

// Config is what the members routes and the authenticator need.
type Config struct {
	route.Config
	// OIDC verifies people's JWTs. Make the Server a function's
	// route.Config.Users only when it is set (SSO mode).
	OIDC *sso.Verifier
}

// Server serves the members routes and authenticates people.
type Server struct {
	cfg Config
	st  *store.Store
	log *slog.Logger
}

var _ route.UserAuthenticator = (*Server)(nil)

// New builds the members routes' handlers and the authenticator.
func New(cfg Config) *Server {
	cfg.Config = cfg.Config.WithDefaults()
	return &Server{cfg: cfg, st: cfg.Ledger.Store(), log: cfg.Logger}
}

// The core's helpers, under the names the handlers use.
var (
	writeJSON          = route.WriteJSON
	notFound           = route.NotFound
	conflict           = route.Conflict
	errUnauthenticated = route.ErrUnauthenticated
	errUnavailable     = route.ErrUnavailable
)
