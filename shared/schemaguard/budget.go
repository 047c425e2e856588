package schemaguard

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Bounds of the work one validation may do. Size and depth bounds alone do
// not bound validation: a schema within them can apply its subschemas to an
// input many times over (a $ref into an anyOf fan-out, a cycle under
// "items" that doubles at each level), so the engine's evaluations are
// metered and a validation that runs out fails the input.
const (
	// MaxWork bounds the steps of one validation. A step is one subschema
	// evaluated on one value, plus the subschemas that evaluation may visit
	// without being metered itself (its fan-out), its enum, and the value's
	// own size (properties and items the engine walks, uniqueItems' pairs).
	MaxWork = 8_000
	// MaxPatternTime bounds the CPU time every pattern match of one
	// validation takes together (patterns run on a backtracking engine).
	MaxPatternTime = 20 * time.Millisecond
	// MaxFanOut bounds the direct subschemas and references of one schema
	// object: what one evaluation visits before it is metered.
	MaxFanOut = 256
)

// locationUnit is the squared schema-path length one step is worth: paths
// of ordinary schemas are far shorter, so their evaluations cost one step.
const locationUnit = 4096

// ecmaPatternKeyword is the keyword "pattern" is renamed to in the copy of
// the schema the engine compiles, so the engine (which compiles "pattern"
// with RE2) leaves it to this package's extension. A schema that carries it
// itself is refused.
const ecmaPatternKeyword = "$fluidbox-ecma-pattern"

// errWork says a validation ran out of its work budget or pattern time.
var errWork = errors.New("schemaguard: validation work budget exhausted")

// workExhausted is the panic that unwinds the engine when the meter runs
// out; Schema.validate recovers it as errWork.
type workExhausted struct{}

// meter is the budget of the validation in progress on one engine. An
// engine serves one validation at a time, so the meter needs no lock.
type meter struct {
	steps   int64
	pattern time.Duration
}

func (m *meter) reset() { m.steps, m.pattern = MaxWork, MaxPatternTime }

func (m *meter) charge(n int) {
	m.steps -= int64(n)
	if m.steps < 0 {
		panic(workExhausted{})
	}
}

// maxPatternAttempts bounds how often one match is retried after its
// deadline passed while it had used less CPU than the time left (the thread
// was descheduled, or the collector stopped it): a busy machine must not
// turn a cheap match into a deny.
const maxPatternAttempts = 4

// match runs one pattern match against the validation's pattern time. The
// time charged is the CPU the matching thread used, where the platform
// says (Linux); elsewhere it is wall time. regexp2 can only stop a match
// by a wall-clock deadline, so a match that hits the deadline with CPU
// time left was stalled, not working, and runs again with what is left.
func (m *meter) match(re *regexp2.Regexp, s string) (bool, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for range maxPatternAttempts {
		if m.pattern <= 0 {
			break
		}
		cpu0, cpuOK := threadCPU()
		wall0 := time.Now() // a bound on work done, not a fact about the world: real time is right
		matched, err := matchECMA(re, s, m.pattern)
		used := time.Since(wall0)
		if cpu1, ok := threadCPU(); cpuOK && ok {
			used = cpu1 - cpu0
		}
		m.pattern -= used
		if err == nil {
			return matched, nil
		}
	}
	return false, errPatternTimeout
}

// engine is one compilation of a schema, with the meter its extension
// charges. Schema keeps idle engines; each validation takes one for itself.
type engine struct {
	compiled *jsonschema.Schema
	meter    *meter
}

// extension is registered on every compiler: it compiles into every schema
// object of the document, so every evaluation the engine makes reaches it.
type extension struct{ meter *meter }

func (x extension) Compile(_ jsonschema.CompilerContext, m map[string]any) (jsonschema.ExtSchema, error) {
	es := &metered{meter: x.meter, cost: 1 + fanOut(m)}
	if enum, ok := m["enum"].([]any); ok {
		es.cost += len(enum)
	}
	es.unique, _ = m["uniqueItems"].(bool)
	if pp, ok := m["patternProperties"].(map[string]any); ok {
		es.patternProps = len(pp)
	}
	if p, ok := m[ecmaPatternKeyword].(string); ok {
		re, err := compileECMA(p)
		if err != nil {
			return nil, err
		}
		es.pattern, es.patternSrc = re, p
	}
	return es, nil
}

// metered is the extension's part of one schema object: its fixed cost and
// what makes an evaluation's cost grow with the value.
type metered struct {
	meter        *meter
	cost         int
	unique       bool
	patternProps int
	pattern      *regexp2.Regexp
	patternSrc   string
}

func (es *metered) Validate(ctx jsonschema.ValidationContext, v any) error {
	cost := es.cost
	switch t := v.(type) {
	case map[string]any:
		cost += len(t) * (1 + es.patternProps)
	case []any:
		cost += len(t)
		if es.unique {
			cost += len(t) * (len(t) - 1) / 2
		}
	}
	// The engine's own overhead per evaluation grows with the depth of the
	// schema path it is at: every error it builds concatenates that path,
	// frame by frame. The path's length is what the engine would name this
	// evaluation by, so the charge scales with its square.
	loc := len(ctx.Error("", "").KeywordLocation)
	es.meter.charge(cost * (1 + loc*loc/locationUnit))
	s, ok := v.(string)
	if es.pattern == nil || !ok {
		return nil
	}
	matched, err := es.meter.match(es.pattern, s)
	if err != nil {
		panic(workExhausted{})
	}
	if !matched {
		return ctx.Error("pattern", "does not match pattern %s", quoteLikeEngine(es.patternSrc))
	}
	return nil
}

// compileEngine compiles the engine's copy of a schema (see Compile).
func compileEngine(src []byte) (e *engine, err error) {
	// The pre-guard removes the panics we know of in the engine; this is the
	// backstop for the ones we do not, so a hostile schema cannot take the
	// process down.
	defer func() {
		if r := recover(); r != nil {
			e, err = nil, reject("schema does not compile: the engine failed on it")
		}
	}()
	m := &meter{}
	m.reset()
	c := jsonschema.NewCompiler()
	c.LoadURL = refuseLoad
	c.AssertContent = false
	c.RegisterExtension("fluidbox", nil, extension{meter: m})
	if err := c.AddResource(schemaURL, bytes.NewReader(src)); err != nil {
		return nil, reject("schema does not compile: %v", err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, reject("schema does not compile: %s", compileReason(err))
	}
	return &engine{compiled: compiled, meter: m}, nil
}

// quoteLikeEngine quotes as the engine quotes in its messages, so a pattern
// failure reads like the engine's other failures.
func quoteLikeEngine(s string) string {
	s = fmt.Sprintf("%q", s)
	s = strings.ReplaceAll(s, `\"`, `"`)
	s = strings.ReplaceAll(s, `'`, `\'`)
	return "'" + s[1:len(s)-1] + "'"
}
