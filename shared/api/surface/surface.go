// Package surface writes what is derived from the route rows (route.Route,
// gathered by shared/api.Surface): docs/openapi.yaml's paths,
// template.yaml's Api events and docs/api.md's route index. `go generate
// ./shared/api` runs it (./generate); infra's TestGeneratedSurfaceCurrent
// fails when a row changed and the files were not generated again.
//
// Each file keeps everything outside what is generated: openapi.yaml's
// info and components, the template's other resources and events, the
// contract's prose. The generated parts are found by their markers
// (template.yaml, api.md) or by the paths key (openapi.yaml), and a file
// without them is an error, never a guess.
package surface

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fluidbox/fluidbox/shared/api/route"
)

// The files Generate writes, relative to the repository's root.
const (
	OpenAPIFile  = "docs/openapi.yaml"
	TemplateFile = "template.yaml"
	ContractFile = "docs/api.md"
)

// Generate returns the new contents of each generated file, given its
// current contents (read reads a file relative to the repository's root).
func Generate(rows []route.Route, read func(string) ([]byte, error)) (map[string][]byte, error) {
	if err := check(rows); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, g := range []struct {
		file string
		gen  func([]route.Route, []byte) ([]byte, error)
	}{{OpenAPIFile, OpenAPI}, {TemplateFile, Template}, {ContractFile, Contract}} {
		cur, err := read(g.file)
		if err != nil {
			return nil, err
		}
		if out[g.file], err = g.gen(rows, cur); err != nil {
			return nil, fmt.Errorf("%s: %w", g.file, err)
		}
	}
	return out, nil
}

// errorResponses names the shared response of components/responses that
// documents each status of Doc.Errors.
var errorResponses = map[int]string{
	400: "BadRequest", 401: "Unauthenticated", 402: "BudgetExhausted", 403: "Forbidden", 404: "NotFound",
	409: "Conflict", 413: "TooLarge", 500: "Internal", 503: "Unavailable",
}

var paramName = regexp.MustCompile(`\{[^}]*\}`)

// shape is a path with its parameter names erased.
func shape(p string) string { return paramName.ReplaceAllString(p, "{}") }

// check refuses rows that cannot be documented: a documented row without
// an id or tag, two rows documenting one operation, an id used twice, an
// error status without a shared response, a Doc.Path of another shape
// than the pattern's, an undocumented row with documentation, or an API
// Gateway row without an id to name its event.
func check(rows []route.Route) error {
	ids := map[string]string{}
	ops := map[string]string{}
	for _, r := range rows {
		d := r.Doc
		if r.Undocumented != "" {
			if d.ID != "" || d.OpenAPI != "" {
				return fmt.Errorf("%s says it is undocumented (%s) but has documentation", r.Pattern, r.Undocumented)
			}
			if r.Via == route.APIGateway {
				return fmt.Errorf("%s is an Api event of %s: it needs an operation id, so documentation", r.Pattern, r.Function.Resource())
			}
			continue
		}
		if d.ID == "" || d.Tag == "" || r.Method() == "" {
			return fmt.Errorf("%s: a documented row needs a method, Doc.ID and Doc.Tag (or Undocumented, saying why not)", r.Pattern)
		}
		if d.OpenAPI == "" {
			return fmt.Errorf("%s: no operation %s in its package's operations.yaml", r.Pattern, d.ID)
		}
		if prev, ok := ids[d.ID]; ok {
			return fmt.Errorf("operation id %s is used by %s and %s", d.ID, prev, r.Pattern)
		}
		ids[d.ID] = r.Pattern
		_, path, _ := strings.Cut(r.Pattern, " ")
		if shape(r.DocPath()) != shape(strings.ReplaceAll(path, "{$}", "")) {
			return fmt.Errorf("%s: Doc.Path %s is not the pattern's path", r.Pattern, d.Path)
		}
		key := r.Method() + " " + shape(r.DocPath())
		if prev, ok := ops[key]; ok {
			return fmt.Errorf("%s and %s document one operation; mark one Undocumented", prev, r.Pattern)
		}
		ops[key] = r.Pattern
		for _, code := range d.Errors {
			if _, ok := errorResponses[code]; !ok {
				return fmt.Errorf("%s: error status %d has no shared response in components/responses; document it in operations.yaml", r.Pattern, code)
			}
		}
	}
	return nil
}

// OpenAPI is the OpenAPI document cur with its paths written from rows:
// every documented row is an operation, grouped by path in row order.
func OpenAPI(rows []route.Route, cur []byte) ([]byte, error) {
	paths := &yaml.Node{Kind: yaml.MappingNode}
	items := map[string]*yaml.Node{}
	for _, r := range rows {
		if r.Undocumented != "" {
			continue
		}
		op, err := operation(r)
		if err != nil {
			return nil, err
		}
		p := r.DocPath()
		item, ok := items[p]
		if !ok {
			item = &yaml.Node{Kind: yaml.MappingNode}
			items[p] = item
			paths.Content = append(paths.Content, scalar(p), item)
		}
		item.Content = append(item.Content, scalar(strings.ToLower(r.Method())), op)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{scalar("paths"), paths}}); err != nil {
		return nil, err
	}
	gen := Wrap(blankBetweenPaths(b.Bytes()))
	start, end, err := topLevel(cur, "paths")
	if err != nil {
		return nil, err
	}
	return slices.Concat(cur[:start], gen, []byte("\n"), cur[end:]), nil
}

// operation is r's OpenAPI operation: tags, operationId and summary from
// Doc, security and x-fluidbox-access from Access, the rest from
// Doc.OpenAPI, with Doc.Errors' shared responses among its responses.
func operation(r route.Route) (*yaml.Node, error) {
	var rest yaml.Node
	if err := yaml.Unmarshal([]byte(r.Doc.OpenAPI), &rest); err != nil {
		return nil, fmt.Errorf("%s: operation %s: %w", r.Pattern, r.Doc.ID, err)
	}
	if rest.Kind != yaml.DocumentNode || len(rest.Content) != 1 || rest.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: operation %s is not a mapping", r.Pattern, r.Doc.ID)
	}
	fields := rest.Content[0].Content
	op := &yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v *yaml.Node) { op.Content = append(op.Content, scalar(k), v) }
	add("tags", &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle, Content: []*yaml.Node{scalar(r.Doc.Tag)}})
	add("operationId", scalar(r.Doc.ID))
	if r.Doc.Summary != "" {
		add("summary", scalar(r.Doc.Summary))
	}
	var responses *yaml.Node
	var others []*yaml.Node
	for i := 0; i < len(fields); i += 2 {
		k, v := fields[i], fields[i+1]
		switch k.Value {
		case "description":
			add("description", v)
		case "responses":
			responses = v
		case "parameters", "requestBody", "deprecated", "externalDocs", "callbacks":
			others = append(others, k, v)
		default:
			return nil, fmt.Errorf("%s: operation %s: %q is not written in operations.yaml (the row says it, or it is not an operation's)", r.Pattern, r.Doc.ID, k.Value)
		}
	}
	if sec := security(r.Access); sec != nil {
		add("security", sec)
	}
	add("x-fluidbox-access", scalar(string(r.Access)))
	op.Content = append(op.Content, others...)
	merged, err := withErrors(r, responses)
	if err != nil {
		return nil, err
	}
	add("responses", merged)
	return op, nil
}

// security is what the access asks of a caller, where it is not the
// document's default bearer: nothing, or the run's session token as an
// API key.
func security(a route.Access) *yaml.Node {
	switch a {
	case route.Public, route.Signed:
		return &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	case route.RunKey:
		return &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Content: []*yaml.Node{
			scalar("sessionApiKey"), {Kind: yaml.SequenceNode, Style: yaml.FlowStyle},
		}}}}
	}
	return nil
}

// withErrors is the responses of the operation with a reference to the
// shared response of each Doc.Errors status, ordered by status.
func withErrors(r route.Route, responses *yaml.Node) (*yaml.Node, error) {
	type entry struct {
		code int
		k, v *yaml.Node
	}
	var all []entry
	if responses != nil {
		for i := 0; i+1 < len(responses.Content); i += 2 {
			k := responses.Content[i]
			code, err := strconv.Atoi(k.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: response %q is not a status", r.Pattern, k.Value)
			}
			if slices.Contains(r.Doc.Errors, code) {
				return nil, fmt.Errorf("%s: status %d is both in Doc.Errors and in operations.yaml", r.Pattern, code)
			}
			k.Style = yaml.SingleQuotedStyle
			all = append(all, entry{code, k, responses.Content[i+1]})
		}
	}
	for _, code := range r.Doc.Errors {
		ref := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{
			scalar("$ref"), {Kind: yaml.ScalarNode, Style: yaml.SingleQuotedStyle, Value: "#/components/responses/" + errorResponses[code]},
		}}
		all = append(all, entry{code, &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.SingleQuotedStyle, Value: strconv.Itoa(code)}, ref})
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: operation %s answers nothing", r.Pattern, r.Doc.ID)
	}
	slices.SortStableFunc(all, func(a, b entry) int { return a.code - b.code })
	out := &yaml.Node{Kind: yaml.MappingNode}
	for _, e := range all {
		out.Content = append(out.Content, e.k, e.v)
	}
	return out, nil
}

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// blankBetweenPaths puts a blank line before each path after the first.
func blankBetweenPaths(b []byte) []byte {
	lines := strings.Split(string(b), "\n")
	var out []string
	for i, l := range lines {
		if i > 1 && strings.HasPrefix(l, "  ") && !strings.HasPrefix(l, "   ") {
			out = append(out, "")
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "\n"))
}

// topLevel finds the block of a top-level key of a YAML document: from its
// line to the next top-level key, or to the comment lines just above it.
func topLevel(doc []byte, key string) (start, end int, err error) {
	start, end = -1, len(doc)
	pos, comments := 0, -1 // comments: where the comment lines above this line start
	for _, l := range bytes.SplitAfter(doc, []byte("\n")) {
		switch {
		case len(l) > 0 && l[0] == '#':
			if comments < 0 {
				comments = pos
			}
		case len(bytes.TrimSpace(l)) == 0:
			comments = -1
		case l[0] != ' ' && start < 0 && bytes.HasPrefix(l, []byte(key+":")):
			start = pos
		case l[0] != ' ' && start >= 0:
			if comments >= 0 {
				return start, comments, nil
			}
			return start, pos, nil
		default:
			comments = -1
		}
		pos += len(l)
	}
	if start < 0 {
		return 0, 0, fmt.Errorf("no top-level %q", key)
	}
	return start, end, nil
}

// Wrap folds the long lines of folded block scalars (>, >-) at 80
// columns, which the YAML encoder writes as one line: the value reads back
// the same.
func Wrap(b []byte) []byte {
	var out []string
	key, content := -1, -1 // indents of the folded scalar's key and text; -1 outside one
	for _, l := range strings.Split(string(b), "\n") {
		ind := len(l) - len(strings.TrimLeft(l, " "))
		if key >= 0 && strings.TrimSpace(l) != "" {
			switch {
			case ind <= key:
				key, content = -1, -1
			case content < 0:
				content = ind
			}
		}
		if key >= 0 && ind == content && len(l) > 80 {
			out = append(out, fold(l, ind)...)
			continue
		}
		out = append(out, l)
		if t := strings.TrimSpace(l); strings.HasSuffix(t, ": >-") || strings.HasSuffix(t, ": >") {
			key, content = ind, -1
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// fold breaks a line of a folded scalar at single spaces, each piece
// indented as the line was; a line holding a double space is left whole.
func fold(l string, ind int) []string {
	if strings.Contains(l[ind:], "  ") || strings.HasSuffix(l, " ") {
		return []string{l}
	}
	words := strings.Split(l[ind:], " ")
	pad := strings.Repeat(" ", ind)
	var out []string
	cur := pad + words[0]
	for _, w := range words[1:] {
		if len(cur)+1+len(w) > 80 {
			out = append(out, cur)
			cur = pad + w
			continue
		}
		cur += " " + w
	}
	return append(out, cur)
}
