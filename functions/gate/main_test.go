package main

import (
	"os"
	"path/filepath"
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
	if err := h.ServesExactly(api.Surface(), route.Target{Function: route.Gate, Via: route.APIGateway}); err != nil {
		t.Error(err)
	}
}

// TestPriceFileReadAtStart: the shipped price table is parsed lazily, but a
// price file is read when the handler is built, so a bad one stops the
// start instead of failing the first admission.
func TestPriceFileReadAtStart(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(bad, []byte(`{"models":{"m":{"input_usd_per_mtok":"x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(t.TempDir(), "missing.json")} {
		d := function.Offline()
		d.Config.PricesFile = path
		if _, err := handler(d, nil); err == nil {
			t.Errorf("handler with price file %s = nil error, want the start refused", filepath.Base(path))
		}
	}
}
