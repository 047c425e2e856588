package infra

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/global"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
	"github.com/awslabs/goformation/v7/intrinsics"
	"github.com/awslabs/goformation/v7/schema"
	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/fluidbox/fluidbox/shared/store"
)

const (
	templatePath = "../template.yaml"
	repoRoot     = ".."
)

// The only function that may decrypt sealed credentials (docs/architecture.md,
// "Brokered tools and sealing").
const brokerFunction = "BrokerFunction"

// loaded is the template in two forms: goformation's typed model, and the
// same intrinsic-resolved document as plain JSON values (for the schema
// check and for the parts goformation models lossily, like Policies).
type loaded struct {
	typed *cloudformation.Template
	doc   map[string]any
}

var loadTemplate = sync.OnceValues(func() (*loaded, error) {
	typed, err := goformation.OpenWithOptions(templatePath, Placeholders())
	if err != nil {
		return nil, fmt.Errorf("goformation: %w", err)
	}
	raw, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, err
	}
	js, err := intrinsics.ProcessYAML(raw, Placeholders())
	if err != nil {
		return nil, err
	}
	// Numbers as json.Number, which the validator understands exactly.
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("template is not an object: %w", err)
	}
	return &loaded{typed: typed, doc: doc}, nil
})

func mustLoad(t *testing.T) *loaded {
	t.Helper()
	l, err := loadTemplate()
	if err != nil {
		t.Fatalf("load %s: %v", templatePath, err)
	}
	return l
}

const samSchemaURL = "mem://goformation/sam.schema.json"

// compileSAMSchema compiles goformation's bundled SAM schema with every
// loader refused (nothing may come from the network or the disk), and
// returns a function that compiles one of its definitions, cached by the
// same compiler.
func compileSAMSchema() (func(pointer string) (*jsonschema.Schema, error), error) {
	c := jsonschema.NewCompiler()
	// The schema is draft-04 in shape but claims the draft-04 metaschema's
	// own URL as "$id"; under Draft4 rules "$id" is not an identifier, so
	// the claim is ignored instead of colliding with the built-in metaschema.
	c.Draft = jsonschema.Draft4
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("offline: refusing to load %s", u)
	}
	if err := c.AddResource(samSchemaURL, strings.NewReader(schema.SamSchema)); err != nil {
		return nil, err
	}
	return func(pointer string) (*jsonschema.Schema, error) {
		return c.Compile(samSchemaURL + "#" + pointer)
	}, nil
}

// TestTemplateMatchesSAMSchema validates the template against the SAM
// schema: the top level with the root schema, and each resource against the
// definition of its own type. (The root schema checks resources with an
// anyOf over some 1,300 types, whose failure report names every one of them.)
func TestTemplateMatchesSAMSchema(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	compile, err := compileSAMSchema()
	if err != nil {
		t.Fatalf("compile goformation's SAM schema: %v", err)
	}
	report := func(what string, s *jsonschema.Schema, v any) {
		t.Helper()
		if err := s.Validate(v); err != nil {
			var ve *jsonschema.ValidationError
			if errors.As(err, &ve) {
				t.Errorf("%s does not match the SAM schema:\n%s", what, describe(ve))
				return
			}
			t.Errorf("%s: validate: %v", what, err)
		}
	}
	top := map[string]any{}
	for k, v := range l.doc {
		top[k] = v
	}
	all, _ := l.doc["Resources"].(map[string]any)
	top["Resources"] = map[string]any{} // each one is checked below
	root, err := compile("")
	if err != nil {
		t.Fatalf("compile root schema: %v", err)
	}
	report("template.yaml (outside Resources)", root, any(top))
	for _, id := range sortedKeys(all) {
		r, _ := all[id].(map[string]any)
		typ, _ := r["Type"].(string)
		def, err := compile("/definitions/" + typ)
		if err != nil {
			t.Errorf("Resources.%s: type %q is unknown to the SAM schema: %v", id, typ, err)
			continue
		}
		report("Resources."+id, def, any(r))
	}
}

// describe lists every leaf cause: err.Error() shows only the first.
func describe(ve *jsonschema.ValidationError) string {
	var lines []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			lines = append(lines, fmt.Sprintf("  at %q: %s (schema %s)", e.InstanceLocation, e.Message, e.KeywordLocation))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(lines)
	lines = slices.Compact(lines)
	if len(lines) > 40 {
		lines = append(lines[:40], fmt.Sprintf("  ... and %d more", len(lines)-40))
	}
	return strings.Join(lines, "\n")
}

// resources returns the template's resources of type typ, by logical id.
func resources(doc map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	all, _ := doc["Resources"].(map[string]any)
	for id, r := range all {
		m, _ := r.(map[string]any)
		if m["Type"] == typ {
			out[id] = m
		}
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// effective is a function's setting after SAM's Globals merge.
type effective struct {
	runtime, handler, packageType string
	architectures                 []string
	inline, image                 bool
}

func effectiveSettings(t *testing.T, l *loaded, id string) effective {
	t.Helper()
	fn, err := l.typed.GetServerlessFunctionWithName(id)
	if err != nil {
		t.Fatalf("goformation: %v", err)
	}
	g, err := l.typed.GetServerlessGlobalFunction()
	if err != nil {
		g = &global.Function{}
	}
	pick := func(own, glob *string) string {
		if own != nil {
			return *own
		}
		if glob != nil {
			return *glob
		}
		return ""
	}
	e := effective{
		runtime:     pick(fn.Runtime, g.Runtime),
		handler:     pick(fn.Handler, g.Handler),
		packageType: pick(fn.PackageType, g.PackageType),
		inline:      fn.InlineCode != nil || g.InlineCode != nil,
		image:       fn.ImageUri != nil || g.ImageUri != nil,
	}
	switch {
	case fn.Architectures != nil:
		e.architectures = fn.Architectures
	case g.Architectures != nil:
		e.architectures = *g.Architectures
	}
	return e
}

func TestFunctionsRuntimeAndBuild(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	fns := l.typed.GetAllServerlessFunctionResources()
	if len(fns) == 0 {
		t.Fatal("template has no AWS::Serverless::Function")
	}
	for _, id := range sortedKeys(fns) {
		fn := fns[id]
		e := effectiveSettings(t, l, id)
		if e.runtime != "provided.al2023" {
			t.Errorf("%s: Runtime = %q, want provided.al2023", id, e.runtime)
		}
		if !slices.Equal(e.architectures, []string{"arm64"}) {
			t.Errorf("%s: Architectures = %q, want [arm64]", id, e.architectures)
		}
		if e.handler != "bootstrap" {
			t.Errorf("%s: Handler = %q, want bootstrap", id, e.handler)
		}
		if e.packageType != "" && e.packageType != "Zip" {
			t.Errorf("%s: PackageType = %q, want Zip", id, e.packageType)
		}
		if e.inline || e.image {
			t.Errorf("%s: InlineCode/ImageUri set, want code built from functions/", id)
		}
		if bm := fn.AWSCloudFormationMetadata["BuildMethod"]; bm != "go1.x" {
			t.Errorf("%s: Metadata.BuildMethod = %v, want go1.x", id, bm)
		}
		if fn.Role != nil {
			// With a role of its own, Policies would not be the whole truth
			// and the IAM checks below would prove nothing.
			t.Errorf("%s: Role = %q; let SAM generate the role from Policies", id, *fn.Role)
		}
		checkCodeUri(t, id, fn.CodeUri)
	}
}

func checkCodeUri(t *testing.T, id string, uri *serverless.Function_CodeUri) {
	t.Helper()
	if uri == nil || uri.String == nil {
		t.Errorf("%s: CodeUri is not a local directory, want functions/<name>/", id)
		return
	}
	s := *uri.String
	clean := path.Clean(s)
	name := strings.ToLower(strings.TrimSuffix(id, "Function"))
	if want := "functions/" + name; clean != want {
		t.Errorf("%s: CodeUri = %q, want %q/ (one folder per function, named after it)", id, s, want)
		return
	}
	src, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(clean), "main.go"))
	if err != nil {
		t.Errorf("%s: CodeUri %q: %v", id, s, err)
		return
	}
	if !bytes.Contains(src, []byte("\npackage main\n")) && !bytes.HasPrefix(src, []byte("package main\n")) {
		t.Errorf("%s: %s/main.go is not package main", id, clean)
	}
}

// statement is one IAM policy statement, with where it came from.
type statement struct {
	where  string
	fields map[string]any
}

func asStrings(v any) []string {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

func statementsOf(where string, doc any) ([]statement, error) {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: policy document is %T, want an object", where, doc)
	}
	var out []statement
	switch st := m["Statement"].(type) {
	case map[string]any:
		out = append(out, statement{where, st})
	case []any:
		for i, s := range st {
			sm, ok := s.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: Statement[%d] is %T", where, i, s)
			}
			out = append(out, statement{fmt.Sprintf("%s[%d]", where, i), sm})
		}
	default:
		return nil, fmt.Errorf("%s: no Statement", where)
	}
	return out, nil
}

// functionStatements returns a function's inline policy statements. Policy
// templates and managed policy names are refused: their actions are not in
// the template, so nothing here could check them.
func functionStatements(id string, fn map[string]any) ([]statement, []error) {
	var errs []error
	var out []statement
	var list []any
	switch p := props(fn)["Policies"].(type) {
	case nil:
		return nil, nil
	case []any:
		list = p
	default:
		list = []any{p}
	}
	for i, p := range list {
		where := fmt.Sprintf("%s.Policies[%d]", id, i)
		m, ok := p.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s = %v: managed policies hide their actions; write inline statements", where, p))
			continue
		}
		if _, ok := m["Statement"]; !ok {
			errs = append(errs, fmt.Errorf("%s = %v: SAM policy templates hide their actions; write inline statements", where, sortedKeys(m)))
			continue
		}
		st, err := statementsOf(where, m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, st...)
	}
	return out, errs
}

func TestIAMLeastPrivilege(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	fns := resources(l.doc, "AWS::Serverless::Function")
	for _, id := range sortedKeys(fns) {
		sts, errs := functionStatements(id, fns[id])
		for _, err := range errs {
			t.Error(err)
		}
		for _, st := range sts {
			checkStatement(t, st, id == brokerFunction || opensGitHubAppOnly(id, st))
		}
	}
	// Identity policies outside the functions: none may decrypt at all, so
	// kms:Decrypt cannot reach a role through the side door.
	for _, typ := range []string{"AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
		rs := resources(l.doc, typ)
		for _, id := range sortedKeys(rs) {
			p := props(rs[id])
			var docs []any
			if pd, ok := p["PolicyDocument"]; ok {
				docs = append(docs, pd)
			}
			if ps, ok := p["Policies"].([]any); ok {
				for _, x := range ps {
					if m, ok := x.(map[string]any); ok {
						docs = append(docs, m["PolicyDocument"])
					}
				}
			}
			for i, d := range docs {
				sts, err := statementsOf(fmt.Sprintf("%s(%s)[%d]", id, typ, i), d)
				if err != nil {
					t.Error(err)
					continue
				}
				for _, st := range sts {
					checkStatement(t, st, false)
				}
			}
		}
	}
}

// checkStatement holds one Allow statement to the rules above. The one
// action that may have Resource "*" is ecr:GetAuthorizationToken, alone in
// its statement: ECR's login has no resource to scope to (the runner task's
// execution role; the repository itself is scoped in the next statement).
func checkStatement(t *testing.T, st statement, mayDecrypt bool) {
	t.Helper()
	f := st.fields
	for _, k := range []string{"NotAction", "NotResource", "NotPrincipal"} {
		if _, ok := f[k]; ok {
			t.Errorf("%s: %s grants by exclusion; list what is allowed", st.where, k)
		}
	}
	if f["Effect"] != "Allow" {
		return
	}
	actions := asStrings(f["Action"])
	if len(actions) == 0 {
		t.Errorf("%s: Allow statement without Action", st.where)
	}
	for _, a := range actions {
		// IAM action names are case-insensitive.
		la := strings.ToLower(a)
		if strings.Contains(la, "*") || strings.Contains(la, "?") {
			t.Errorf("%s: wildcard action %q; name each action", st.where, a)
		}
		if la == "kms:decrypt" && !mayDecrypt {
			t.Errorf("%s: kms:Decrypt outside %s (and %v, for the GitHub App's key only)", st.where, brokerFunction, gitHubAppOpeners)
		}
		if la == "dynamodb:transactwriteitems" || la == "dynamodb:transactgetitems" {
			t.Errorf("%s: %q is not an IAM action; transactions are authorised per item (PutItem, UpdateItem, ConditionCheckItem, ...)", st.where, a)
		}
	}
	res := asStrings(f["Resource"])
	if len(res) == 0 {
		t.Errorf("%s: Allow statement without Resource", st.where)
	}
	for _, r := range res {
		if r == "*" && !slices.Equal(actions, []string{"ecr:GetAuthorizationToken"}) {
			t.Errorf("%s: Resource \"*\"; scope it to the resource", st.where)
		}
	}
}

// apiRoute is one HTTP event of a function.
type apiRoute struct {
	function, event, method, path string
}

func apiRoutes(t *testing.T, doc map[string]any) []apiRoute {
	t.Helper()
	var out []apiRoute
	fns := resources(doc, "AWS::Serverless::Function")
	for _, id := range sortedKeys(fns) {
		events, _ := props(fns[id])["Events"].(map[string]any)
		for _, name := range sortedKeys(events) {
			ev, _ := events[name].(map[string]any)
			p, _ := ev["Properties"].(map[string]any)
			switch ev["Type"] {
			case "Api":
				if p["RestApiId"] != "REF:Api" {
					t.Errorf("%s.Events.%s: RestApiId = %v, want !Ref Api (not SAM's implicit API)", id, name, p["RestApiId"])
				}
				out = append(out, apiRoute{id, name, strings.ToLower(fmt.Sprint(p["Method"])), fmt.Sprint(p["Path"])})
			case "HttpApi":
				t.Errorf("%s.Events.%s: HttpApi event; fluidbox serves one REST API", id, name)
			}
		}
	}
	return out
}

func TestAPIRoutesAreDocumented(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	spec := mustLoadOpenAPI(t)
	routes := apiRoutes(t, l.doc)
	if len(routes) == 0 {
		t.Fatal("template has no Api events")
	}
	seen := map[string]string{}
	for _, r := range routes {
		key := r.method + " " + r.path
		if prev, ok := seen[key]; ok {
			t.Errorf("%s: %s also served by %s", r.function+"."+r.event, key, prev)
		}
		seen[key] = r.function + "." + r.event
		// API Gateway writes a greedy parameter {name+}; OpenAPI just {name}.
		item, ok := spec.Paths[strings.ReplaceAll(r.path, "+}", "}")]
		if !ok {
			t.Errorf("%s.Events.%s: path %s is not in docs/openapi.yaml", r.function, r.event, r.path)
			continue
		}
		if _, ok := item[r.method]; !ok {
			t.Errorf("%s.Events.%s: %s %s: docs/openapi.yaml has the path but not the method", r.function, r.event, strings.ToUpper(r.method), r.path)
		}
	}
}

func TestTableShape(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	tables := resources(l.doc, "AWS::DynamoDB::Table")
	if len(tables) != 1 {
		t.Fatalf("template has %d DynamoDB tables, want exactly 1", len(tables))
	}
	for id, tbl := range tables {
		p := props(tbl)
		check := func(what string, got, want any) {
			t.Helper()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: %s = %v, want %v", id, what, got, want)
			}
		}
		check("BillingMode", p["BillingMode"], "PAY_PER_REQUEST")
		check("KeySchema", keySchema(p["KeySchema"]), "pk:HASH sk:RANGE")
		attrs := map[string]string{}
		for _, a := range asList(p["AttributeDefinitions"]) {
			attrs[fmt.Sprint(a["AttributeName"])] = fmt.Sprint(a["AttributeType"])
		}
		check("AttributeDefinitions", attrs, map[string]string{"pk": "S", "sk": "S", "gsi1pk": "S", "gsi1sk": "S"})
		gsis := map[string]string{}
		for _, g := range asList(p["GlobalSecondaryIndexes"]) {
			gsis[fmt.Sprint(g["IndexName"])] = keySchema(g["KeySchema"])
		}
		check("GlobalSecondaryIndexes", gsis, map[string]string{"gsi1": "gsi1pk:HASH gsi1sk:RANGE"})
		check("StreamViewType", dig(p, "StreamSpecification", "StreamViewType"), "NEW_AND_OLD_IMAGES")
		check("PointInTimeRecoveryEnabled", dig(p, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled"), true)
		check("SSEEnabled", dig(p, "SSESpecification", "SSEEnabled"), true)
		check("TimeToLiveSpecification", fmt.Sprint(dig(p, "TimeToLiveSpecification", "AttributeName"), " ", dig(p, "TimeToLiveSpecification", "Enabled")), store.TTLAttribute+" true")
		check("DeletionPolicy", tbl["DeletionPolicy"], "Retain")
	}
}

func asList(v any) []map[string]any {
	var out []map[string]any
	l, _ := v.([]any)
	for _, x := range l {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func keySchema(v any) string {
	var parts []string
	for _, k := range asList(v) {
		parts = append(parts, fmt.Sprintf("%v:%v", k["AttributeName"], k["KeyType"]))
	}
	return strings.Join(parts, " ")
}

func dig(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func TestAdminTokenHandling(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	params, _ := l.doc["Parameters"].(map[string]any)
	p, _ := params["AdminToken"].(map[string]any)
	if p == nil {
		t.Fatal("no AdminToken parameter")
	}
	if p["NoEcho"] != true {
		t.Errorf("AdminToken.NoEcho = %v, want true", p["NoEcho"])
	}
	if _, ok := p["Default"]; ok {
		t.Error("AdminToken has a Default: a secret must not live in the template")
	}
	// Wherever FLUIDBOX_ADMIN_TOKEN is set, it is the parameter, never a literal.
	fns := resources(l.doc, "AWS::Serverless::Function")
	for _, id := range sortedKeys(fns) {
		if v, ok := dig(props(fns[id]), "Environment", "Variables", "FLUIDBOX_ADMIN_TOKEN").(string); ok && v != "REF:AdminToken" {
			t.Errorf("%s: FLUIDBOX_ADMIN_TOKEN = %q, want !Ref AdminToken", id, v)
		}
	}
	if v := dig(l.doc, "Globals", "Function", "Environment", "Variables", "FLUIDBOX_ADMIN_TOKEN"); v != nil {
		t.Error("FLUIDBOX_ADMIN_TOKEN in Globals would hand the token to every function; set it on HTTP functions only")
	}
}

func TestOutputs(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	out, _ := l.doc["Outputs"].(map[string]any)
	for _, name := range []string{"ApiUrl", "TableName"} {
		o, _ := out[name].(map[string]any)
		if o == nil {
			t.Errorf("Outputs has no %s", name)
		} else if o["Value"] == nil {
			t.Errorf("Outputs.%s has no Value", name)
		}
	}
	if n := len(resources(l.doc, "AWS::Serverless::Api")); n != 1 {
		t.Errorf("template has %d AWS::Serverless::Api, want 1", n)
	}
}
