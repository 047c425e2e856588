package model

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

// Routes gives the model rows: the model proxy on the broker's function URL,
// and the operator's model upstream. Each row says who may call it and the
// function that serves it, and holds its handler and its documentation (the
// rest of it in operations.yaml).
func (s *Server) Routes() []route.Route {
	return []route.Route{
		// The model proxy, on the broker's streaming function URL. Its errors
		// are Anthropic's shape; Claude Code probes the base URL first.
		{Pattern: "POST /v1/sessions/{id}/model/v1/messages", Access: route.RunKey, Function: route.Broker, Via: route.FunctionURL,
			Handler: route.Raw(http.HandlerFunc(s.modelMessages)),
			Doc:     doc("proxyModelMessages", "budget", "Model proxy speaking the Anthropic Messages API.")},
		{Pattern: "GET /v1/sessions/{id}/model", Access: route.Public, Function: route.Broker, Via: route.FunctionURL,
			Handler: route.Raw(http.HandlerFunc(s.modelBase)),
			Doc:     doc("probeModelProxy", "budget", "The model proxy's base URL answers GET and HEAD with 200 (Claude Code probes it first).")},
		{Pattern: "GET /v1/sessions/{id}/model/{$}", Access: route.Public, Function: route.Broker, Via: route.FunctionURL,
			Handler:      route.Raw(http.HandlerFunc(s.modelBase)),
			Undocumented: "the base URL with a trailing slash, answered like GET /v1/sessions/{id}/model"},
		{Pattern: "/v1/sessions/{id}/model/", Access: route.Public, Function: route.Broker, Via: route.FunctionURL,
			Handler:      route.Raw(http.HandlerFunc(notAnthropicPath)),
			Undocumented: "every other Anthropic path: 404 in Anthropic's error shape"},
		// The operator's model upstream: sealed and opened by the broker
		// alone, beside the proxy that forwards to it.
		{Pattern: "PUT /v1/model-upstream", Access: route.Admin, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.putModelUpstream),
			Doc:     doc("putModelUpstream", "budget", "Set where the model proxy forwards, with the operator's credential, sealed at once.", 400, 401, 403, 409, 413, 500, 503)},
		{Pattern: "GET /v1/model-upstream", Access: route.Admin, Function: route.Broker, Via: route.APIGateway,
			Handler: route.Authenticated(s.getModelUpstream),
			Doc:     doc("getModelUpstream", "budget", "The model upstream setting, without its credential.", 401, 403, 404, 500, 503)},
		route.Liveness(route.Broker, route.FunctionURL, "the liveness of the broker's function URL, answered as GET /healthz is"),
	}
}
