// Package cedar is a benchmark harness, not part of the product: it
// translates a fluidbox policy document into Cedar policies (cedar-go) so
// that the gate and Cedar can be measured deciding the same call against
// the same rules. Nothing in shared/ or functions/ imports it, so the
// product does not depend on cedar-go.
//
// The translation covers the rule shapes the benchmark uses and says so
// where Cedar cannot express fluidbox's semantics:
//
//   - verdicts: allow is a permit; deny and require_approval are forbids
//     annotated @verdict("deny") / @verdict("require_approval"). Cedar's
//     forbid-overrides-permit then gives deny > require_approval > allow
//     once the annotations of the determining forbids are read, and "no
//     policy applied" maps to the document's default_verdict.
//   - tool globs: a literal name is a head constraint on the resource
//     (Tool::"name"); a glob is resource.name like "...".
//   - input matchers: context.input with a has-guard per pointer token and
//     like per glob; an all-digit glob also matches the number.
//   - path globs: like, with "**" as "*" (Cedar's * crosses "/": it
//     over-matches, and it does not clean ".." out of paths).
//   - command prefixes: a string prefix on the raw command line. Cedar
//     cannot parse shell, so "git log -3; rm -rf ~" matches an allow on
//     "git log -3" here; fluidbox's strict allow matching refuses it.
//
// Cedar has no null, so null input values are left out of the context, and
// a Cedar policy that errors (like applied to a number) is skipped, which
// for a forbid means the deny does not apply: Cedar fails open there where
// fluidbox's matchers fail closed.
package cedar

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	cedar "github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"

	"github.com/fluidbox/fluidbox/shared/policy"
)

// Entity types and the one action of the translation.
const (
	ToolType   = types.EntityType("Tool")
	AgentType  = types.EntityType("Agent")
	ActionType = types.EntityType("Action")
	CallTool   = types.String("call_tool")
)

// Translate renders a policy document as Cedar text, one policy per rule,
// in document order.
func Translate(doc policy.Document) (string, error) {
	var b strings.Builder
	for i, r := range doc.Rules {
		if err := translateRule(&b, r); err != nil {
			return "", fmt.Errorf("cedar: rules[%d] (%s): %w", i, r.ID, err)
		}
	}
	return b.String(), nil
}

func translateRule(b *strings.Builder, r policy.Rule) error {
	effect := "permit"
	switch r.Verdict {
	case policy.VerdictAllow:
	case policy.VerdictDeny, policy.VerdictRequireApproval:
		effect = "forbid"
	default:
		return fmt.Errorf("unknown verdict %q", r.Verdict)
	}
	var conds []string
	head := "resource"
	if !strings.ContainsAny(r.Tool, `*?[\`) {
		head = "resource == Tool::" + str(r.Tool)
	} else {
		pat, err := likePattern(r.Tool)
		if err != nil {
			return err
		}
		conds = append(conds, "resource.name like "+pat)
	}
	if m := r.Match; m != nil {
		if m.Input != nil {
			ptrs := make([]string, 0, len(m.Input))
			for p := range m.Input {
				ptrs = append(ptrs, p)
			}
			slices.Sort(ptrs)
			for _, p := range ptrs {
				c, err := inputCond(p, m.Input[p])
				if err != nil {
					return err
				}
				conds = append(conds, c)
			}
		}
		if m.Path != nil {
			field := "file_path"
			var alts []string
			for _, g := range m.Path {
				pat, err := likePattern(strings.ReplaceAll(g, "**", "*"))
				if err != nil {
					return err
				}
				alts = append(alts, "context.input."+field+" like "+pat)
			}
			conds = append(conds, guard("context.input", field)+" && "+anyOf(alts))
		}
		if m.CommandPrefix != nil {
			var alts []string
			for _, p := range m.CommandPrefix {
				pat, err := likePattern(escapeLike(p) + " *")
				if err != nil {
					return err
				}
				alts = append(alts, "context.input.command == "+str(p), "context.input.command like "+pat)
			}
			conds = append(conds, guard("context.input", "command")+" && "+anyOf(alts))
		}
	}
	fmt.Fprintf(b, "@rule(%s)\n@verdict(%s)\n%s (principal, action == Action::%s, %s)",
		str(r.ID), str(string(r.Verdict)), effect, str(string(CallTool)), head)
	for _, c := range conds {
		fmt.Fprintf(b, "\nwhen { %s }", c)
	}
	b.WriteString(";\n\n")
	return nil
}

// inputCond translates one JSON pointer matcher.
func inputCond(ptr string, globs []string) (string, error) {
	if ptr == "" || ptr[0] != '/' {
		return "", fmt.Errorf("pointer %q: only non-empty pointers are translated", ptr)
	}
	path := "context.input"
	var guards []string
	for _, tok := range strings.Split(ptr[1:], "/") {
		if strings.ContainsRune(tok, '~') || tok == "" || isDigits(tok) {
			return "", fmt.Errorf("pointer %q: token %q is not translated", ptr, tok)
		}
		guards = append(guards, guard(path, tok))
		path += "[" + str(tok) + "]"
	}
	var alts []string
	for _, g := range globs {
		if isDigits(g) {
			alts = append(alts, path+" == "+g, path+" == "+str(g))
			continue
		}
		pat, err := likePattern(g)
		if err != nil {
			return "", err
		}
		alts = append(alts, path+" like "+pat)
	}
	return strings.Join(guards, " && ") + " && " + anyOf(alts), nil
}

func guard(path, attr string) string { return path + " has " + str(attr) }

func anyOf(alts []string) string {
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, " || ") + ")"
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// likePattern turns a fluidbox glob into a Cedar like pattern literal: '*'
// stays a wildcard, `\*` a literal star; '?', classes and other escapes
// are not translated.
func likePattern(glob string) (string, error) {
	if strings.ContainsAny(glob, `?[`) {
		return "", fmt.Errorf("glob %q: only * is translated", glob)
	}
	for i := 0; i < len(glob); i++ {
		if glob[i] == '\\' && (i+1 >= len(glob) || glob[i+1] != '*') {
			return "", fmt.Errorf("glob %q: only \\* escapes are translated", glob)
		}
	}
	return literal(glob, true), nil
}

// escapeLike makes every '*' of s literal in a like pattern.
func escapeLike(s string) string { return strings.ReplaceAll(s, "*", `\*`) }

// str renders a Cedar string literal.
func str(s string) string { return literal(s, false) }

// literal renders a Cedar string or pattern literal: printable ASCII as
// is, quotes and backslashes escaped (in a pattern, a backslash before '*'
// is kept: it is the pattern's own escape), everything else as \u{...}.
func literal(s string, pattern bool) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			if pattern && i+1 < len(s) && s[i+1] == '*' {
				b.WriteByte('\\')
			} else {
				b.WriteString(`\\`)
			}
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, `\u{%x}`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Engine is a translated policy document, ready to authorize calls.
type Engine struct {
	set     *cedar.PolicySet
	def     policy.Verdict
	verdict map[types.PolicyID]policy.Verdict
	rule    map[types.PolicyID]string
	order   map[types.PolicyID]int
}

// New translates doc and parses the result with cedar-go.
func New(doc policy.Document) (*Engine, string, error) {
	text, err := Translate(doc)
	if err != nil {
		return nil, "", err
	}
	set, err := cedar.NewPolicySetFromBytes("policy.cedar", []byte(text))
	if err != nil {
		return nil, text, fmt.Errorf("cedar: parse translation: %w", err)
	}
	e := &Engine{set: set, def: doc.DefaultVerdict,
		verdict: map[types.PolicyID]policy.Verdict{}, rule: map[types.PolicyID]string{}, order: map[types.PolicyID]int{}}
	ids := map[string]int{}
	for i, r := range doc.Rules {
		ids[r.ID] = i
	}
	for id, p := range set.All() {
		ann := p.Annotations()
		e.verdict[id] = policy.Verdict(ann["verdict"])
		e.rule[id] = string(ann["rule"])
		e.order[id] = ids[string(ann["rule"])]
	}
	return e, text, nil
}

// Request builds the Cedar request and entities for one call: the agent of
// the run as principal, call_tool as action, the tool as resource (with
// its name, class and connection as attributes) and the input as context.
func Request(runID, toolName string, class, connection string, input any) (types.Request, types.EntityMap, error) {
	in, err := Value(input)
	if err != nil {
		return types.Request{}, nil, err
	}
	tool := types.NewEntityUID(ToolType, types.String(toolName))
	agent := types.NewEntityUID(AgentType, types.String(runID))
	ents := types.EntityMap{
		tool: {UID: tool, Attributes: types.NewRecord(types.RecordMap{
			"name":       types.String(toolName),
			"class":      types.String(class),
			"connection": types.String(connection),
		})},
		agent: {UID: agent},
	}
	req := types.Request{
		Principal: agent,
		Action:    types.NewEntityUID(ActionType, CallTool),
		Resource:  tool,
		Context:   types.NewRecord(types.RecordMap{"input": in}),
	}
	return req, ents, nil
}

// Value converts decoded JSON (UseNumber or float64 numbers) into a Cedar
// value. Arrays become sets; nulls inside objects are left out.
func Value(v any) (types.Value, error) {
	switch t := v.(type) {
	case string:
		return types.String(t), nil
	case bool:
		return types.Boolean(t), nil
	case json.Number:
		if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return types.Long(n), nil
		}
		f, err := t.Float64()
		if err != nil {
			return nil, fmt.Errorf("cedar: number %s: %w", t, err)
		}
		return floatValue(f)
	case float64:
		return floatValue(t)
	case []any:
		vals := make([]types.Value, 0, len(t))
		for _, x := range t {
			if x == nil {
				continue
			}
			cv, err := Value(x)
			if err != nil {
				return nil, err
			}
			vals = append(vals, cv)
		}
		return types.NewSet(vals...), nil
	case map[string]any:
		rm := make(types.RecordMap, len(t))
		for k, x := range t {
			if x == nil {
				continue
			}
			cv, err := Value(x)
			if err != nil {
				return nil, err
			}
			rm[types.String(k)] = cv
		}
		return types.NewRecord(rm), nil
	}
	return nil, fmt.Errorf("cedar: %T is not a JSON value", v)
}

func floatValue(f float64) (types.Value, error) {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return types.Long(int64(f)), nil
	}
	d, err := types.NewDecimalFromFloat(f)
	if err != nil {
		return nil, fmt.Errorf("cedar: number %v: %w", f, err)
	}
	return d, nil
}

// Authorize runs Cedar and maps its answer back to a fluidbox verdict and
// the id of the deciding rule (the first in document order, like
// policy.Evaluate). Evaluation errors are returned as diagnostics; the
// policies that errored did not apply.
func (e *Engine) Authorize(req types.Request, ents types.EntityMap) (policy.Verdict, string, types.Diagnostic) {
	dec, diag := cedar.Authorize(e.set, ents, req)
	if len(diag.Reasons) == 0 {
		return e.def, "", diag
	}
	want := policy.VerdictAllow
	if dec == types.Deny {
		want = policy.VerdictRequireApproval
		for _, r := range diag.Reasons {
			if e.verdict[r.PolicyID] == policy.VerdictDeny {
				want = policy.VerdictDeny
				break
			}
		}
	}
	best, rule := math.MaxInt, ""
	for _, r := range diag.Reasons {
		if e.verdict[r.PolicyID] == want && e.order[r.PolicyID] < best {
			best, rule = e.order[r.PolicyID], e.rule[r.PolicyID]
		}
	}
	return want, rule, diag
}
