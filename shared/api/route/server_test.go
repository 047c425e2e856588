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

// group is a handler package of the given rows.
type group []route.Route

func (g group) Routes() []route.Route { return g }

func ok(w http.ResponseWriter, _ *http.Request, _ auth.Principal) error {
	route.WriteJSON(w, http.StatusOK, map[string]string{"ok": "yes"})
	return nil
}

var teapot = route.Raw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))

// row is a row of the given access on fn with a handler of the right kind.
func row(pattern string, acc route.Access, fn route.Function) route.Route {
	r := route.Route{Pattern: pattern, Access: acc, Function: fn, Via: route.APIGateway, Handler: route.Authenticated(ok)}
	switch acc {
	case route.Public, route.Signed, route.RunKey:
		r.Handler = teapot
	}
	return r
}

// rows is a small surface over three functions.
func rows() group {
	return group{
		route.Liveness(route.Control, route.APIGateway, ""),
		row("GET /v1/policies/{id}", route.Admin, route.Control),
		row("POST /v1/sessions/{id}/permission", route.Runner, route.Gate),
		row("POST /v1/sessions/{id}/admissions", route.Admitters, route.Gate),
		row("POST /v1/sessions/{id}/tools/call", route.Runner, route.Broker),
	}
}

func config() route.Config {
	return route.Config{AdminToken: "admin-token-0123456789", Ledger: ledger.New(store.New(nil, "unused"), time.Now)}
}

var gate = route.Target{Function: route.Gate, Via: route.APIGateway}

// TestNewRefusesDisagreement: a row without a handler, a handler of the
// wrong kind for its access, a row given twice or a pattern given two
// accesses fail New.
func TestNewRefusesDisagreement(t *testing.T) {
	t.Parallel()
	bare := row("GET /v1/members", route.Admin, route.Control)
	bare.Handler = route.Endpoint{}
	raw := row("POST /v1/sessions/{id}/usage", route.Reporters, route.Gate)
	raw.Handler = teapot
	bearer := row("POST /v1/integrations/slack/interactions", route.Signed, route.Approvals)
	bearer.Handler = route.Authenticated(ok)
	cases := []struct {
		name  string
		extra route.Route
		want  string
	}{
		{"missing", bare, "has no handler"},
		{"raw for a bearer row", raw, "its handler is raw"},
		{"bearer for a signed row", bearer, "expects a bearer"},
		{"twice", row("GET /v1/policies/{id}", route.Admin, route.Control), "given twice"},
		{"two accesses", row("GET /v1/policies/{id}", route.People, route.Broker), "two accesses"},
	}
	for _, c := range cases {
		_, err := route.New(config(), gate, append(rows(), c.extra))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := route.New(config(), route.Everything, rows()); err != nil {
		t.Errorf("New(every row) = %v", err)
	}
}

// TestServesOnlyItsRows: a function's handler answers its own rows and 404s
// every other function's, however well authenticated.
func TestServesOnlyItsRows(t *testing.T) {
	t.Parallel()
	s, err := route.New(config(), gate, rows())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ServesExactly(rows(), gate); err != nil {
		t.Fatal(err)
	}
	if got, want := len(s.Routes()), len(route.Of(rows(), gate)); got != want || want == 0 {
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
