package infra

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/api/surface"
)

// The route rows (shared/api.Surface: each handler package's routes.go) are
// the one list of HTTP routes; `go generate ./shared/api` writes
// docs/openapi.yaml's paths, template.yaml's Api events and docs/api.md's
// route index from them. These tests fail when the generated files are not
// current, and hold what is read back from them to the rows, in both
// directions. The mux of each function is built from the rows (route.New,
// tested in functions/<name>).

// TestGeneratedSurfaceCurrent: the generated parts of docs/openapi.yaml,
// template.yaml and docs/api.md are what the rows generate now. A row
// changed without `go generate ./shared/api` fails here.
func TestGeneratedSurfaceCurrent(t *testing.T) {
	t.Parallel()
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(repoRoot, name)) }
	out, err := surface.Generate(api.Surface(), read)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		cur, err := read(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(cur, out[name]) {
			t.Errorf("%s is not what the route rows generate: run go generate ./shared/api", name)
		}
	}
}

var paramName = regexp.MustCompile(`\{[^}]*\}`)

// normalPath erases what differs between the three spellings of a path:
// parameter names ({id} vs {approval}), Go's {name...} and {$}, and API
// Gateway's greedy {name+}.
func normalPath(p string) string {
	p = strings.ReplaceAll(p, "{$}", "")
	return paramName.ReplaceAllString(p, "{}")
}

// rowKey is "method path" of a row, normalized; "" for a pattern without a
// method (a catch-all).
func rowKey(r route.Route) string {
	method, path, ok := strings.Cut(r.Pattern, " ")
	if !ok {
		return ""
	}
	return strings.ToLower(method) + " " + normalPath(path)
}

func functionOf(resource string) route.Function {
	return route.Function(strings.ToLower(strings.TrimSuffix(resource, "Function")))
}

// TestRoutesDeployed: every API Gateway row is an Api event of the
// function it names, and every Api event is a row of the table naming that
// function. A route served but not deployed, deployed but not served, or
// deployed to another function fails.
func TestRoutesDeployed(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	deployed := map[string]route.Function{} // key -> function
	events := map[string]apiRoute{}
	for _, r := range apiRoutes(t, l.doc) {
		key := r.method + " " + normalPath(r.path)
		deployed[key] = functionOf(r.function)
		events[key] = r
	}
	served := map[string]route.Function{}
	for _, r := range api.Surface() {
		if r.Via != route.APIGateway {
			continue
		}
		key := rowKey(r)
		served[key] = r.Function
		switch fn, ok := deployed[key]; {
		case !ok:
			t.Errorf("route row: %s (%s) has no Api event in template.yaml (go generate ./shared/api)", r.Pattern, r.Function.Resource())
		case fn != r.Function:
			t.Errorf("route row: %s is %s's, but template.yaml deploys it to %s", r.Pattern, r.Function, fn.Resource())
		}
	}
	for key, e := range events {
		if _, ok := served[key]; !ok {
			t.Errorf("template.yaml: %s.Events.%s (%s %s) is not a route row (shared/api/*/routes.go)", e.function, e.event, strings.ToUpper(e.method), e.path)
		}
	}
}

// TestFunctionURLs: the functions with a function URL are exactly those
// with FunctionURL rows, and such a URL streams.
func TestFunctionURLs(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	var want, got []string
	for _, r := range api.Surface() {
		if r.Via == route.FunctionURL && !slices.Contains(want, r.Function.Resource()) {
			want = append(want, r.Function.Resource())
		}
	}
	fns := resources(l.doc, "AWS::Serverless::Function")
	for _, id := range sortedKeys(fns) {
		if u, ok := props(fns[id])["FunctionUrlConfig"].(map[string]any); ok {
			got = append(got, id)
			if u["InvokeMode"] != "RESPONSE_STREAM" {
				t.Errorf("%s: FunctionUrlConfig.InvokeMode = %v, want RESPONSE_STREAM", id, u["InvokeMode"])
			}
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("functions with a function URL = %v, want those the route rows route there: %v", got, want)
	}
}

// TestRoutesDocumented: every row is an operation of docs/openapi.yaml
// and appears in docs/api.md, unless it says why not; every operation of
// docs/openapi.yaml is a row. A route documented but not served fails.
func TestRoutesDocumented(t *testing.T) {
	t.Parallel()
	spec := mustLoadOpenAPI(t)
	documented := map[string]bool{}
	for p, item := range spec.Paths {
		for _, m := range httpMethods {
			if _, ok := item[m]; ok {
				documented[m+" "+normalPath(p)] = true
			}
		}
	}
	contract, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	// The generated route index names every route: the prose must too.
	contract = regexp.MustCompile(`(?s)<!-- BEGIN generated route index.*<!-- END generated route index -->`).ReplaceAll(contract, nil)
	inContract := map[string]bool{}
	for _, m := range regexp.MustCompile("(GET|PUT|POST|DELETE|PATCH) (/[^\\s`)?,]*)").FindAllStringSubmatch(string(contract), -1) {
		inContract[strings.ToLower(m[1])+" "+normalPath(m[2])] = true
	}
	rows := map[string]bool{}
	for _, r := range api.Surface() {
		key := rowKey(r)
		rows[key] = true
		if r.Undocumented != "" {
			continue // surface.Generate refuses an undocumented row with documentation
		}
		if !documented[key] {
			t.Errorf("route row: %s is served but not an operation of docs/openapi.yaml", r.Pattern)
		}
		if !inContract[key] {
			t.Errorf("route row: %s is served but docs/api.md does not describe it", r.Pattern)
		}
	}
	for key := range documented {
		if !rows[key] {
			t.Errorf("docs/openapi.yaml: %s is documented but no route row serves it", key)
		}
	}
}

// forbidden lists, per function, import paths (prefixes) its binary must
// not link: the privilege split in the code, not only in IAM. Only the
// broker links KMS, the MCP client, the OAuth token exchange, the model
// proxy and the GitHub App's token minting: it serves every route that
// seals, opens or spends a credential. The gate decides every tool call
// and must hold nothing that reaches a secret or a person's token; it
// links no YAML parser (stored policies are JSON) and no Step Functions
// client (notify starts the expiry timers): both only cost its cold start.
// Control, the operator's API, reaches no upstream and holds no key.
var forbidden = map[string][]string{
	"control": slices.Concat(credentialCode, []string{"github.com/aws/aws-sdk-go-v2/service/sfn"}),
	"gate": slices.Concat(credentialCode, []string{
		"github.com/coreos/go-oidc/", "github.com/go-jose/", "github.com/fluidbox/fluidbox/shared/sso",
		"sigs.k8s.io/yaml", "go.yaml.in/yaml/", "github.com/aws/aws-sdk-go-v2/service/sfn",
	}),
	"approvals": credentialCode,
	"github":    slices.Concat(credentialCode, []string{"github.com/coreos/go-oidc/"}),
	"expire":    slices.Concat(credentialCode, []string{"github.com/coreos/go-oidc/", "github.com/fluidbox/fluidbox/shared/api"}),
	"sweep":     slices.Concat(credentialCode, []string{"github.com/coreos/go-oidc/", "github.com/fluidbox/fluidbox/shared/api"}),
	"notify":    slices.Concat(credentialCode, []string{"github.com/coreos/go-oidc/", "github.com/fluidbox/fluidbox/shared/api"}),
	"slack":     slices.Concat(credentialCode, []string{"github.com/coreos/go-oidc/", "github.com/fluidbox/fluidbox/shared/api"}),
	// The launch steps issue, end and report: the GitHub App's key for the
	// report (as the schedule function), no other credential, no HTTP API.
	"launch":   slices.Concat(gitHubAppOnly, []string{"github.com/fluidbox/fluidbox/shared/api"}),
	"export":   slices.Concat(credentialCode, []string{"github.com/coreos/go-oidc/", "github.com/fluidbox/fluidbox/shared/api"}),
	"schedule": gitHubAppOnly,
}

// gitHubAppOnly is forbidden to a function that opens the GitHub App's key
// (KMS, the App's token minting) and nothing that speaks MCP or OAuth,
// verifies people or proxies the model.
var gitHubAppOnly = []string{
	"github.com/modelcontextprotocol/", "github.com/fluidbox/fluidbox/shared/broker", "github.com/fluidbox/fluidbox/shared/connection",
	"github.com/fluidbox/fluidbox/shared/oauth", "github.com/fluidbox/fluidbox/shared/modelproxy",
	"github.com/coreos/go-oidc/", "github.com/fluidbox/fluidbox/shared/api/connections", "github.com/fluidbox/fluidbox/shared/api/model",
}

// credentialCode is what seals, opens or spends a credential, the
// broker's alone: KMS (shared/seal's Seal and Open, the SDK's client), the
// MCP client (the SDK, and shared/broker and shared/connection over it),
// the OAuth token exchange (shared/oauth), the model proxy (and the model
// upstream's handlers) and the GitHub App's installation tokens.
var credentialCode = []string{
	"github.com/aws/aws-sdk-go-v2/service/kms", "github.com/fluidbox/fluidbox/shared/seal",
	"github.com/modelcontextprotocol/", "github.com/fluidbox/fluidbox/shared/broker", "github.com/fluidbox/fluidbox/shared/connection",
	"github.com/fluidbox/fluidbox/shared/api/connections",
	"github.com/fluidbox/fluidbox/shared/oauth",
	"github.com/fluidbox/fluidbox/shared/modelproxy", "github.com/fluidbox/fluidbox/shared/api/model",
	"github.com/fluidbox/fluidbox/shared/githubapp", "github.com/bradleyfalzon/ghinstallation/",
}

// TestFunctionImports lists the dependencies of every function as it is
// built for Lambda (linux/arm64, CGO off, -tags lambda.norpc) and fails on
// a forbidden package. Every function has a list but the broker, whose
// routes need all of it.
func TestFunctionImports(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./functions/...")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./functions/...: %v", err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		fn := path.Base(pkg)
		list, ok := forbidden[fn]
		switch {
		case fn == "broker":
			continue
		case !ok:
			t.Errorf("functions/%s has no list of forbidden imports in infra/routes_test.go", fn)
			continue
		}
		seen++
		for _, dep := range strings.Fields(deps) {
			for _, f := range list {
				if dep == strings.TrimSuffix(f, "/") || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
					t.Errorf("functions/%s links %s, which it must not (%s)", fn, dep, f)
				}
			}
		}
	}
	if seen != len(forbidden) {
		t.Errorf("checked %d functions, want the %d with a list", seen, len(forbidden))
	}
}
