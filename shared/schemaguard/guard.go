package schemaguard

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Bounds of the schema pre-guard. They are part of the security argument:
// every one of them caps work an untrusted MCP server can make us do.
const (
	// MaxSchemaBytes bounds the raw schema (DynamoDB holds one tool per item).
	MaxSchemaBytes = 64 << 10
	// MaxSchemaDepth bounds JSON nesting of the schema document.
	MaxSchemaDepth = 32
	// MaxKeywordBytes bounds each pattern, patternProperties key, format
	// name and $ref string.
	MaxKeywordBytes = 1 << 10
	// MaxExpandedSubschemas bounds the number of subschemas the schema has
	// when every $ref is expanded in place (cycles counted once).
	MaxExpandedSubschemas = 10_000
	// MaxNumberBytes and MaxNumberExponent bound every JSON number, in the
	// schema and in inputs. math/big (used by the engine) is slow on huge
	// exponents and fails on exponents beyond 1e6, which the engine turns
	// into a nil-pointer panic.
	MaxNumberBytes    = 64
	MaxNumberExponent = 400
)

// knownDrafts are the $schema values the engine has built in; anything else
// would make it fetch a metaschema.
var knownDrafts = map[string]bool{}

func init() {
	for _, u := range []string{
		"json-schema.org/draft/2020-12/schema",
		"json-schema.org/draft/2019-09/schema",
		"json-schema.org/draft-07/schema",
		"json-schema.org/draft-06/schema",
		"json-schema.org/draft-04/schema",
	} {
		for _, scheme := range []string{"http://", "https://"} {
			knownDrafts[scheme+u] = true
			knownDrafts[scheme+u+"#"] = true
		}
	}
}

// Keywords whose value is one subschema, an array of subschemas, or an
// object whose values are subschemas. Everything else (enum, const, default,
// examples, unknown keywords) is data and is not walked as a schema.
var (
	singleSchemaKeywords = []string{
		"additionalItems", "additionalProperties", "contains", "contentSchema",
		"else", "if", "not", "propertyNames", "then", "unevaluatedItems",
		"unevaluatedProperties",
	}
	arraySchemaKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	mapSchemaKeywords   = []string{"$defs", "definitions", "dependentSchemas", "properties", "patternProperties"}
)

// guard is the state of one pre-guard pass over a decoded schema.
type guard struct {
	patterned []map[string]any    // every schema object with a string "pattern"
	nodes     map[string]bool     // JSON pointer of every subschema
	children  map[string][]string // subschema -> direct subschemas
	refs      map[string][]ref    // subschema -> its references
	anchors   map[string]string   // anchor name -> pointer
}

type ref struct {
	keyword, value string
}

// preGuard checks a decoded schema document. The returned error's text is a
// human reason, used as RejectError.Reason.
func preGuard(doc any) (*guard, error) {
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema must be a JSON object, not %s", jsonKind(doc))
	}
	if err := checkNumbers(doc); err != nil {
		return nil, err
	}
	g := &guard{
		nodes:    map[string]bool{},
		children: map[string][]string{},
		refs:     map[string][]ref{},
		anchors:  map[string]string{},
	}
	if err := g.walk(root, ""); err != nil {
		return nil, err
	}
	if err := g.resolve(); err != nil {
		return nil, err
	}
	return g, g.expansion()
}

func (g *guard) walk(node any, ptr string) error {
	switch n := node.(type) {
	case bool:
		g.nodes[ptr] = true
		return nil
	case map[string]any:
		return g.walkObject(n, ptr)
	default:
		return fmt.Errorf("%s: a schema must be an object or a boolean, not %s", where(ptr), jsonKind(node))
	}
}

func (g *guard) walkObject(m map[string]any, ptr string) error {
	g.nodes[ptr] = true
	if n := fanOut(m); n > MaxFanOut {
		return fmt.Errorf("%s: has %d direct subschemas and references, over the %d limit", where(ptr), n, MaxFanOut)
	}
	if _, ok := m[ecmaPatternKeyword]; ok {
		return fmt.Errorf("%s: the keyword %q is reserved", where(ptr), ecmaPatternKeyword)
	}
	for _, step := range []func(map[string]any, string) error{g.refsOf, g.identities, g.patterns, g.subschemas} {
		if err := step(m, ptr); err != nil {
			return err
		}
	}
	return nil
}

// refsOf checks and records the schema's references: local, bounded,
// strings.
func (g *guard) refsOf(m map[string]any, ptr string) error {
	for _, kw := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
		v, ok := m[kw]
		if !ok {
			continue
		}
		s, ok := v.(string)
		switch {
		case !ok:
			return fmt.Errorf("%s: %s must be a string", where(ptr), kw)
		case len(s) > MaxKeywordBytes:
			return fmt.Errorf("%s: %s is %d bytes, over the %d limit", where(ptr), kw, len(s), MaxKeywordBytes)
		case !strings.HasPrefix(s, "#"):
			return fmt.Errorf("%s %q is not local (it must start with \"#\")", kw, s)
		case kw == "$recursiveRef" && s != "#":
			return fmt.Errorf("$recursiveRef %q must be \"#\"", s)
		}
		g.refs[ptr] = append(g.refs[ptr], ref{keyword: kw, value: s})
	}
	return nil
}

// identities checks the draft the schema names, and records its ids and
// anchors: a nested id must be a fragment, so the schema stays one
// self-contained document.
func (g *guard) identities(m map[string]any, ptr string) error {
	if v, ok := m["$schema"]; ok {
		s, _ := v.(string)
		if !knownDrafts[s] {
			return fmt.Errorf("$schema %q is not a built-in draft (2020-12, 2019-09, 07, 06 or 04)", truncate(fmt.Sprint(v)))
		}
	}
	for _, kw := range []string{"$id", "id"} {
		s, ok := m[kw].(string)
		if !ok || ptr == "" {
			// The root may name itself; refs starting with "#" still
			// resolve inside this document. A non-string "id" is data.
			continue
		}
		if !strings.HasPrefix(s, "#") || len(s) < 2 {
			return fmt.Errorf("%s: nested %s %q is not allowed (a schema must be one self-contained document)", where(ptr), kw, truncate(s))
		}
		g.anchors[s[1:]] = ptr
	}
	for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
		if s, ok := m[kw].(string); ok {
			g.anchors[s] = ptr
		}
	}
	return nil
}

// patterns checks the schema's format, pattern and patternProperties
// keys, and records a schema with a pattern.
func (g *guard) patterns(m map[string]any, ptr string) error {
	if s, ok := m["format"].(string); ok && len(s) > MaxKeywordBytes {
		return fmt.Errorf("%s: format is %d bytes, over the %d limit", where(ptr), len(s), MaxKeywordBytes)
	}
	if s, ok := m["pattern"].(string); ok {
		if err := checkECMAPattern(s); err != nil {
			return fmt.Errorf("%s: pattern %w", where(ptr), err)
		}
		g.patterned = append(g.patterned, m)
	}
	if pp, ok := m["patternProperties"].(map[string]any); ok {
		for _, k := range sortedKeys(pp) {
			if err := checkRE2Pattern(k); err != nil {
				return fmt.Errorf("%s: patternProperties key %w", where(ptr), err)
			}
		}
	}
	return nil
}

// subschemas walks the schema's subschemas, in a fixed order.
func (g *guard) subschemas(m map[string]any, ptr string) error {
	for _, kw := range singleSchemaKeywords {
		if v, ok := m[kw]; ok {
			if err := g.child(ptr, ptr+"/"+kw, v); err != nil {
				return err
			}
		}
	}
	for _, kw := range append([]string{"items"}, arraySchemaKeywords...) {
		if v, ok := m[kw]; ok {
			if err := g.childOrArray(ptr, kw, v); err != nil {
				return err
			}
		}
	}
	for _, kw := range mapSchemaKeywords {
		mm, ok := m[kw].(map[string]any)
		if !ok {
			continue // not an object: the metaschema check rejects it
		}
		for _, k := range sortedKeys(mm) {
			if err := g.child(ptr, ptr+"/"+kw+"/"+escapeToken(k), mm[k]); err != nil {
				return err
			}
		}
	}
	return g.dependencies(m, ptr)
}

// dependencies walks the schema forms of draft 7's dependencies.
func (g *guard) dependencies(m map[string]any, ptr string) error {
	deps, ok := m["dependencies"].(map[string]any)
	if !ok {
		return nil
	}
	for _, k := range sortedKeys(deps) {
		switch deps[k].(type) {
		case map[string]any, bool:
			if err := g.child(ptr, ptr+"/dependencies/"+escapeToken(k), deps[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// fanOut counts the direct subschemas and references of a schema object:
// what one evaluation of it may visit.
func fanOut(m map[string]any) int {
	n := 0
	for _, kw := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
		if _, ok := m[kw]; ok {
			n++
		}
	}
	isSchema := func(v any) bool {
		switch v.(type) {
		case map[string]any, bool:
			return true
		}
		return false
	}
	for _, kw := range singleSchemaKeywords {
		if isSchema(m[kw]) {
			n++
		}
	}
	for _, kw := range append([]string{"items"}, arraySchemaKeywords...) {
		switch v := m[kw].(type) {
		case []any:
			n += len(v)
		case map[string]any, bool:
			n++
		}
	}
	for _, kw := range append([]string{"dependencies"}, mapSchemaKeywords...) {
		if kw == "$defs" || kw == "definitions" {
			continue // definitions are not applied by the object holding them
		}
		if mm, ok := m[kw].(map[string]any); ok {
			n += len(mm)
		}
	}
	return n
}

func (g *guard) child(parent, ptr string, v any) error {
	switch v.(type) {
	case map[string]any, bool:
	default:
		return nil // a keyword of the wrong type: the metaschema check rejects it
	}
	g.children[parent] = append(g.children[parent], ptr)
	return g.walk(v, ptr)
}

func (g *guard) childOrArray(parent, kw string, v any) error {
	if a, ok := v.([]any); ok {
		for i, item := range a {
			if err := g.child(parent, parent+"/"+kw+"/"+strconv.Itoa(i), item); err != nil {
				return err
			}
		}
		return nil
	}
	return g.child(parent, parent+"/"+kw, v)
}

// resolve checks that every reference names a subschema or an anchor of
// this document, so the engine never has to look elsewhere and the
// expansion bound below sees every edge.
func (g *guard) resolve() error {
	for _, from := range sortedKeys(g.refs) {
		for i, r := range g.refs[from] {
			target, err := g.target(r.value)
			if err != nil {
				return fmt.Errorf("%s %q %w", r.keyword, truncate(r.value), err)
			}
			g.refs[from][i].value = target
		}
	}
	return nil
}

func (g *guard) target(s string) (string, error) {
	frag := strings.TrimPrefix(s, "#")
	if frag == "" || frag == "/" {
		return "", nil
	}
	if !strings.HasPrefix(frag, "/") {
		ptr, ok := g.anchors[frag]
		if !ok {
			return "", errors.New("names an anchor this schema does not define")
		}
		return ptr, nil
	}
	dec, err := url.PathUnescape(frag)
	if err != nil {
		return "", errors.New("is not a valid JSON pointer")
	}
	var b strings.Builder
	for _, tok := range strings.Split(dec[1:], "/") {
		b.WriteString("/")
		b.WriteString(escapeToken(unescapeToken(tok)))
	}
	ptr := b.String()
	if !g.nodes[ptr] {
		return "", errors.New("does not point at a subschema of this document")
	}
	return ptr, nil
}

// expansion computes how many subschemas the document has with every $ref
// expanded in place. A DAG of references doubling at each level is small on
// disk and exponential to validate; this bound refuses it. A reference back
// into its own ancestry adds nothing (the engine detects loops that consume
// no input, and loops that do are bounded by the input bounds).
func (g *guard) expansion() error {
	const inProgress = -1
	memo := map[string]int{}
	var size func(ptr string) int
	size = func(ptr string) int {
		if v, ok := memo[ptr]; ok {
			if v == inProgress {
				return 0
			}
			return v
		}
		memo[ptr] = inProgress
		n := 1
		for _, c := range g.children[ptr] {
			n = satAdd(n, size(c))
		}
		for _, r := range g.refs[ptr] {
			n = satAdd(n, size(r.value))
		}
		memo[ptr] = n
		return n
	}
	if n := size(""); n > MaxExpandedSubschemas {
		return fmt.Errorf("schema expands through $ref to more than %d subschemas", MaxExpandedSubschemas)
	}
	return nil
}

func satAdd(a, b int) int {
	if a > math.MaxInt32 || b > math.MaxInt32 {
		return math.MaxInt32 + 1
	}
	return a + b
}

// checkECMAPattern checks a "pattern": it runs on regexp2 (see ecma.go).
func checkECMAPattern(p string) error {
	if len(p) > MaxKeywordBytes {
		return fmt.Errorf("is %d bytes, over the %d limit", len(p), MaxKeywordBytes)
	}
	_, err := compileECMA(p)
	return err
}

// checkRE2Pattern checks a patternProperties key: the engine matches those
// itself, with Go's RE2 (linear time), so they must be RE2 expressions.
func checkRE2Pattern(p string) error {
	if len(p) > MaxKeywordBytes {
		return fmt.Errorf("is %d bytes, over the %d limit", len(p), MaxKeywordBytes)
	}
	if _, err := regexp.Compile(p); err != nil {
		return fmt.Errorf("%q does not compile as an RE2 regular expression: %v", truncate(p), err)
	}
	return nil
}

// checkNumbers bounds every number in a decoded document.
func checkNumbers(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if err := checkNumbers(t[k]); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range t {
			if err := checkNumbers(x); err != nil {
				return err
			}
		}
	case json.Number:
		return checkNumber(string(t))
	}
	return nil
}

// checkNumber accepts a JSON number literal of bounded length whose exponent
// and value fit a float64.
func checkNumber(s string) error {
	if len(s) == 0 || len(s) > MaxNumberBytes {
		return fmt.Errorf("number %q is longer than %d characters", truncate(s), MaxNumberBytes)
	}
	if c := s[0]; c != '-' && (c < '0' || c > '9') || !json.Valid([]byte(s)) {
		return fmt.Errorf("%q is not a JSON number", truncate(s))
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(s[i+1:])
		if err != nil || exp > MaxNumberExponent || exp < -MaxNumberExponent {
			return fmt.Errorf("number %q has an exponent beyond ±%d", s, MaxNumberExponent)
		}
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return fmt.Errorf("number %q is out of range", s)
	}
	return nil
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func unescapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

func where(ptr string) string {
	if ptr == "" {
		return "schema root"
	}
	return "schema at #" + ptr
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

func truncate(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
