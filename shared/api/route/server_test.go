package route_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

// group gives an endpoint for every pattern it is built with.
type group map[string]route.Endpoint

func (g group) Endpoints() route.Endpoints { return route.Endpoints(g) }

func ok(w http.ResponseWriter, _ *http.Request, _ auth.Principal) error {
	route.WriteJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
	return nil
}

// rowsOf gives a correct endpoint for every row of the table.
func rowsOf(rows []route.Route) group {
	g := group{}
	for _, r := range rows {
		switch r.Access {
		case route.Public, route.Signed, route.RunKey:
			g[r.Pattern] = route.Raw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
		default:
			g[r.Pattern] = route.Authenticated(ok)
		}
	}
	delete(g, "GET /healthz") // the core serves it
	return g
}

func config() route.Config {
	return route.Config{AdminToken: "admin-token-0123456789", Ledger: ledger.New(store.New(nil, "unused"), time.Now)}
}

var gate = route.Target{Function: route.Gate, Via: route.APIGateway}

// TestNewRefusesDisagreement: a row without a handler, a handler without
// a row, a handler of the wrong kind, or two groups giving one pattern
// fail New.
func TestNewRefusesDisagreement(t *testing.T) {
	t.Parallel()
	all := rowsOf(route.Table)
	cases := []struct {
		name   string
		groups []route.Group
		want   string
	}{
		{"missing", []route.Group{group{}}, "has no handler"},
		{"unknown", []route.Group{all, group{"GET /v1/nowhere": route.Authenticated(ok)}}, "not in the route table"},
		{"raw for a bearer row", []route.Group{group{"POST /v1/sessions/{id}/permission": route.Raw(http.NotFoundHandler()),
			"POST /v1/sessions/{id}/admissions": route.Authenticated(ok), "POST /v1/sessions/{id}/admissions/{request_id}/usage": route.Authenticated(ok)}}, "its handler is raw"},
		{"twice", []route.Group{all, group{"GET /v1/members": route.Authenticated(ok)}}, "given by two groups"},
	}
	for _, c := range cases {
		_, err := route.New(config(), gate, c.groups...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := route.New(config(), route.Everything, all); err != nil {
		t.Errorf("New(every row) = %v", err)
	}
}

// TestServesOnlyItsRows: a function's handler answers its own rows and 404s
// every other function's, however well authenticated.
func TestServesOnlyItsRows(t *testing.T) {
	t.Parallel()
	s, err := route.New(config(), gate, rowsOf(route.Table))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(s.Routes()), len(route.Of(gate)); got != want || want == 0 {
		t.Fatalf("serves %d rows, want the gate's %d", got, want)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/v1/sessions/ses_a/admissions", 200},
		{"GET", "/v1/policies/pol_a", 404},             // control's
		{"POST", "/v1/sessions/ses_a/tools/call", 404}, // broker's
		{"GET", "/healthz", 404},                       // the gate has no liveness row
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer admin-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}
}

// TestTableRows: each row names a known function and access, patterns
// are unique per function and way in, and only the broker has a function
// URL.
func TestTableRows(t *testing.T) {
	t.Parallel()
	seen := map[route.Target]map[string]bool{}
	for _, r := range route.Table {
		switch r.Function {
		case route.Control, route.Gate, route.Approvals, route.Broker, route.GitHub:
		default:
			t.Errorf("%s: unknown function %q", r.Pattern, r.Function)
		}
		if r.Via != route.APIGateway && !(r.Via == route.FunctionURL && r.Function == route.Broker) {
			t.Errorf("%s: via %q on %s; only the broker has a function URL", r.Pattern, r.Via, r.Function)
		}
		k := route.Target{Function: r.Function, Via: r.Via}
		if seen[k] == nil {
			seen[k] = map[string]bool{}
		}
		if seen[k][r.Pattern] {
			t.Errorf("%s twice on %s via %s", r.Pattern, r.Function, r.Via)
		}
		seen[k][r.Pattern] = true
	}
}
