package route_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/fluidbox/fluidbox/shared/api/route"
)

// TestGatewayContext: the deadline is API Gateway's cut-off less a margin,
// counted from when API Gateway received the request (a cold start eats
// into it), from now without a gateway, and never past a deadline the
// request already had.
func TestGatewayContext(t *testing.T) {
	t.Parallel()
	plain := httptest.NewRequest("POST", "/v1/sessions/ses_x/tools/call", nil)
	ctx, cancel := route.GatewayContext(plain)
	defer cancel()
	if d, _ := ctx.Deadline(); time.Until(d) > route.APIGatewayTimeout || time.Until(d) < route.APIGatewayTimeout-3*time.Second {
		t.Errorf("without a gateway: %s left, want just under %s", time.Until(d), route.APIGatewayTimeout)
	}

	var ra core.RequestAccessor
	ev := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/v1/sessions/ses_x/tools/call",
		RequestContext: events.APIGatewayProxyRequestContext{RequestTimeEpoch: time.Now().Add(-20 * time.Second).UnixMilli()}}
	gw, err := ra.EventToRequestWithContext(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = route.GatewayContext(gw)
	defer cancel()
	if d, _ := ctx.Deadline(); time.Until(d) > 9*time.Second || time.Until(d) < 5*time.Second {
		t.Errorf("20 s after API Gateway received it: %s left, want about 8 s", time.Until(d))
	}

	short, cancelShort := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelShort()
	ctx, cancel = route.GatewayContext(plain.WithContext(short))
	defer cancel()
	if d, _ := ctx.Deadline(); time.Until(d) > 2*time.Second {
		t.Errorf("under a 2 s deadline: %s left", time.Until(d))
	}
}
