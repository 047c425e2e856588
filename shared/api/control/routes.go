package control

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

// Routes gives the control rows: the approvals page, policies, capability
// bundles, runs and their ledger. Each row says who may call it and the
// function that serves it, and holds its handler and its documentation (the
// rest of it in operations.yaml).
func (s *Server) Routes() []route.Route {
	return []route.Route{
		// Liveness, the approvals page (static files that call this API).
		route.Liveness(route.Control, route.APIGateway, ""),
		{Pattern: "GET /{$}", Access: route.Public, Function: route.Control, Via: route.APIGateway,
			Handler: route.Raw(s.site.Page()),
			Doc:     doc("approvalsPage", "health", "The approvals page (HTML; its script app.js and style app.css sit beside it).")},
		{Pattern: "GET /app.js", Access: route.Public, Function: route.Control, Via: route.APIGateway,
			Handler: route.Raw(s.site.Script()),
			Doc:     doc("approvalsPageScript", "health", "The approvals page's script.")},
		{Pattern: "GET /app.css", Access: route.Public, Function: route.Control, Via: route.APIGateway,
			Handler: route.Raw(s.site.Style()),
			Doc:     doc("approvalsPageStyle", "health", "The approvals page's style sheet.")},
		{Pattern: "GET /render.js", Access: route.Public, Function: route.Control, Via: route.APIGateway,
			Handler: route.Raw(s.site.Render()),
			Doc:     doc("approvalsPageRender", "health", "The approvals page's rendering of a tool call (a mirror of the Go renderer shared/render).")},
		{Pattern: "GET /config.json", Access: route.Public, Function: route.Control, Via: route.APIGateway,
			Handler: route.Raw(s.site.ConfigJSON()),
			Doc:     doc("approvalsPageConfig", "health", "How the approvals page signs people in.")},
		// Policies and capability bundles.
		{Pattern: "POST /v1/policies", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.createPolicy),
			Doc:     doc("createPolicy", "policies", "Create a policy; its first version is 1.", 400, 401, 403, 413, 500, 503)},
		{Pattern: "GET /v1/policies", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.listPolicies),
			Doc:     doc("listPolicies", "policies", "Policies, newest first, each with its latest version (admin).", 400, 401, 403, 500, 503)},
		{Pattern: "GET /v1/policies/{id}", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.getPolicy),
			Doc:     doc("getPolicy", "policies", "The latest version of a policy.", 401, 403, 404, 500, 503)},
		{Pattern: "PUT /v1/policies/{id}", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.updatePolicy),
			Doc:     doc("putPolicy", "policies", "Add a new version (version + 1). Versions are immutable.", 400, 401, 403, 404, 409, 413, 500, 503)},
		{Pattern: "GET /v1/policies/{id}/versions/{n}", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.getPolicyVersion),
			Doc:     doc("getPolicyVersion", "policies", "One immutable version of a policy.", 400, 401, 403, 404, 500, 503)},
		{Pattern: "POST /v1/policies/{id}/evaluate", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.evaluatePolicy),
			Doc:     doc("evaluatePolicy", "policies", "Decide one call against the policy's latest version, writing nothing.", 400, 401, 403, 404, 500, 503)},
		{Pattern: "POST /v1/policies/{id}/versions/{n}/evaluate", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.evaluatePolicyVersion),
			Doc:     doc("evaluatePolicyVersion", "policies", "Decide one call against one version of a policy, writing nothing.", 400, 401, 403, 404, 500, 503)},
		{Pattern: "GET /v1/policies/{id}/shadow", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.policyShadow),
			Doc:     doc("getPolicyShadow", "policies", "Where this policy, run as a shadow, would have decided differently (admin).", 400, 401, 403, 404, 500, 503)},
		{Pattern: "POST /v1/capabilities", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.createCapability),
			Doc:     doc("createCapability", "capabilities", "Create a sandbox tool bundle.", 400, 401, 403, 409, 413, 500, 503)},
		{Pattern: "GET /v1/capabilities", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.listCapabilities),
			Doc:     doc("listCapabilities", "capabilities", "List bundles, including the built-in `claude-code`.", 401, 403, 500, 503)},
		{Pattern: "GET /v1/capabilities/{id}", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.getCapability),
			Doc:     doc("getCapability", "capabilities", "", 401, 403, 404, 500, 503)},
		// Runs and their ledger.
		{Pattern: "POST /v1/sessions", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.createSession),
			Doc:     doc("createSession", "sessions", "Create a run; freezes tools, bindings, policy, trust tier, autonomy and budget.", 400, 401, 403, 404, 413, 500, 503)},
		{Pattern: "GET /v1/sessions/{id}", Access: route.RunScoped, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.getSession),
			Doc:     doc("getSession", "sessions", "", 401, 403, 404, 500, 503)},
		{Pattern: "POST /v1/sessions/{id}/end", Access: route.Reporters, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.endSession),
			Doc:     doc("endSession", "sessions", "End the run; the gate then denies everything with source `session`.", 400, 401, 403, 404, 500, 503)},
		{Pattern: "GET /v1/sessions/{id}/events", Access: route.Reviewers, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.events),
			Doc:     doc("listSessionEvents", "sessions", "The run's ledger after `after`, in order; long-poll or SSE.", 400, 401, 403, 404, 500, 503)},
		{Pattern: "GET /v1/sessions", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.listSessions),
			Doc:     doc("listSessions", "sessions", "Runs, newest first, filtered by status, trigger, repository and creation time (admin).", 400, 401, 403, 500, 503)},
		// A triggered run's tokens, issued once to whoever drives it.
		{Pattern: "POST /v1/sessions/{id}/token", Access: route.Issuers, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.issueToken),
			Doc:     doc("issueSessionToken", "sessions", "Issue the session and runner tokens of a triggered run, once.", 401, 403, 404, 409, 500, 503)},
	}
}
