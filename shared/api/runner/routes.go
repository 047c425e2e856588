package runner

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

// Routes gives the gate's rows: what the runner calls on every tool call and
// model request. Each row says who may call it and the function that serves
// it, and holds its handler and its documentation (the rest of it in
// operations.yaml).
func (s *Server) Routes() []route.Route {
	return []route.Route{
		// The gate and budget admission: what the runner calls on every tool
		// call and model request.
		{Pattern: "POST /v1/sessions/{id}/permission", Access: route.Runner, Function: route.Gate, Via: route.APIGateway, OpenOnlyToWait: true,
			Handler: route.Authenticated(s.permission),
			Doc:     doc("askPermission", "gate", "May this tool call happen? Idempotent by (session, tool_call_id).", 400, 401, 403, 404, 409, 413, 500, 503)},
		{Pattern: "POST /v1/sessions/{id}/admissions", Access: route.Admitters, Function: route.Gate, Via: route.APIGateway,
			Handler: route.Authenticated(s.admit),
			Doc:     doc("admitModelRequest", "budget", "Reserve a pessimistic amount of the run's budget before a model request.", 400, 401, 402, 403, 404, 409, 500, 503)},
		{Pattern: "POST /v1/sessions/{id}/admissions/{request_id}/usage", Access: route.Reporters, Function: route.Gate, Via: route.APIGateway,
			Handler: route.Authenticated(s.reconcile),
			Doc:     doc("reconcileUsage", "budget", "Book the real usage of an admitted request; repeating it changes nothing.", 400, 401, 403, 404, 409, 500, 503)},
	}
}
