package workspaces

import (
	_ "embed"

	"github.com/fluidbox/fluidbox/shared/api/route"
)

// operations holds the rest of each row's OpenAPI operation, by operation
// id (route.DocIn).
//
//go:embed operations.yaml
var operations string

var doc = route.DocIn(operations)

// Routes gives the rows of a run's code: the GitHub App, a run's workspace
// and its report. Each row says who may call it and the function that serves
// it, and holds its handler and its documentation (the rest of it in
// operations.yaml).
func (s *Server) Routes() []route.Route {
	return []route.Route{
		// A run's workspace: the frozen commit, fetched with the GitHub App's
		// installation token, which only the broker may open; on the function
		// URL, which carries a binary body of any size API Gateway would cut.
		{Pattern: "GET /v1/sessions/{id}/workspace", Access: route.Runner, Function: route.Broker, Via: route.FunctionURL,
			Handler: route.Authenticated(s.workspace),
			Doc:     doc("getSessionWorkspace", "sessions", "The archive of the commit the run froze (the run's session token).", 401, 403, 404, 409, 413, 500, 503)},
		// The report back to the pull request once the run ended: the
		// control plane's act (the text is the stored result), with a token
		// the broker mints; the runner token only asks for it.
		{Pattern: "POST /v1/sessions/{id}/report", Access: route.Reporters, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.report),
			Doc:     doc("reportSession", "sessions", "Post an ended run's result to its pull request, as the trigger's `report` says (runner token or admin).", 401, 403, 404, 409, 500, 503)},
		// The GitHub App that fetches workspaces and reports: its key sealed
		// and opened by the broker alone.
		{Pattern: "PUT /v1/github-app", Access: route.Admin, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.putApp),
			Doc:     doc("putGitHubApp", "triggers", "Set the GitHub App that fetches workspaces, its private key sealed at once.", 400, 401, 403, 409, 413, 500, 503)},
		{Pattern: "GET /v1/github-app", Access: route.Admin, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.getApp),
			Doc:     doc("getGitHubApp", "triggers", "The GitHub App setting, without its key.", 401, 403, 404, 500, 503)},
	}
}
