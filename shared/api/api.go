// Package api is fluidbox's whole HTTP API as one handler: every route row
// of every handler package (Surface) on one listener, each served by the
// same handler package the Lambda function of its row mounts. It is what
// `fluidbox dev` serves and what the HTTP tests drive; no Lambda function
// imports it, because each links only its own routes' packages
// (functions/<name>/main.go).
//
// The packages below it:
//
//	route        a route row, access kinds, authentication, errors, the mux
//	surface      what is generated from the rows (go generate, below)
//	control      policies, capability bundles, runs and events, the page (control)
//	runner       permission, admissions, usage (gate)
//	approvals    approvals and session grants (approvals)
//	connections  connections, their tools and OAuth (broker)
//	model        the model upstream and the model proxy (broker)
//	triggers     trigger configurations (control) and the GitHub webhook (github)
//	members      members (control) and the SSO user authenticator
//	workspaces   the GitHub App, a run's workspace and its report (broker)
//
// Each handler package lists its rows in routes.go, the rest of their
// OpenAPI operations in operations.yaml beside it.
//
//go:generate go run ./surface/generate -root ../..
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/approvals"
	"github.com/fluidbox/fluidbox/shared/api/connections"
	"github.com/fluidbox/fluidbox/shared/api/control"
	"github.com/fluidbox/fluidbox/shared/api/members"
	"github.com/fluidbox/fluidbox/shared/api/model"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/runner"
	"github.com/fluidbox/fluidbox/shared/api/triggers"
	"github.com/fluidbox/fluidbox/shared/api/workspaces"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/sso"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/telemetry"
)

// Config is what the whole API needs.
type Config struct {
	AdminToken string
	Ledger     *ledger.Ledger
	Logger     *slog.Logger
	Now        func() time.Time
	// SSEMaxDuration bounds one event-stream response; 0 streams until the
	// client leaves.
	SSEMaxDuration time.Duration
	// Scheduler arranges each new approval's expiry.
	Scheduler approval.Scheduler
	// Observer, when set, is told of every committed approval transition
	// (the dev server prints them as notifications).
	Observer approval.Observer
	// InputObserver, when set, is told of every committed input request
	// transition (the dev server prints and posts them).
	InputObserver elicitation.Observer
	// GitHubWebhookSecret verifies POST /v1/triggers/github deliveries.
	// Empty: every delivery is refused.
	GitHubWebhookSecret string
	// RunCreated, when set, is told of each run a trigger created.
	RunCreated func(context.Context, store.Head)
	// Halted, when set, is told of each run the model proxy halted.
	Halted func(context.Context, store.Halted)
	// OIDC, when set, is SSO mode: a bearer that is neither the admin token
	// nor a session token is verified as a JWT from the issuer (members).
	OIDC *sso.Verifier
	// Prices prices model requests; nil is budget.DefaultPrices().
	Prices *budget.Prices
	// Sealer seals and opens the model upstream's and the connections'
	// credentials; nil answers what needs it 503 (reading and revoking
	// connections need no key).
	Sealer seal.Sealer
	// UpstreamToolsTTL is how long the broker may trust its last look at an
	// upstream's tool list; 0 looks on every brokered call.
	UpstreamToolsTTL time.Duration
	// ModelClient forwards model-proxy requests upstream; nil is a default.
	ModelClient *http.Client
	// Slack, with a signing secret, serves Slack's interactions; SlackAPI
	// is the Slack client they call (nil: one built from Slack).
	Slack    slackbot.Config
	SlackAPI slackbot.API
	// MaxPendingApprovals is how many approvals one run may have waiting
	// (FLUIDBOX_MAX_PENDING_APPROVALS); 0 is gate.DefaultMaxPendingApprovals.
	MaxPendingApprovals int
	// Egress decides which addresses connection and model-upstream URLs
	// may reach (FLUIDBOX_CONNECTION_ALLOW_CIDRS); nil refuses every
	// internal address, loopback included.
	Egress *egress.Guard
	// RunRequestsPerMinute bounds the requests one run's session token may
	// make per minute (FLUIDBOX_RUN_REQUESTS_PER_MINUTE); 0 is
	// ratelimit.DefaultPerMinute.
	RunRequestsPerMinute int
	// RunMaxOpenRequests bounds the requests one run's session token may
	// have open at once (FLUIDBOX_RUN_MAX_OPEN_REQUESTS); 0 is
	// ratelimit.DefaultMaxOpen.
	RunMaxOpenRequests int
	// PublicURL is the API's public base URL (FLUIDBOX_PUBLIC_URL): the
	// OAuth redirect URI and client metadata document live under it. Empty:
	// the request's host.
	PublicURL string
	// Telemetry records spans and metrics; nil is off.
	Telemetry *telemetry.Telemetry
}

// Build builds the handler of every route.
func Build(cfg Config) (*route.Server, error) {
	base, groups := build(cfg)
	return route.New(base, route.Everything, groups...)
}

// build is every handler package, built from cfg: in SSO mode the members
// package authenticates people for all of them.
func build(cfg Config) (route.Config, []route.Group) {
	base := route.Config{AdminToken: cfg.AdminToken, Ledger: cfg.Ledger, Logger: cfg.Logger, Now: cfg.Now, RunRequestsPerMinute: cfg.RunRequestsPerMinute, RunMaxOpenRequests: cfg.RunMaxOpenRequests, Telemetry: cfg.Telemetry}.WithDefaults()
	people := members.New(members.Config{Config: base, OIDC: cfg.OIDC})
	if cfg.OIDC != nil {
		base.Users = people
	}
	return base, []route.Group{
		control.New(control.Config{Config: base, SSEMaxDuration: cfg.SSEMaxDuration, Page: control.PageConfig(cfg.OIDC)}),
		runner.New(runner.Config{Config: base, Scheduler: cfg.Scheduler, Observer: cfg.Observer, Prices: cfg.Prices, MaxPendingApprovals: cfg.MaxPendingApprovals}),
		approvals.New(approvals.Config{Config: base, Observer: cfg.Observer, InputObserver: cfg.InputObserver, Slack: cfg.Slack, SlackAPI: cfg.SlackAPI}),
		connections.New(connections.Config{Config: base, Sealer: cfg.Sealer, UpstreamToolsTTL: cfg.UpstreamToolsTTL, Scheduler: cfg.Scheduler, Observer: cfg.Observer, InputObserver: cfg.InputObserver, MaxPendingApprovals: cfg.MaxPendingApprovals, Egress: cfg.Egress, BaseURL: fixedURL(cfg.PublicURL)}),
		model.New(model.Config{Config: base, Sealer: cfg.Sealer, Prices: cfg.Prices, Client: cfg.ModelClient, Egress: cfg.Egress, Halted: cfg.Halted}),
		triggers.New(triggers.Config{Config: base, GitHubWebhookSecret: cfg.GitHubWebhookSecret, RunCreated: cfg.RunCreated}),
		workspaces.New(workspaces.Config{Config: base, Sealer: cfg.Sealer, Egress: cfg.Egress}),
		people,
	}
}

// Surface is every row of every handler package, in the order the
// reference lists them: what `go generate` writes docs/openapi.yaml's
// paths, template.yaml's Api events and docs/api.md's route index from,
// and what each function's test holds its handler to. Its handlers are
// built over a store that is never dialled; serve Build's.
func Surface() []route.Route {
	st := store.New(nil, "surface")
	_, groups := build(Config{Ledger: ledger.New(st, time.Now)})
	var rows []route.Route
	for _, g := range groups {
		rows = append(rows, g.Routes()...)
	}
	return rows
}

// New is Build for callers that cannot fail: if the handler packages and
// the route table disagree (a programming error Build's test catches), it
// answers every request 500 and logs why, so nothing is served unchecked.
func New(cfg Config) http.Handler {
	s, err := Build(cfg)
	if err == nil {
		return s
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Error("api: the handlers do not match the route table", "err", err)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		route.WriteError(w, route.ErrInternal)
	})
}

// fixedURL is a connections.Config.BaseURL always answering u; nil when u
// is empty (the request's host).
func fixedURL(u string) func(*http.Request) string {
	if u == "" {
		return nil
	}
	return func(*http.Request) string { return u }
}
