package route

import (
	"context"
	"net/http"
	"time"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"
)

// APIGatewayTimeout is API Gateway's integration timeout for REST APIs:
// past it the client gets 504 whatever the function goes on to do, and its
// retry meets a call already claimed.
const APIGatewayTimeout = 29 * time.Second

// gatewayMargin is kept for the answer to travel back before the cut-off.
const gatewayMargin = time.Second

// GatewayContext is r's context bounded by the cut-off API Gateway applies
// to it: APIGatewayTimeout (less gatewayMargin) from when API Gateway
// received the request (its requestTimeEpoch, so a cold start counts),
// or from now where no gateway is in front (fluidbox dev keeps the same
// bound, so it behaves as deployed). It is never later than a deadline the
// context already has (a Lambda's own timeout). Deadlines are on the wall
// clock, so this reads it rather than an injected one.
func GatewayContext(r *http.Request) (context.Context, context.CancelFunc) {
	start := time.Now()
	if gw, ok := core.GetAPIGatewayContextFromContext(r.Context()); ok && gw.RequestTimeEpoch > 0 {
		if t := time.UnixMilli(gw.RequestTimeEpoch); t.Before(start) {
			start = t
		}
	}
	return context.WithDeadline(r.Context(), start.Add(APIGatewayTimeout-gatewayMargin))
}
