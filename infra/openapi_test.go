package infra

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fluidbox/fluidbox/shared/permission"
)

const openAPIPath = "../docs/openapi.yaml"

// apiContract is every operation of docs/api.md, the wire contract,
// written out by hand: docs/openapi.yaml must describe each of them.
var apiContract = []string{
	"GET /healthz",
	"POST /v1/policies",
	"PUT /v1/policies/{id}",
	"GET /v1/policies/{id}",
	"GET /v1/policies/{id}/versions/{n}",
	"POST /v1/capabilities",
	"GET /v1/capabilities",
	"GET /v1/capabilities/{id}",
	"POST /v1/connections",
	"POST /v1/connections/{id}/tools/refresh",
	"PUT /v1/connections/{id}/credential",
	"DELETE /v1/connections/{id}",
	"GET /v1/connections",
	"GET /v1/connections/{id}",
	"POST /v1/sessions",
	"GET /v1/sessions/{id}",
	"POST /v1/sessions/{id}/end",
	"GET /v1/sessions/{id}/events",
	"POST /v1/sessions/{id}/permission",
	"POST /v1/sessions/{id}/tools/call",
	"GET /v1/approvals",
	"GET /v1/sessions/{id}/approvals",
	"GET /v1/approvals/{id}",
	"POST /v1/approvals/{id}/decision",
	"GET /v1/sessions/{id}/grants",
	"DELETE /v1/sessions/{id}/grants/{scope_key}",
	"POST /v1/sessions/{id}/admissions",
	"POST /v1/sessions/{id}/admissions/{request_id}/usage",
	"POST /v1/sessions/{id}/model/v1/messages",
	"POST /v1/triggers/github",
	// Trigger configurations (issue 7), which the webhook's runs follow.
	"POST /v1/triggers",
	"GET /v1/triggers",
	"GET /v1/triggers/{id}",
}

// The error codes of docs/api.md, "Conventions".
var apiErrorCodes = []string{
	"invalid_request", "unauthenticated", "forbidden", "not_found", "conflict",
	"budget_exhausted", "too_large", "internal", "unavailable",
}

type openAPIDoc struct {
	OpenAPI    string                    `json:"openapi"`
	Info       map[string]any            `json:"info"`
	Paths      map[string]map[string]any `json:"paths"`
	Components map[string]any            `json:"components"`
	Security   []map[string]any          `json:"security"`
	raw        any
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

var loadOpenAPI = sync.OnceValues(func() (*openAPIDoc, error) {
	b, err := os.ReadFile(openAPIPath)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s is not valid YAML: %w", openAPIPath, err)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", openAPIPath, err)
	}
	if err := json.Unmarshal(js, &doc.raw); err != nil {
		return nil, err
	}
	return &doc, nil
})

func mustLoadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	d, err := loadOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestOpenAPICoversContract(t *testing.T) {
	t.Parallel()
	d := mustLoadOpenAPI(t)
	if !strings.HasPrefix(d.OpenAPI, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", d.OpenAPI)
	}
	if d.Info["title"] == nil || d.Info["version"] == nil {
		t.Error("info needs title and version")
	}
	for _, op := range apiContract {
		method, p, _ := strings.Cut(op, " ")
		item, ok := d.Paths[p]
		if !ok {
			t.Errorf("docs/api.md path %s is missing from docs/openapi.yaml", p)
			continue
		}
		if _, ok := item[strings.ToLower(method)]; !ok {
			t.Errorf("docs/openapi.yaml: %s has no %s operation", p, method)
		}
	}
}

func TestOpenAPIErrorEnvelope(t *testing.T) {
	t.Parallel()
	d := mustLoadOpenAPI(t)
	codes, ok := resolvePointer(d.raw, "/components/schemas/ErrorCode/enum")
	if !ok {
		t.Fatal("no #/components/schemas/ErrorCode enum")
	}
	var got []string
	for _, c := range codes.([]any) {
		got = append(got, fmt.Sprint(c))
	}
	slices.Sort(got)
	want := slices.Clone(apiErrorCodes)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ErrorCode enum = %v, want docs/api.md's %v", got, want)
	}
	if _, ok := resolvePointer(d.raw, "/components/securitySchemes/bearer"); !ok {
		t.Error("no bearer security scheme")
	}
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

// TestOpenAPIConsistency checks what a generator or validator would trip
// over: unique operation ids, declared path parameters, responses on every
// operation, and local $refs that resolve.
func TestOpenAPIConsistency(t *testing.T) {
	t.Parallel()
	d := mustLoadOpenAPI(t)
	ids := map[string]string{}
	for p, item := range d.Paths {
		common := paramNames(t, d, item["parameters"])
		for _, m := range httpMethods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			where := strings.ToUpper(m) + " " + p
			id, _ := op["operationId"].(string)
			if id == "" {
				t.Errorf("%s: no operationId", where)
			} else if prev, dup := ids[id]; dup {
				t.Errorf("%s: operationId %q also used by %s", where, id, prev)
			} else {
				ids[id] = where
			}
			if rs, _ := op["responses"].(map[string]any); len(rs) == 0 {
				t.Errorf("%s: no responses", where)
			}
			declared := paramNames(t, d, op["parameters"])
			for k := range common {
				declared[k] = true
			}
			for _, m := range pathParam.FindAllStringSubmatch(p, -1) {
				if !declared["path:"+m[1]] {
					t.Errorf("%s: path parameter %q is not declared", where, m[1])
				}
			}
		}
	}
	walkRefs(d.raw, func(ref string) {
		if !strings.HasPrefix(ref, "#/") {
			t.Errorf("$ref %q: only local references", ref)
			return
		}
		if _, ok := resolvePointer(d.raw, strings.TrimPrefix(ref, "#")); !ok {
			t.Errorf("$ref %q does not resolve", ref)
		}
	})
}

// paramNames returns "in:name" for each parameter, following $refs.
func paramNames(t *testing.T, d *openAPIDoc, v any) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	list, _ := v.([]any)
	for _, p := range list {
		m, _ := p.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			r, ok := resolvePointer(d.raw, strings.TrimPrefix(ref, "#"))
			if !ok {
				continue // reported by the $ref walk
			}
			m, _ = r.(map[string]any)
		}
		if m["in"] == "path" && m["required"] != true {
			t.Errorf("path parameter %v must be required", m["name"])
		}
		out[fmt.Sprintf("%v:%v", m["in"], m["name"])] = true
	}
	return out
}

func walkRefs(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				f(s)
				continue
			}
			walkRefs(x, f)
		}
	case []any:
		for _, x := range v {
			walkRefs(x, f)
		}
	}
}

// resolvePointer follows a JSON pointer (RFC 6901) into v.
func resolvePointer(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return v, true
}

// TestOpenAPIEventTypes: the Event schema's type enum is exactly the
// ledger's event types (shared/redact's Type constants).
func TestOpenAPIEventTypes(t *testing.T) {
	t.Parallel()
	d := mustLoadOpenAPI(t)
	enum, ok := resolvePointer(d.raw, "/components/schemas/Event/properties/type/enum")
	if !ok {
		t.Fatal("no #/components/schemas/Event type enum")
	}
	var got []string
	for _, v := range enum.([]any) {
		got = append(got, fmt.Sprint(v))
	}
	src, err := os.ReadFile("../shared/redact/redact.go")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range regexp.MustCompile(`(?m)^\s+Type[A-Za-z]+\s+Type = "([a-z._]+)"`).FindAllStringSubmatch(string(src), -1) {
		want = append(want, m[1])
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("Event type enum = %v, want the ledger's types %v", got, want)
	}
}

// TestOpenAPIToolCallIsTheRequest: the ToolCall schema names exactly the
// fields permission.Request decodes, so a client that validates against
// docs/openapi.yaml (additionalProperties: false) can send every field the
// gate reads, and the document promises none it ignores.
func TestOpenAPIToolCallIsTheRequest(t *testing.T) {
	d := mustLoadOpenAPI(t)
	schemas, _ := d.Components["schemas"].(map[string]any)
	tc, _ := schemas["ToolCall"].(map[string]any)
	props, _ := tc["properties"].(map[string]any)
	var documented []string
	for name := range props {
		documented = append(documented, name)
	}
	var decoded []string
	rt := reflect.TypeFor[permission.Request]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			decoded = append(decoded, name)
		}
	}
	slices.Sort(documented)
	slices.Sort(decoded)
	if !slices.Equal(documented, decoded) {
		t.Errorf("ToolCall properties = %v, permission.Request's fields = %v", documented, decoded)
	}
}
