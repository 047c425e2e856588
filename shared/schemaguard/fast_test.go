package schemaguard

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestFastPath pins the semantics the fast path must share with the engine.
// For each input: whether it is valid (the engine's answer, which Validate
// must give), and whether the fast path alone shows it valid.
func TestFastPath(t *testing.T) {
	t.Parallel()
	const draft7 = `"$schema":"http://json-schema.org/draft-07/schema#",`
	const draft2020 = `"$schema":"https://json-schema.org/draft/2020-12/schema",`
	type input struct {
		value       any
		valid, fast bool
	}
	n := func(s string) json.Number { return json.Number(s) }
	tests := []struct {
		name   string
		schema string
		inputs []input
	}{
		{"integer accepts whole json.Numbers", `{"type":"integer"}`, []input{
			{n("1"), true, true}, {n("1.0"), true, true}, {n("1e2"), true, true}, {n("1.5e1"), true, true},
			{n("-0"), true, true}, {n("1E+2"), true, true}, {n("100e-2"), true, true},
			{n("1.5"), false, false}, {n("1e-2"), false, false}, {n("12345678901234567890.5"), false, false},
			{n("123456789012345678901234567890"), true, true},
			{1.0, true, true}, {1e21, true, true}, {0.5, false, false},
			{"1", false, false}, {true, false, false}, {nil, false, false},
		}},
		{"integer in draft-07", `{` + draft7 + `"type":"integer"}`, []input{
			{n("1.0"), true, true}, {n("2.50"), false, false},
		}},
		{"number is not boolean or string", `{"type":"number"}`, []input{
			{n("0"), true, true}, {true, false, false}, {"0", false, false}, {nil, false, false},
		}},
		{"boolean is not number", `{"type":"boolean"}`, []input{
			{false, true, true}, {n("1"), false, false}, {n("0"), false, false},
		}},
		{"type list with null", `{"type":["string","null"]}`, []input{
			{nil, true, true}, {"", true, true}, {n("1"), false, false}, {map[string]any{}, false, false},
		}},
		{"lengths count code points", `{"minLength":2,"maxLength":3}`, []input{
			{"日本", true, true}, {"日本語", true, true}, {"日本語!", false, false},
			{"😀😀", true, true}, {"😀😀😀😀", false, false},
			{"é", false, false}, {"e\u0301", true, true}, {n("1"), true, true},
		}},
		{"length bounds written as 2.0 and 1e1", `{"minLength":2.0,"maxLength":1e1}`, []input{
			{"ab", true, true}, {"a", false, false}, {strings.Repeat("x", 11), false, false},
		}},
		{"enum numbers compare by value", `{"enum":[1,"a",null,false]}`, []input{
			{n("1"), true, true}, {n("1.0"), true, true}, {n("1e0"), true, true}, {n("10e-1"), true, true}, {1.0, true, true},
			{n("2"), false, false}, {"1", false, false}, {"a", true, true}, {nil, true, true},
			{false, true, true}, {true, false, false}, {[]any{n("1")}, false, false},
		}},
		{"enum of 1.0 takes 1", `{"enum":[1.0]}`, []input{
			{n("1"), true, true}, {n("1.00000000000000000001"), false, false},
		}},
		{"const zero takes minus zero", `{"const":0}`, []input{
			{n("-0"), true, true}, {n("0.0"), true, true}, {-0.0, true, true}, {n("0.1"), false, false}, {false, false, false},
		}},
		{"const null", `{"const":null}`, []input{{nil, true, true}, {n("0"), false, false}, {"", false, false}}},
		{"empty enum constrains nothing", `{"enum":[]}`, []input{{n("1"), true, true}, {"x", true, true}}},
		{"required and no additional properties",
			`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`, []input{
				{map[string]any{"a": "x"}, true, true},
				{map[string]any{}, false, false},
				{map[string]any{"a": "x", "b": n("2")}, false, false},
				{map[string]any{"a": n("1")}, false, false},
			}},
		{"additional properties by schema", `{"properties":{"a":{}},"additionalProperties":{"type":"integer"}}`, []input{
			{map[string]any{"a": "x", "b": n("2.0")}, true, true}, {map[string]any{"b": "x"}, false, false},
			{[]any{"not", "an", "object"}, true, true},
		}},
		{"nested arrays", `{"type":"array","items":{"type":"array","items":{"type":"integer"},"maxItems":2},"minItems":1}`, []input{
			{[]any{[]any{n("1"), n("2")}, []any{n("3.0")}}, true, true},
			{[]any{[]any{n("1"), n("2"), n("3")}}, false, false},
			{[]any{[]any{n("1.5")}}, false, false},
			{[]any{}, false, false},
			{[]any{[]any{}}, true, true},
		}},
		{"unique items compare by value", `{"uniqueItems":true}`, []input{
			{[]any{n("1"), "1", true, nil, map[string]any{"a": n("1")}, map[string]any{"a": n("2")}}, true, true},
			{[]any{n("1"), n("1.0")}, false, false},
			{[]any{n("1"), 1.0}, false, false},
			{[]any{map[string]any{"a": n("1"), "b": nil}, map[string]any{"b": nil, "a": n("1e0")}}, false, false},
			{[]any{[]any{n("1"), "x"}, []any{n("1"), "x"}}, false, false},
			{[]any{[]any{n("1"), "x"}, []any{"x", n("1")}}, true, true},
		}},
		{"bounds are exact", `{"minimum":0.1,"exclusiveMaximum":1}`, []input{
			{0.1, true, true}, {n("0.1"), true, true}, {n("0.09999999999999999999"), false, false},
			{n("0.99999999999999999999"), true, true}, {n("1.0"), false, false}, {1.0, false, false},
			{"strings are not bounded", true, true},
		}},
		{"exclusive minimum and maximum", `{"exclusiveMinimum":-1.5,"maximum":1e2}`, []input{
			{n("-1.5"), false, false}, {n("-1.49"), true, true}, {n("100"), true, true}, {n("100.0000001"), false, false},
		}},
		{"false subschema", `{"properties":{"a":false},"items":true}`, []input{
			{map[string]any{}, true, true}, {map[string]any{"a": nil}, false, false},
		}},
		{"known format is asserted without $schema", `{"format":"email"}`, []input{
			{"x", false, false}, {"a@example.com", true, false},
		}},
		{"known format is asserted in draft-07", `{` + draft7 + `"format":"date"}`, []input{
			{"x", false, false}, {"2026-01-02", true, false},
		}},
		{"unknown format is annotation", `{` + draft7 + `"format":"colour"}`, []input{{"x", true, true}}},
		{"format is annotation in explicit 2020-12", `{` + draft2020 + `"format":"email"}`, []input{{"x", true, true}}},
		{"outside the subset below the root", `{"properties":{"p":{"type":"string","pattern":"^a"}}}`, []input{
			{map[string]any{"q": "b"}, true, true}, {map[string]any{"p": "a"}, true, false}, {map[string]any{"p": "b"}, false, false},
		}},
		{"unique items beyond the fast bound", `{"uniqueItems":true}`, []input{{manyInts(maxFastUnique + 1), true, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tt.schema)
			for _, in := range tt.inputs {
				err := s.Validate(in.value)
				if valid := err == nil; valid != in.valid {
					t.Errorf("Validate(%#v) = %v, want valid=%v", in.value, err, in.valid)
				}
				if engine := s.validate(in.value) == nil; engine != in.valid {
					t.Errorf("engine on %#v: valid=%v, want %v", in.value, engine, in.valid)
				}
				if fast := s.fastValid(in.value); fast != in.fast {
					t.Errorf("fastValid(%#v) = %v, want %v", in.value, fast, in.fast)
				}
			}
		})
	}
}

func manyInts(n int) []any {
	a := make([]any, n)
	for i := range a {
		a[i] = json.Number(strconv.Itoa(i))
	}
	return a
}

// TestFastPathFallsBackWithReasons: what the fast path does not accept is
// the engine's to reject, with the engine's reasons.
func TestFastPathFallsBackWithReasons(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"properties":{"a":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`)
	if s.fast == nil {
		t.Fatal("schema of the subset has no fast tree")
	}
	var ie *InvalidError
	if err := s.Validate(decode(t, `{"a":1.5,"c":true}`)); !errors.As(err, &ie) {
		t.Fatalf("Validate = %v, want *InvalidError", err)
	}
	want := []string{
		"input.a: expected integer, but got number",
		"input.b: required property missing",
		"input.c: property is not allowed",
	}
	if !slices.Equal(ie.Causes, want) {
		t.Errorf("Causes = %q, want %q", ie.Causes, want)
	}
}

// TestCompileFastSubset: which schemas get a fast tree at all.
func TestCompileFastSubset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		schema string
		fast   bool
	}{
		{`{}`, true},
		{`{"type":"object","title":"t","description":"d","default":{},"examples":[{}],"$comment":"c"}`, true},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","items":{"type":"string"}}`, true},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","format":"uri"}`, true},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","type":"string"}`, false},
		{`{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"string"}`, false},
		{`{"$schema":"http://json-schema.org/draft-06/schema#","type":"string"}`, false},
		{`{"pattern":"^a"}`, false},
		{`{"format":"email"}`, false},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}]}`, false},
		{`{"enum":[{"a":1}]}`, false},
		{`{"const":[1]}`, false},
		{`{"$defs":{"a":{}},"$ref":"#/$defs/a"}`, false},
		{`{"minLength":1e300}`, false},
		{`{"maxItems":2147483648}`, false},
		{`{"anyOf":[{"type":"string"}]}`, false},
		{`{"properties":{"a":{"$schema":"http://json-schema.org/draft-07/schema#"}}}`, true}, // opaque below the root
	}
	for _, tt := range tests {
		s := mustCompile(t, tt.schema)
		if got := s.fast != nil; got != tt.fast {
			t.Errorf("Compile(%s) has fast tree = %v, want %v", tt.schema, got, tt.fast)
		}
	}
}

func TestParseDecimal(t *testing.T) {
	t.Parallel()
	equal := [][]string{ // classes of equal literals, in increasing order
		{"-2.5", "-25e-1", "-0.25E1"},
		{"0", "-0", "0.0", "0e10", "-0.000e-5"},
		{"1", "1.0", "1e0", "10e-1", "0.1e1", "1E+0", "100e-2"},
		{"123456789012345678901234567890", "1.23456789012345678901234567890e29"},
	}
	for i, class := range equal {
		for _, a := range class {
			da, ok := parseDecimal(a)
			if !ok {
				t.Fatalf("parseDecimal(%q) failed", a)
			}
			for _, b := range class {
				db, _ := parseDecimal(b)
				if c := da.cmp(&db); c != 0 {
					t.Errorf("cmp(%q, %q) = %d, want 0", a, b, c)
				}
			}
			if i+1 < len(equal) {
				db, _ := parseDecimal(equal[i+1][0])
				if c := da.cmp(&db); c != -1 {
					t.Errorf("cmp(%q, %q) = %d, want -1", a, equal[i+1][0], c)
				}
			}
		}
	}
	ordered := []string{"-1e300", "-2", "-1.5", "-1", "-0.5", "-1e-300", "0", "1e-300", "0.0999", "0.1", "0.10000000000000000001", "1", "1.5", "9", "10", "1e300"}
	for i := range ordered {
		for j := range ordered {
			a, _ := parseDecimal(ordered[i])
			b, _ := parseDecimal(ordered[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.cmp(&b); got != want {
				t.Errorf("cmp(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	for _, bad := range []string{"", "-", "e1", "1e", "1e+", "0x1", "1..2", "1e1e1", strings.Repeat("1", maxDecimalDigits+1)} {
		if _, ok := parseDecimal(bad); ok {
			t.Errorf("parseDecimal(%q) = ok, want failure", bad)
		}
	}
}

// FuzzFastPathMatchesEngine is the differential test: for a random schema
// of the subset and a random input, the fast path shows the input valid if
// and only if the engine finds it valid. The bytes drive a generator, so
// the fuzzer explores schemas and inputs together.
func FuzzFastPathMatchesEngine(f *testing.F) {
	for _, seed := range []string{
		"\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a",
		"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1",
		"\x03\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastMatchesEngine(t, &chooser{data: data})
	})
}

// TestFastPathMatchesEngineRandom runs the differential check on
// pseudo-random choices, so every go test covers it.
func TestFastPathMatchesEngineRandom(t *testing.T) {
	t.Parallel()
	n := 3000
	if testing.Short() {
		n = 300
	}
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 256)
	for range n {
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		checkFastMatchesEngine(t, &chooser{data: data})
		if t.Failed() {
			return
		}
	}
}

// checkFastMatchesEngine generates a schema of the subset and a few inputs
// from c, and fails when the fast path and the engine disagree.
func checkFastMatchesEngine(t *testing.T, c *chooser) {
	t.Helper()
	g := &schemaGen{c: c}
	schema := g.root()
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatalf("marshal generated schema: %v", err)
	}
	s, err := Compile(raw)
	if err != nil {
		return // the metaschema refused it (e.g. an empty draft-07 enum)
	}
	if s.fast == nil {
		t.Fatalf("schema of the subset has no fast tree: %s", raw)
	}
	for range 1 + c.n(4) {
		in := g.value(schema, 0)
		if checkInput(in) != "" {
			continue
		}
		engine := s.validate(in) == nil
		fast := s.fastValid(in)
		if fast != engine {
			b, _ := json.Marshal(in)
			t.Fatalf("schema %s, input %s (%#v): fast path valid=%v, engine valid=%v", raw, b, in, fast, engine)
		}
		if err := s.Validate(in); (err == nil) != engine {
			t.Fatalf("schema %s, input %#v: Validate = %v, engine valid=%v", raw, in, err, engine)
		}
	}
}

// chooser turns fuzz bytes into choices; once they run out every choice is
// 0, which generators read as "stop" or "the simplest".
type chooser struct {
	data []byte
	i    int
}

func (c *chooser) n(k int) int {
	if c.i >= len(c.data) || k <= 0 {
		return 0
	}
	v := int(c.data[c.i])
	c.i++
	return v % k
}

func (c *chooser) pick(options []string) string { return options[c.n(len(options))] }

var (
	genNumbers = []string{
		"0", "1", "-0", "1.0", "1e0", "10e-1", "2", "-1", "0.5", "1.5", "3", "100", "1e2", "1E+2",
		"0.1", "-0.5", "1e-7", "2.5e1", "7", "12345678901234567890", "12345678901234567890.5",
		"1e300", "-1e300", "0.30000000000000004", "0.99999999999999999999", "4.0", "255",
	}
	genFloats  = []float64{0, 1, 1.5, 0.1, 1e21, 1e-7, 100, 2.5, 0.30000000000000004, 7, -1, 3, 4}
	genStrings = []string{"", "a", "ab", "abc", "é", "e\u0301", "日本語", "😀", "😀😀", "Bug", "x", "1", "true", "a@b.c"}
	genNames   = []string{"a", "b", "c", "owner", "odd key"}
	genTypes   = []string{"null", "boolean", "object", "array", "number", "integer", "string"}
	genCounts  = []string{"0", "1", "2", "3", "4", "2.0", "1e1", "0.0"}
	genFormats = []string{"colour", "x-unknown"} // names the engine has no checker for
)

// schemaGen generates schemas of the fast subset, as decoded JSON, and
// inputs steered by them.
type schemaGen struct {
	c         *chooser
	draft2020 bool // an explicit 2020-12 $schema: every format annotates
}

func (g *schemaGen) root() any {
	m := map[string]any{}
	switch g.c.n(3) {
	case 1:
		m["$schema"] = "http://json-schema.org/draft-07/schema#"
	case 2:
		m["$schema"] = "https://json-schema.org/draft/2020-12/schema"
		g.draft2020 = true
	}
	g.fill(m, 0)
	return m
}

func (g *schemaGen) schema(depth int) any {
	switch g.c.n(8) {
	case 1:
		return true
	case 2:
		return false
	}
	m := map[string]any{}
	g.fill(m, depth)
	return m
}

func (g *schemaGen) fill(m map[string]any, depth int) {
	for range g.c.n(6) {
		if k := g.c.n(22); k < 9 {
			g.fillShape(m, k, depth)
		} else {
			g.fillBound(m, k)
		}
	}
}

// fillShape sets keyword k (0 to 8) of the shape: types, properties,
// required, additionalProperties, items, enum, const.
func (g *schemaGen) fillShape(m map[string]any, k, depth int) {
	c := g.c
	switch k {
	case 0:
		m["type"] = c.pick(genTypes)
	case 1:
		m["type"] = g.distinct(1+c.n(3), func() any { return c.pick(genTypes) })
	case 2:
		if depth < 3 {
			props := map[string]any{}
			for range 1 + c.n(3) {
				props[c.pick(genNames)] = g.schema(depth + 1)
			}
			m["properties"] = props
		}
	case 3:
		m["required"] = g.distinct(c.n(3), func() any { return c.pick(genNames) })
	case 4:
		if depth < 3 {
			m["additionalProperties"] = g.schema(depth + 1)
		}
	case 5:
		m["additionalProperties"] = c.n(2) == 1
	case 6:
		if depth < 3 {
			m["items"] = g.schema(depth + 1)
		}
	case 7:
		m["enum"] = g.distinct(c.n(4), g.scalar)
	case 8:
		m["const"] = g.scalar()
	}
}

// distinct draws n values and keeps each once, in order.
func (g *schemaGen) distinct(n int, draw func() any) []any {
	var out []any
	for range n {
		if v := draw(); !slices.ContainsFunc(out, func(x any) bool { return x == v }) {
			out = append(out, v)
		}
	}
	return out
}

// fillBound sets keyword k (9 to 21): the bounds, annotations, format,
// and a closed object.
func (g *schemaGen) fillBound(m map[string]any, k int) {
	c := g.c
	bounds := map[int]string{9: "minimum", 10: "maximum", 11: "exclusiveMinimum", 12: "exclusiveMaximum"}
	counts := map[int]string{13: "minLength", 14: "maxLength", 15: "minItems", 16: "maxItems"}
	switch {
	case bounds[k] != "":
		m[bounds[k]] = json.Number(c.pick(genNumbers))
	case counts[k] != "":
		m[counts[k]] = json.Number(c.pick(genCounts))
	case k == 17:
		m["uniqueItems"] = c.n(2) == 1
	case k == 18:
		m["description"] = c.pick(genStrings)
		m["title"] = c.pick(genStrings)
	case k == 19:
		m["default"] = g.scalar()
		m["examples"] = []any{g.scalar()}
		m["$comment"] = "c"
	case k == 20 && g.draft2020:
		m["format"] = c.pick([]string{"email", "date", "uri", "ipv4", "colour"})
	case k == 20:
		m["format"] = c.pick(genFormats)
	case k == 21:
		m["type"] = "object"
		m["additionalProperties"] = false
	}
}

func (g *schemaGen) scalar() any {
	switch g.c.n(4) {
	case 0:
		return nil
	case 1:
		return g.c.n(2) == 1
	case 2:
		return g.c.pick(genStrings)
	}
	return json.Number(g.c.pick(genNumbers))
}

// value generates an input, mostly shaped by schema so that valid inputs
// are common, sometimes arbitrary.
func (g *schemaGen) value(schema any, depth int) any {
	c := g.c
	m, _ := schema.(map[string]any)
	if m == nil || c.n(8) == 0 || depth > 4 {
		return g.anyValue(depth)
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 && c.n(4) != 0 {
		return g.respell(e[c.n(len(e))])
	}
	if k, ok := m["const"]; ok && c.n(4) != 0 {
		return g.respell(k)
	}
	switch kind := g.kind(m); kind {
	case "null":
		return nil
	case "boolean":
		return c.n(2) == 1
	case "string":
		return c.pick(genStrings)
	case "number", "integer":
		return g.number()
	case "object":
		return g.object(m, depth)
	case "array":
		arr := []any{}
		for range c.n(5) {
			arr = append(arr, g.value(m["items"], depth+1))
		}
		return arr
	}
	return g.anyValue(depth)
}

// kind is the type a value of schema m is drawn as: one of its types, else
// what its keywords imply, else "any".
func (g *schemaGen) kind(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		return t[g.c.n(len(t))].(string)
	}
	switch {
	case m["properties"] != nil || m["required"] != nil || m["additionalProperties"] != nil:
		return "object"
	case m["items"] != nil || m["minItems"] != nil || m["uniqueItems"] != nil:
		return "array"
	}
	return "any"
}

// object draws an object for schema m: mostly with its required names,
// and a few names of its properties or others.
func (g *schemaGen) object(m map[string]any, depth int) map[string]any {
	c := g.c
	obj := map[string]any{}
	props, _ := m["properties"].(map[string]any)
	if req, ok := m["required"].([]any); ok && c.n(5) != 0 {
		for _, r := range req {
			obj[r.(string)] = g.value(props[r.(string)], depth+1)
		}
	}
	for range c.n(4) {
		name := c.pick(genNames)
		if sub, ok := props[name]; ok {
			obj[name] = g.value(sub, depth+1)
		} else {
			obj[name] = g.value(m["additionalProperties"], depth+1)
		}
	}
	return obj
}

// respell returns an enum or const value, numbers sometimes written
// differently or as a float64, to exercise equality by value.
func (g *schemaGen) respell(v any) any {
	n, ok := v.(json.Number)
	if !ok {
		return v
	}
	switch g.c.n(4) {
	case 1:
		return json.Number(string(n) + "e0")
	case 2:
		if f, err := n.Float64(); err == nil {
			return f
		}
	case 3:
		if !strings.ContainsAny(string(n), ".eE") {
			return json.Number(string(n) + ".0")
		}
	}
	return n
}

func (g *schemaGen) number() any {
	if g.c.n(4) == 0 {
		return genFloats[g.c.n(len(genFloats))]
	}
	return json.Number(g.c.pick(genNumbers))
}

func (g *schemaGen) anyValue(depth int) any {
	c := g.c
	switch c.n(7) {
	case 0:
		return nil
	case 1:
		return c.n(2) == 1
	case 2:
		return c.pick(genStrings)
	case 3:
		return g.number()
	case 4:
		if depth < 4 {
			arr := []any{}
			for range c.n(4) {
				arr = append(arr, g.anyValue(depth+1))
			}
			return arr
		}
	case 5:
		if depth < 4 {
			obj := map[string]any{}
			for range c.n(4) {
				obj[c.pick(genNames)] = g.anyValue(depth + 1)
			}
			return obj
		}
	}
	return json.Number(c.pick(genNumbers))
}

func githubFixture(t testing.TB) (schema []byte, input any) {
	t.Helper()
	schema, err := os.ReadFile("testdata/github_create_issue.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/github_create_issue.input.json")
	if err != nil {
		t.Fatal(err)
	}
	return schema, decode(t, string(raw))
}

// BenchmarkValidateGitHubCreateIssue: a schema of the fast subset (the
// GitHub MCP server's create_issue) and a valid call, through Validate and
// through the engine alone.
func BenchmarkValidateGitHubCreateIssue(b *testing.B) {
	schema, input := githubFixture(b)
	s, err := Compile(schema)
	if err != nil {
		b.Fatal(err)
	}
	if s.fast == nil {
		b.Fatal("no fast tree")
	}
	b.Run("validate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Validate(input); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.validate(input); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check_input", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := checkInput(input); r != "" {
				b.Fatal(r)
			}
		}
	})
}

// TestValidateFastPathAllocs: a valid call of a subset schema costs no
// allocation, bounds check included. Not parallel: AllocsPerRun counts
// every goroutine's allocations.
func TestValidateFastPathAllocs(t *testing.T) {
	schema, input := githubFixture(t)
	s, err := Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	floats := map[string]any{"owner": "o", "repo": "r", "title": "t", "milestone": 7.5}
	for name, in := range map[string]any{"json.Number": input, "float64": floats} {
		if n := testing.AllocsPerRun(100, func() {
			if err := s.Validate(in); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("Validate(%s input) allocates %v times, want 0", name, n)
		}
	}
}
