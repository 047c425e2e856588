package main

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/function"
)

// TestServesItsRows: the handler main serves is built, and serves exactly
// this function's rows of the route table.
func TestServesItsRows(t *testing.T) {
	t.Parallel()
	d := function.Offline()
	h, err := handler(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ServesExactly(api.Surface(), route.Target{Function: route.Control, Via: route.APIGateway}); err != nil {
		t.Error(err)
	}
}
