package schemaguard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Bounds applied to every input before it reaches the engine.
const (
	MaxInputDepth       = 16
	MaxInputStringBytes = 64 << 10
	MaxInputNodes       = 2_000
)

// idleEngines bounds the compilations of one schema kept for reuse; more
// concurrent validations compile their own and drop them after.
const idleEngines = 4

// schemaURL is the in-memory name of every compiled schema. Nothing is ever
// loaded from it: the compiler's loader refuses every URL.
const schemaURL = "fluidbox:///input-schema.json"

// RejectError says a schema failed the pre-guard or did not compile. The
// tool it belongs to is un-callable; Reason says why, for a human.
type RejectError struct {
	Reason string
}

func (e *RejectError) Error() string { return "schemaguard: schema rejected: " + e.Reason }

// InvalidError says an input does not satisfy its schema (or breaks the input
// bounds). Reason lists every cause, "; "-separated, each naming the input
// location, e.g. "input.command: required property missing"; Causes holds
// the same lines one by one.
type InvalidError struct {
	Reason string
	Causes []string
}

func (e *InvalidError) Error() string { return "schemaguard: invalid input: " + e.Reason }

// Schema is a compiled, pre-guarded schema. It is immutable and safe for
// concurrent use. The zero value and nil reject every input.
type Schema struct {
	digest  string
	source  []byte       // the engine's copy of the document (see Compile)
	engines chan *engine // idle compilations of source
	fast    *fastSchema  // nil: every input goes to the engine
}

// Digest returns the digest of the schema's canonical form, as Digest would.
func (s *Schema) Digest() string {
	if s == nil {
		return ""
	}
	return s.digest
}

// errNoLoad is what the compiler gets for every URL it tries to load.
var errNoLoad = errors.New("schemaguard: loading schemas is disabled")

func refuseLoad(string) (io.ReadCloser, error) { return nil, errNoLoad }

// Compile pre-guards and compiles an untrusted schema. Every failure is a
// *RejectError.
func Compile(schema []byte) (*Schema, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, reject("schema is %d bytes, over the %d limit", len(schema), MaxSchemaBytes)
	}
	doc, err := parseJSON(schema, MaxSchemaDepth)
	if errors.Is(err, errTooDeep) {
		return nil, reject("schema nests deeper than %d levels", MaxSchemaDepth)
	}
	if err != nil {
		return nil, reject("schema is not valid JSON: %v", err)
	}
	g, err := preGuard(doc)
	if err != nil {
		return nil, &RejectError{Reason: err.Error()}
	}
	canon, err := canonicalJSON(doc)
	if err != nil {
		return nil, reject("schema cannot be canonicalized: %v", err)
	}
	// The fast tree is built from the document as it is; it never accepts
	// a value a "pattern" constrains (it has no patterns), so it is built
	// before the rename below.
	fast := compileFast(doc)
	// The engine compiles "pattern" with RE2; JSON Schema's patterns are
	// ECMA-262. In the engine's copy every pattern moves to a keyword only
	// this package's extension reads. The rest of the document is the
	// canonical one, so the schema that is digested is the one enforced.
	for _, m := range g.patterned {
		m[ecmaPatternKeyword] = m["pattern"]
		delete(m, "pattern")
	}
	source, err := canonicalJSON(doc)
	if err != nil {
		return nil, reject("schema cannot be canonicalized: %v", err)
	}
	e, err := compileEngine(source)
	if err != nil {
		return nil, err
	}
	s := &Schema{digest: digestOf(canon), source: source, engines: make(chan *engine, idleEngines), fast: fast}
	s.engines <- e
	return s, nil
}

// compileReason renders a compilation error; a metaschema violation is
// rendered like an input error, against the schema document.
func compileReason(err error) string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		lines := causes(ve, nil, "schema")
		return joinCauses(lines)
	}
	var se *jsonschema.SchemaError
	if errors.As(err, &se) && se.Err != nil {
		return se.Err.Error()
	}
	return err.Error()
}

func reject(format string, a ...any) *RejectError {
	return &RejectError{Reason: fmt.Sprintf(format, a...)}
}

// Validate checks input, a decoded JSON value (json.Decoder with UseNumber;
// float64 numbers are accepted too). It returns nil or an *InvalidError.
func (s *Schema) Validate(input any) error {
	if s == nil || s.engines == nil {
		return &InvalidError{Reason: "input: no schema to validate against", Causes: []string{"input: no schema to validate against"}}
	}
	if reason := checkInput(input); reason != "" {
		return &InvalidError{Reason: reason, Causes: []string{reason}}
	}
	if s.fastValid(input) {
		return nil
	}
	err := s.validate(input)
	if err == nil {
		return nil
	}
	if errors.Is(err, errWork) {
		reason := fmt.Sprintf("input: validating it against the schema takes more than the %d steps (or %v of pattern matching) one call may use; send a smaller input", MaxWork, MaxPatternTime)
		return &InvalidError{Reason: reason, Causes: []string{reason}}
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		lines := causes(ve, input, "input")
		return &InvalidError{Reason: joinCauses(lines), Causes: lines}
	}
	// InfiniteLoopError, InvalidJSONTypeError or a recovered panic: the
	// input could not be shown valid, so it is not.
	const reason = "input: could not be validated against the schema"
	return &InvalidError{Reason: reason, Causes: []string{reason}}
}

// fastValid reports whether the fast tree shows input valid. It can only
// answer yes: a no, or a bug of ours that panics, leaves the input to the
// engine.
func (s *Schema) fastValid(input any) (ok bool) {
	if s.fast == nil {
		return false
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return s.fast.valid(input)
}

func (s *Schema) validate(input any) (err error) {
	var e *engine
	select {
	case e = <-s.engines:
	default:
		if e, err = compileEngine(s.source); err != nil {
			return err
		}
	}
	e.meter.reset()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(workExhausted); ok {
				err = errWork
			} else {
				err = errors.New("schemaguard: validation failed unexpectedly")
			}
		}
		select {
		case s.engines <- e:
		default:
		}
	}()
	return e.compiled.Validate(input)
}

// checkInput bounds an input's shape before validation. It returns "" or a
// reason. The first pass is cheap: map order, no paths, no allocations
// unless it fails. Only a failing input is walked again, in key order and
// building paths, to name its first violation the same way every time.
func checkInput(input any) string {
	fast := inputWalker{}
	if fast.walk(input, 1, nil) {
		return ""
	}
	slow := inputWalker{slow: true}
	if slow.walk(input, 1, nil) {
		// The passes disagree, which they must not; the input is still
		// not shown to be within bounds.
		return "input: is not within the input bounds"
	}
	return slow.reason
}

// inputWalker is one pass of checkInput. The slow pass walks maps in key
// order and keeps the path to each value for its reason; the fast pass
// keeps no path (its reason, if any, is discarded).
type inputWalker struct {
	slow   bool
	nodes  int
	reason string
}

// child returns the path of a value under at: built only on the slow pass.
func (w *inputWalker) child(at *pathNode, key string, index int) *pathNode {
	if !w.slow {
		return nil
	}
	return &pathNode{parent: at, key: key, index: index}
}

// pathNode is one step of the path to a value, kept as a chain so the path
// string is built only when something fails.
type pathNode struct {
	parent *pathNode
	key    string
	index  int // -1 for a property
}

func (p *pathNode) String() string {
	if p == nil {
		return "input"
	}
	if p.index >= 0 {
		return p.parent.String() + "[" + strconv.Itoa(p.index) + "]"
	}
	return p.parent.String() + segment(p.key)
}

func (w *inputWalker) fail(format string, a ...any) bool {
	if w.reason == "" {
		w.reason = fmt.Sprintf(format, a...)
	}
	return false
}

func (w *inputWalker) walk(v any, depth int, at *pathNode) bool {
	w.nodes++
	if w.nodes > MaxInputNodes {
		return w.fail("input: has more than %d values", MaxInputNodes)
	}
	switch t := v.(type) {
	case nil, bool:
	case string:
		if len(t) > MaxInputStringBytes {
			return w.fail("%s: string is %d bytes, over the %d limit", at, len(t), MaxInputStringBytes)
		}
	case json.Number:
		if err := checkNumber(string(t)); err != nil {
			return w.fail("%s: %v", at, err)
		}
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return w.fail("%s: number is not finite", at)
		}
	case map[string]any:
		if depth > MaxInputDepth {
			return w.fail("%s: nests deeper than %d levels", at, MaxInputDepth)
		}
		visit := func(k string, x any) bool {
			if len(k) > MaxInputStringBytes {
				return w.fail("%s: property name is %d bytes, over the %d limit", at, len(k), MaxInputStringBytes)
			}
			return w.walk(x, depth+1, w.child(at, k, -1))
		}
		if w.slow {
			for _, k := range sortedKeys(t) {
				if !visit(k, t[k]) {
					return false
				}
			}
			return true
		}
		for k, x := range t {
			if !visit(k, x) {
				return false
			}
		}
	case []any:
		if depth > MaxInputDepth {
			return w.fail("%s: nests deeper than %d levels", at, MaxInputDepth)
		}
		for i, x := range t {
			if !w.walk(x, depth+1, w.child(at, "", i)) {
				return false
			}
		}
	default:
		return w.fail("%s: %T is not a JSON value", at, v)
	}
	return true
}
