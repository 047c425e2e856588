package approvals

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

// Routes gives the approvals rows: approvals, session grants and Slack's
// clicks. Each row says who may call it and the function that serves it, and
// holds its handler and its documentation (the rest of it in
// operations.yaml).
func (s *Server) Routes() []route.Route {
	return []route.Route{
		// Approvals and session grants. The approval's id is {approval}, not
		// {id}: {id} is always a run, the one a session token is checked on.
		{Pattern: "GET /v1/approvals", Access: route.Deciders, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Authenticated(s.listPendingApprovals),
			Doc:     doc("listPendingApprovals", "approvals", "The caller's inbox, the pending approvals they may decide, oldest first, a page at a time.", 401, 403, 500, 503)},
		{Pattern: "GET /v1/approvals/{approval}", Access: route.Deciders, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Authenticated(s.getApproval),
			Doc:     doc("getApproval", "approvals", "One approval, for whoever may decide it (the operator and admins, any); anyone else is 403.", 401, 403, 404, 500, 503).At("/v1/approvals/{id}")},
		{Pattern: "POST /v1/approvals/{approval}/decision", Access: route.Deciders, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Authenticated(s.decideApproval),
			Doc:     doc("decideApproval", "approvals", "Decide a pending approval (compare-and-swap; only pending moves, once).", 400, 401, 403, 404, 500, 503).At("/v1/approvals/{id}/decision")},
		{Pattern: "GET /v1/sessions/{id}/approvals", Access: route.RunScoped, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Authenticated(s.listRunApprovals),
			Doc:     doc("listSessionApprovals", "approvals", "All of the run's approvals, any status.", 401, 403, 404, 500, 503)},
		// Input requests: links an upstream asked a person to open mid-call.
		// The id is {input_request}, not {id}, for the same reason.
		{Pattern: "GET /v1/input-requests", Access: route.Deciders, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Authenticated(s.listInputRequests),
			Doc:     doc("listInputRequests", "approvals", "The caller's pending input requests (links upstreams asked a person to open mid-call), oldest first.", 400, 401, 403, 500, 503)},
		{Pattern: "GET /v1/input-requests/{input_request}", Access: route.Deciders, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Authenticated(s.getInputRequest),
			Doc:     doc("getInputRequest", "approvals", "One input request, for whoever may answer it (the operator and admins, any); anyone else is 403.", 401, 403, 404, 500, 503).At("/v1/input-requests/{id}")},
		{Pattern: "POST /v1/input-requests/{input_request}/decision", Access: route.Deciders, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Authenticated(s.decideInputRequest),
			Doc:     doc("decideInputRequest", "approvals", "Answer a pending input request (compare-and-swap; only pending moves, once).", 400, 401, 403, 404, 500, 503).At("/v1/input-requests/{id}/decision")},
		{Pattern: "GET /v1/sessions/{id}/grants", Access: route.RunScoped, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Authenticated(s.listGrants),
			Doc:     doc("listGrants", "approvals", "The run's session grants (from `approved_session` decisions).", 401, 403, 404, 500, 503)},
		{Pattern: "DELETE /v1/sessions/{id}/grants/{scope_key...}", Access: route.Admin, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Authenticated(s.revokeGrant),
			Doc:     doc("revokeGrant", "approvals", "Revoke the grants of this scope key, under every rule; later matching calls ask again.", 401, 403, 404, 500, 503)},
		// Slack's clicks on an approval message, signed by Slack.
		{Pattern: "POST /v1/integrations/slack/interactions", Access: route.Signed, Function: route.Approvals, Via: route.APIGateway,
			Handler: route.Raw(s.slack),
			Doc:     doc("slackInteractions", "approvals", "Slack's interactivity requests: approve once, approve for run, deny with a reason (approval messages); done, decline (input request messages).", 400, 401, 409, 413, 503)},
	}
}
