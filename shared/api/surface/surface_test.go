package surface_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/surface"
)

func read(name string) ([]byte, error) { return os.ReadFile(filepath.Join("..", "..", "..", name)) }

// TestSurfaceRows: every row names a known function and access, has a
// handler of the right kind, and is given once per function and way in;
// only the broker has a function URL.
func TestSurfaceRows(t *testing.T) {
	t.Parallel()
	rows := api.Surface()
	if err := route.Check(rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		switch r.Function {
		case route.Control, route.Gate, route.Approvals, route.Broker, route.GitHub:
		default:
			t.Errorf("%s: unknown function %q", r.Pattern, r.Function)
		}
		if r.Via != route.APIGateway && !(r.Via == route.FunctionURL && r.Function == route.Broker) {
			t.Errorf("%s: via %q on %s; only the broker has a function URL", r.Pattern, r.Via, r.Function)
		}
	}
}

// TestRowChangeMakesFilesStale: changing a row's documentation, its
// function or its path changes what is generated, so infra's
// TestGeneratedSurfaceCurrent fails until `go generate` runs again.
func TestRowChangeMakesFilesStale(t *testing.T) {
	t.Parallel()
	current, err := surface.Generate(api.Surface(), read)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range current {
		if on, _ := read(name); !bytes.Equal(on, b) {
			t.Fatalf("%s is not current; run go generate ./shared/api", name)
		}
	}
	for _, c := range []struct {
		name   string
		change func(*route.Route)
		files  []string
	}{
		{"summary", func(r *route.Route) { r.Doc.Summary += " Changed." }, []string{surface.OpenAPIFile}},
		{"function", func(r *route.Route) { r.Function = route.Gate }, []string{surface.TemplateFile, surface.ContractFile}},
		{"access", func(r *route.Route) { r.Access = route.People }, []string{surface.OpenAPIFile, surface.ContractFile}},
		{"path", func(r *route.Route) { r.Pattern = "POST /v1/policy" }, []string{surface.OpenAPIFile, surface.TemplateFile, surface.ContractFile}},
	} {
		rows := api.Surface()
		i := slices.IndexFunc(rows, func(r route.Route) bool { return r.Pattern == "POST /v1/policies" })
		c.change(&rows[i])
		out, err := surface.Generate(rows, read)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, f := range c.files {
			if bytes.Equal(out[f], current[f]) {
				t.Errorf("a changed %s leaves %s as it was", c.name, f)
			}
		}
	}
}

// TestGenerateRefuses: rows that cannot be documented, and files whose
// generated parts cannot be found, are errors, never a guess.
func TestGenerateRefuses(t *testing.T) {
	t.Parallel()
	raw := route.Raw(http.NotFoundHandler())
	doc := route.Doc{ID: "x", Tag: "t", OpenAPI: "responses:\n  '200': {description: ok}\n"}
	good := route.Route{Pattern: "GET /v1/x/{id}", Access: route.Public, Function: route.Control, Via: route.APIGateway, Handler: raw, Doc: doc}
	for name, c := range map[string]struct {
		change func(*route.Route) route.Route
		want   string
	}{
		"no id": {func(r *route.Route) route.Route { r.Doc.ID = ""; return *r }, "needs a method, Doc.ID and Doc.Tag"},
		"id twice": {func(r *route.Route) route.Route {
			o := *r
			o.Pattern = "PUT /v1/x/{id}"
			return o
		}, "is used by"},
		"one operation twice": {func(r *route.Route) route.Route {
			o := *r
			o.Doc.ID, o.Function = "y", route.Broker
			return o
		}, "document one operation"},
		"undocumented with a doc": {func(r *route.Route) route.Route { r.Undocumented = "why"; return *r }, "but has documentation"},
		"undocumented Api event": {func(r *route.Route) route.Route {
			r.Undocumented, r.Doc = "why", route.Doc{}
			return *r
		}, "needs an operation id"},
		"no operation text":       {func(r *route.Route) route.Route { r.Doc.OpenAPI = ""; return *r }, "no operation x"},
		"unknown error status":    {func(r *route.Route) route.Route { r.Doc.Errors = []int{418}; return *r }, "no shared response"},
		"status twice":            {func(r *route.Route) route.Route { r.Doc.Errors = []int{200}; return *r }, "no shared response"},
		"path of another shape":   {func(r *route.Route) route.Route { r.Doc.Path = "/v1/y/{id}"; return *r }, "not the pattern's path"},
		"a key the row says":      {func(r *route.Route) route.Route { r.Doc.OpenAPI += "security: []\n"; return *r }, "is not written in operations.yaml"},
		"not an operation":        {func(r *route.Route) route.Route { r.Doc.OpenAPI = "- a\n"; return *r }, "is not a mapping"},
		"a response not a status": {func(r *route.Route) route.Route { r.Doc.OpenAPI += "  default: {description: x}\n"; return *r }, "is not a status"},
	} {
		r := good
		extra := c.change(&r)
		rows := []route.Route{r}
		if extra.Pattern != r.Pattern || extra.Function != r.Function {
			rows = []route.Route{good, extra}
		}
		_, err := surface.Generate(rows, read)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Generate = %v, want an error containing %q", name, err, c.want)
		}
	}
	if _, err := surface.Template([]route.Route{good}, []byte("Resources:\n")); err == nil || !strings.Contains(err.Error(), "no line") {
		t.Errorf("a template without ControlFunction's markers: %v", err)
	}
	tmpl, _ := read(surface.TemplateFile)
	if _, err := surface.Template([]route.Route{good}, tmpl); err == nil || !strings.Contains(err.Error(), "no API Gateway row names it") {
		t.Errorf("markers of functions no row names: %v", err)
	}
	if _, err := surface.OpenAPI([]route.Route{good}, []byte("openapi: 3.1.0\n")); err == nil {
		t.Error("an OpenAPI document without paths was written")
	}
}

// TestWrapKeepsTheValue: folding long lines of folded scalars changes the
// text, not the value.
func TestWrapKeepsTheValue(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word `code` a, b; ", 30) + "end."
	for _, in := range []string{
		"a:\n  description: >-\n    " + long + "\n\n    " + long + "\n  b: 1\n",
		"a:\n  description: >\n    " + long + "\n    more  spaced  words " + long + "\n",
	} {
		out := surface.Wrap([]byte(in))
		var before, after any
		if err := yaml.Unmarshal([]byte(in), &before); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(out, &after); err != nil {
			t.Fatal(err)
		}
		b1, _ := yaml.Marshal(before)
		b2, _ := yaml.Marshal(after)
		if !bytes.Equal(b1, b2) {
			t.Errorf("wrap changed the value:\n%s\n->\n%s", in, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if len(l) > 80 && !strings.Contains(l, "  spaced") {
				t.Errorf("line of %d columns left: %q", len(l), l)
			}
		}
	}
}
