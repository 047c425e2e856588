package api

import (
	"net/http"

	"github.com/fluidbox/fluidbox/shared/slackbot"
)

var errSlackOff = &Error{http.StatusServiceUnavailable, "unavailable", "Slack is not configured on this control plane (FLUIDBOX_SLACK_SIGNING_SECRET and friends)"}

// slackRoutes serves Slack's interactivity requests. The route takes no
// bearer: Slack signs each request, and slackbot.Interactions checks that
// signature before it reads or writes anything.
func (s *Server) slackRoutes() {
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeError(w, errSlackOff) })
	if s.cfg.Slack.SigningSecret != "" {
		api := s.cfg.SlackAPI
		if api == nil {
			api = slackbot.NewClient(s.cfg.Slack)
		}
		h = slackbot.NewInteractions(s.cfg.Slack, api, s.approvals, s.st, s.st, s.log, s.cfg.Now)
	}
	s.mux.Handle("POST /v1/integrations/slack/interactions", h)
}
