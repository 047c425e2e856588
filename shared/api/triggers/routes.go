package triggers

import (
	_ "embed"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/api/route"
)

// operations holds the rest of each row's OpenAPI operation, by operation
// id (route.DocIn).
//
//go:embed operations.yaml
var operations string

var doc = route.DocIn(operations)

// Routes gives the trigger rows: configurations (control) and GitHub's
// deliveries (github). Each row says who may call it and the function that
// serves it, and holds its handler and its documentation (the rest of it in
// operations.yaml).
func (s *Server) Routes() []route.Route {
	return []route.Route{
		// Triggers: configurations (admin), and GitHub's deliveries, signed,
		// on a function of their own that holds the webhook secret.
		{Pattern: "POST /v1/triggers", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.createTrigger),
			Doc:     doc("createTrigger", "triggers", "Configure which run a repository's pull requests start (admin).", 400, 401, 403, 409, 413, 500, 503)},
		{Pattern: "GET /v1/triggers", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.listTriggers),
			Doc:     doc("listTriggers", "triggers", "Trigger configurations, newest first (admin).", 400, 401, 403, 500, 503)},
		{Pattern: "GET /v1/triggers/{id}", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.getTrigger),
			Doc:     doc("getTrigger", "triggers", "One trigger configuration (admin).", 401, 403, 404, 500, 503)},
		{Pattern: "PUT /v1/triggers/{id}", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.updateTrigger),
			Doc:     doc("updateTrigger", "triggers", "Replace a trigger configuration (admin).", 400, 401, 403, 404, 409, 413, 500, 503)},
		{Pattern: "DELETE /v1/triggers/{id}", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.deleteTrigger),
			Doc:     doc("deleteTrigger", "triggers", "Delete a trigger configuration (admin); its repository's deliveries are then ignored.", 401, 403, 404, 500, 503)},
		{Pattern: "POST /v1/triggers/github", Access: route.Signed, Function: route.GitHub, Via: route.APIGateway,
			Handler: route.Raw(http.HandlerFunc(s.githubWebhook)),
			Doc:     doc("githubWebhook", "triggers", "GitHub webhook delivery; a pull_request (opened, synchronize, reopened) creates a run.", 400, 401, 413, 500, 503)},
	}
}
