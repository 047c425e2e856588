package schemaguard

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// The fast path. Most tool schemas are a tree of objects, arrays and
// scalars with a handful of bounds, and most calls satisfy them; the engine
// spends ~100 allocations proving it. Compile also turns a schema of the
// simple subset below into a fastSchema tree, and Validate walks the input
// with it first.
//
// The security argument: the walk can only say "valid". Whenever it cannot
// show an input valid (a constraint fails, a number it cannot read, or a
// subschema outside the subset, which compiles to an opaque node) the
// engine decides, so every rejection and its reason are the engine's, and
// the fast path accepts nothing the engine rejects as long as each keyword
// below means here what it means to the engine. FuzzFastPathMatchesEngine
// checks exactly that.
//
// The subset, for draft-07 and 2020-12 (with or without $schema):
//
//   - type, a name or a list of names; "integer" takes any number with no
//     fractional part (1.0, 1e2), as the engine reads it;
//   - properties, required, additionalProperties (a boolean or a subset
//     schema);
//   - items as one subset schema (the tuple form is outside);
//   - enum and const of null, booleans, strings and numbers (numbers are
//     equal by exact value: 1 == 1.0 == 1e0); an empty enum constrains
//     nothing, as in the engine;
//   - minimum, maximum, exclusiveMinimum, exclusiveMaximum as numbers,
//     compared exactly;
//   - minLength and maxLength (in code points), minItems and maxItems,
//     each a whole number up to maxFastCount;
//   - uniqueItems, on arrays of at most maxFastUnique items;
//   - description, title, default, examples, $comment, and $schema at the
//     root;
//   - format, only where the engine does not assert it: an explicit
//     2020-12 $schema, or a name the engine has no checker for. (Without
//     $schema the engine asserts the formats it knows.)
//
// Boolean subschemas are in the subset. Anything else makes its subschema
// opaque; a draft other than 07 or 2020-12 leaves the whole schema to the
// engine.
type fastSchema struct {
	opaque bool // outside the subset, or the false schema: never shown valid

	types    typeSet // 0: any type
	enum     []fastScalar
	konst    *fastScalar
	required []string
	props    map[string]*fastSchema
	addl     *fastSchema // nil: additional properties are not constrained
	items    *fastSchema // nil: items are not constrained
	unique   bool

	minItems, maxItems   int // -1: no bound
	minLength, maxLength int // -1: no bound

	minimum, maximum, exclusiveMinimum, exclusiveMaximum *decimal
}

// Bounds of what the fast path decides itself; beyond them it asks the
// engine.
const (
	maxFastCount  = 1 << 30 // minLength, maxLength, minItems, maxItems
	maxFastUnique = 64      // items of an array with uniqueItems
)

type typeSet uint8

const (
	typeNull typeSet = 1 << iota
	typeBoolean
	typeObject
	typeArray
	typeNumber
	typeInteger
	typeString
)

var typeNames = map[string]typeSet{
	"null": typeNull, "boolean": typeBoolean, "object": typeObject, "array": typeArray,
	"number": typeNumber, "integer": typeInteger, "string": typeString,
}

// fastScalar is an enum or const value: null, a boolean, a string or a
// number.
type fastScalar struct {
	kind typeSet // typeNull, typeBoolean, typeString or typeNumber
	b    bool
	s    string
	n    decimal
}

// fastAnnotations are the keywords that never constrain an input.
var fastAnnotations = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true, "$comment": true,
}

// compileFast returns the fast tree of a pre-guarded, compiled schema
// document, or nil when the draft is not one the fast path knows or the
// root itself is outside the subset.
func compileFast(doc any) *fastSchema {
	root, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	b := fastBuilder{}
	if v, ok := root["$schema"]; ok {
		s, _ := v.(string)
		s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://"), "#")
		switch s {
		case "json-schema.org/draft/2020-12/schema":
			b.formatAnnotates = true
		case "json-schema.org/draft-07/schema":
		default:
			return nil
		}
	}
	f := b.schema(root, true)
	if f.opaque {
		return nil
	}
	return f
}

type fastBuilder struct {
	// formatAnnotates: format never asserts (an explicit 2020-12 $schema,
	// whose vocabularies are format-annotation only).
	formatAnnotates bool
}

var opaque = &fastSchema{opaque: true}

func (b *fastBuilder) schema(v any, root bool) *fastSchema {
	switch t := v.(type) {
	case bool:
		if t {
			return &fastSchema{minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
		}
		return opaque // the false schema is never shown valid: the engine says why
	case map[string]any:
		return b.object(t, root)
	}
	return opaque
}

func (b *fastBuilder) object(m map[string]any, root bool) *fastSchema {
	f := &fastSchema{minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
	for kw, v := range m {
		ok, known := b.structural(f, kw, v, root)
		if !known {
			ok, known = f.bound(kw, v)
		}
		if !known {
			ok = fastAnnotations[kw]
		}
		if !ok {
			return opaque
		}
	}
	return f
}

// structural reads a keyword of the schema's shape (its draft, format,
// type, values and subschemas); known is false for any other keyword.
func (b *fastBuilder) structural(f *fastSchema, kw string, v any, root bool) (ok, known bool) {
	switch kw {
	case "$schema":
		return root, true // a nested $schema starts a resource of another draft
	case "format":
		name, isString := v.(string)
		_, asserted := jsonschema.Formats[name]
		return isString && (b.formatAnnotates || !asserted), true
	case "type":
		f.types, ok = fastTypes(v)
	case "enum":
		f.enum, ok = fastEnum(v)
	case "const":
		var c fastScalar
		c, ok = fastScalarOf(v)
		f.konst = &c
	case "required":
		f.required, ok = fastStrings(v)
	case "properties":
		props, isMap := v.(map[string]any)
		f.props = make(map[string]*fastSchema, len(props))
		for name, sub := range props {
			f.props[name] = b.schema(sub, false)
		}
		return isMap, true
	case "additionalProperties", "items":
		return b.subschema(f, kw, v), true
	default:
		return false, false
	}
	return ok, true
}

// subschema reads additionalProperties (false, or a schema) and items (a
// schema; not the draft-07 tuple form).
func (b *fastBuilder) subschema(f *fastSchema, kw string, v any) bool {
	switch a := v.(type) {
	case bool:
		if kw == "items" {
			f.items = b.schema(v, false)
		} else if !a {
			f.addl = opaque
		}
	case map[string]any:
		if kw == "items" {
			f.items = b.schema(v, false)
		} else {
			f.addl = b.object(a, false)
		}
	default:
		return false
	}
	return true
}

// bound reads a keyword that bounds a value (uniqueItems, the numeric
// bounds, the length and count bounds); known is false for any other.
func (f *fastSchema) bound(kw string, v any) (ok, known bool) {
	switch kw {
	case "uniqueItems":
		f.unique, ok = v.(bool)
	case "minimum":
		f.minimum, ok = fastNumber(v)
	case "maximum":
		f.maximum, ok = fastNumber(v)
	case "exclusiveMinimum":
		f.exclusiveMinimum, ok = fastNumber(v)
	case "exclusiveMaximum":
		f.exclusiveMaximum, ok = fastNumber(v)
	case "minLength":
		f.minLength, ok = fastCount(v)
	case "maxLength":
		f.maxLength, ok = fastCount(v)
	case "minItems":
		f.minItems, ok = fastCount(v)
	case "maxItems":
		f.maxItems, ok = fastCount(v)
	default:
		return false, false
	}
	return ok, true
}

func fastTypes(v any) (typeSet, bool) {
	names, ok := v.([]any)
	if !ok {
		names = []any{v}
	}
	var ts typeSet
	for _, n := range names {
		s, _ := n.(string)
		t, ok := typeNames[s]
		if !ok {
			return 0, false
		}
		ts |= t
	}
	return ts, ts != 0
}

func fastEnum(v any) ([]fastScalar, bool) {
	items, ok := v.([]any)
	if !ok {
		return nil, false
	}
	enum := make([]fastScalar, 0, len(items))
	for _, item := range items {
		c, ok := fastScalarOf(item)
		if !ok {
			return nil, false
		}
		enum = append(enum, c)
	}
	return enum, true
}

func fastScalarOf(v any) (fastScalar, bool) {
	switch t := v.(type) {
	case nil:
		return fastScalar{kind: typeNull}, true
	case bool:
		return fastScalar{kind: typeBoolean, b: t}, true
	case string:
		return fastScalar{kind: typeString, s: t}, true
	case json.Number:
		n, ok := parseDecimal(string(t))
		return fastScalar{kind: typeNumber, n: n}, ok
	}
	return fastScalar{}, false
}

func fastStrings(v any) ([]string, bool) {
	items, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		s, ok := item.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func fastNumber(v any) (*decimal, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	d, ok := parseDecimal(string(n))
	if !ok {
		return nil, false
	}
	return &d, true
}

// fastCount reads a length or item-count bound. The engine truncates a
// float64 of it to int, so only whole numbers it reads exactly are taken.
func fastCount(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	d, ok := parseDecimal(string(n))
	if !ok || d.neg && d.nd > 0 || !d.isInt() || d.dp > 10 {
		return 0, false
	}
	c := 0
	for i := 0; i < d.dp; i++ {
		c *= 10
		if i < d.nd {
			c += int(d.d[i] - '0')
		}
	}
	return c, c <= maxFastCount
}

// valid reports whether v is certainly valid against f. false means "ask
// the engine", never "invalid".
func (f *fastSchema) valid(v any) bool {
	if f.opaque {
		return false
	}
	var num decimal
	kind, ok := kindOf(v, &num)
	if !ok || !f.typeAllows(kind, &num) || !f.valueAllows(kind, v, &num) {
		return false
	}
	switch t := v.(type) {
	case string:
		return f.validString(t)
	case map[string]any:
		return f.validObject(t)
	case []any:
		return f.validArray(t)
	}
	return kind != typeNumber || f.inRange(&num)
}

// kindOf is the JSON type of a decoded value, and for a number its
// decimal in num; ok is false for a value JSON cannot hold.
func kindOf(v any, num *decimal) (typeSet, bool) {
	switch t := v.(type) {
	case nil:
		return typeNull, true
	case bool:
		return typeBoolean, true
	case string:
		return typeString, true
	case map[string]any:
		return typeObject, true
	case []any:
		return typeArray, true
	case json.Number, float64:
		var ok bool
		*num, ok = numberOf(t)
		return typeNumber, ok
	}
	return 0, false
}

// typeAllows: the value's type is one of the schema's (an integral number
// is an integer).
func (f *fastSchema) typeAllows(kind typeSet, num *decimal) bool {
	return f.types == 0 || f.types&kind != 0 || kind == typeNumber && f.types&typeInteger != 0 && num.isInt()
}

// valueAllows: the value is the schema's const and one of its enum.
func (f *fastSchema) valueAllows(kind typeSet, v any, num *decimal) bool {
	if f.konst != nil && !f.konst.equals(kind, v, num) {
		return false
	}
	if len(f.enum) == 0 {
		return true
	}
	for i := range f.enum {
		if f.enum[i].equals(kind, v, num) {
			return true
		}
	}
	return false
}

// validString checks a string's length in code points.
func (f *fastSchema) validString(t string) bool {
	if f.minLength < 0 && f.maxLength < 0 {
		return true
	}
	n := utf8.RuneCountInString(t)
	return !(f.minLength >= 0 && n < f.minLength || f.maxLength >= 0 && n > f.maxLength)
}

// inRange checks a number against the schema's bounds.
func (f *fastSchema) inRange(num *decimal) bool {
	return !(f.minimum != nil && num.cmp(f.minimum) < 0 ||
		f.exclusiveMinimum != nil && num.cmp(f.exclusiveMinimum) <= 0 ||
		f.maximum != nil && num.cmp(f.maximum) > 0 ||
		f.exclusiveMaximum != nil && num.cmp(f.exclusiveMaximum) >= 0)
}

func (f *fastSchema) validObject(m map[string]any) bool {
	for _, name := range f.required {
		if _, ok := m[name]; !ok {
			return false
		}
	}
	if f.props == nil && f.addl == nil {
		return true
	}
	for name, x := range m {
		if sub, ok := f.props[name]; ok {
			if !sub.valid(x) {
				return false
			}
		} else if f.addl != nil && !f.addl.valid(x) {
			return false
		}
	}
	return true
}

func (f *fastSchema) validArray(a []any) bool {
	if f.minItems >= 0 && len(a) < f.minItems || f.maxItems >= 0 && len(a) > f.maxItems {
		return false
	}
	if f.unique {
		if len(a) > maxFastUnique {
			return false
		}
		for i := 1; i < len(a); i++ {
			for j := 0; j < i; j++ {
				if !differ(a[i], a[j]) {
					return false
				}
			}
		}
	}
	if f.items != nil {
		for _, x := range a {
			if !f.items.valid(x) {
				return false
			}
		}
	}
	return true
}

// equals says whether the input value v (of JSON type kind, with num its
// value when it is a number) equals c, as the engine's equality does.
func (c *fastScalar) equals(kind typeSet, v any, num *decimal) bool {
	if c.kind != kind {
		return false
	}
	switch kind {
	case typeNull:
		return true
	case typeBoolean:
		return v.(bool) == c.b
	case typeString:
		return v.(string) == c.s
	case typeNumber:
		return num.cmp(&c.n) == 0
	}
	return false
}

// differ reports whether two input values are certainly unequal as the
// engine compares them (numbers by exact value, objects regardless of key
// order). false means equal or undecided.
func differ(x, y any) bool {
	switch a := x.(type) {
	case nil:
		return y != nil
	case bool:
		b, ok := y.(bool)
		return !ok || a != b
	case string:
		b, ok := y.(string)
		return !ok || a != b
	case json.Number, float64:
		switch y.(type) {
		case json.Number, float64:
		default:
			return true
		}
		nx, okx := numberOf(x)
		ny, oky := numberOf(y)
		return okx && oky && nx.cmp(&ny) != 0
	case []any:
		b, ok := y.([]any)
		if !ok || len(a) != len(b) {
			return true
		}
		for i := range a {
			if differ(a[i], b[i]) {
				return true
			}
		}
		return false
	case map[string]any:
		b, ok := y.(map[string]any)
		if !ok || len(a) != len(b) {
			return true
		}
		for k, xv := range a {
			yv, ok := b[k]
			if !ok || differ(xv, yv) {
				return true
			}
		}
		return false
	}
	return false
}
