package members

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

// Routes gives the members rows. Each row says who may call it and the
// function that serves it, and holds its handler and its documentation (the
// rest of it in operations.yaml).
func (s *Server) Routes() []route.Route {
	return []route.Route{
		// Members (SSO mode): who has been seen, and the admin's off switch.
		{Pattern: "GET /v1/members", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.listMembers),
			Doc:     doc("listMembers", "members", "SSO users seen so far, by sub (admin only).", 401, 403, 500, 503)},
		{Pattern: "POST /v1/members/{sub}/deactivate", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.deactivateMember),
			Doc:     doc("deactivateMember", "members", "Refuse a member on every request from now on, whatever its token (admin only).", 401, 403, 404, 409, 500, 503)},
		{Pattern: "POST /v1/members/{sub}/activate", Access: route.Admin, Function: route.Control, Via: route.APIGateway,
			Handler: route.Authenticated(s.activateMember),
			Doc:     doc("activateMember", "members", "Let a deactivated member back in (admin only).", 401, 403, 404, 500, 503)},
	}
}
