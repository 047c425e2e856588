package main

import (
	"slices"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/function"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/store"
)

// TestServesItsRows: the handler main serves is built, and serves exactly
// this function's rows of the route table.
func TestServesItsRows(t *testing.T) {
	t.Parallel()
	st := store.New(nil, "unused") // building the handler does no I/O
	d := function.Deps{Store: st, Ledger: ledger.New(st, time.Now)}
	h, err := handler(d, nil, slackbot.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := route.Of(route.Target{Function: route.Approvals, Via: route.APIGateway})
	if got := h.Routes(); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("serves %v, want %v", got, want)
	}
}
