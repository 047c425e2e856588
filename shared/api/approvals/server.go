// Package approvals serves the approvals function's routes (route.Table,
// Function Approvals): the humans' side of the gate — pending approvals,
// one approval, deciding it, a run's approvals and its session grants.
//
// Guarantees: an approval moves only through approval.Service's
// compare-and-swap (pending -> settled, once; expiry is deny), and who may
// decide is approval.MayDecide's answer, asked after route.Deciders has
// let any signed-in person through. The same answer, row by row, makes the
// caller's inbox (GET /v1/approvals) and says who reads one approval.
package approvals

import (
	"log/slog"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/telemetry"
)

// Config is what the approvals routes need.
type Config struct {
	route.Config
	// Observer, when set, is told of every committed approval transition
	// (the dev server prints them as notifications).
	Observer approval.Observer
	// InputObserver, when set, is told of every committed input request
	// transition.
	InputObserver elicitation.Observer
	// Slack, with a signing secret, serves Slack's interactions (approve
	// and deny from a message); SlackAPI is the Slack client it calls (nil:
	// one built from Slack).
	Slack    slackbot.Config
	SlackAPI slackbot.API
}

// Server serves the approvals routes.
type Server struct {
	st        *store.Store
	runs      *run.Service
	approvals *approval.Service
	inputs    *elicitation.Service
	log       *slog.Logger
	tel       *telemetry.Telemetry
	// slack answers POST /v1/integrations/slack/interactions.
	slack http.Handler
}

// New builds the approvals routes' handlers.
func New(cfg Config) *Server {
	cfg.Config = cfg.Config.WithDefaults()
	s := &Server{
		st:        cfg.Ledger.Store(),
		runs:      run.NewService(cfg.Ledger, cfg.Now),
		approvals: approval.NewService(cfg.Ledger, cfg.Now),
		inputs:    elicitation.NewService(cfg.Ledger, cfg.Now, cfg.Logger),
		log:       cfg.Logger,
		tel:       cfg.Telemetry,
	}
	if cfg.Observer != nil {
		s.approvals.Observe(cfg.Observer)
	}
	if cfg.InputObserver != nil {
		s.inputs.Observe(cfg.InputObserver)
	}
	// The interactions route takes no bearer: Slack signs each request,
	// and slackbot.Interactions checks the signature before it reads or
	// writes anything.
	s.slack = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { route.WriteError(w, errSlackOff) })
	if cfg.Slack.SigningSecret != "" {
		api := cfg.SlackAPI
		if api == nil {
			api = slackbot.NewClient(cfg.Slack)
		}
		s.slack = slackbot.NewInteractions(cfg.Slack, api, s.approvals, s.st, s.st, s.log, cfg.Now).WithInputs(s.inputs)
	}
	return s
}

var errSlackOff = &route.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "Slack is not configured on this control plane (FLUIDBOX_SLACK_SIGNING_SECRET and friends)"}

// The core's helpers, under the names the handlers use.
var (
	writeJSON    = route.WriteJSON
	decode       = route.Decode
	invalid      = route.Invalid
	notFound     = route.NotFound
	runID        = route.RunID
	errForbidden = route.ErrForbidden
)
