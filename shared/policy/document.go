package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Verdict is a policy outcome. Verdicts are persisted and on the wire: never
// rename them.
type Verdict string

// Verdicts.
const (
	VerdictAllow           Verdict = "allow"
	VerdictDeny            Verdict = "deny"
	VerdictRequireApproval Verdict = "require_approval"
)

// Scope is how long a human's approval lasts.
type Scope string

// Scopes.
const (
	ScopeOnce    Scope = "once"
	ScopeSession Scope = "session"
)

// Defaults applied by Parse when the document leaves them out.
const (
	DefaultScope      = ScopeOnce
	DefaultTTLSeconds = 900
	// MinTTLSeconds and MaxTTLSeconds bound ttl_seconds, in the
	// document's approval defaults and in rules.
	MinTTLSeconds = 1
	MaxTTLSeconds = 7 * 24 * 3600
	// MaxDocumentBytes bounds the documents Parse accepts, and the
	// document as stored: a policy version is one DynamoDB item (400 KB
	// at most), and so is the copy a run freezes; the rest of the budget
	// is the item's other attributes and the stored form's normalization.
	MaxDocumentBytes = 300 << 10
	// MaxRules bounds the rules of one document.
	MaxRules = 10000
)

// Document is a policy document as authored, in the JSON shape of docs/api.md.
type Document struct {
	Name           string            `json:"name"`
	DefaultVerdict Verdict           `json:"default_verdict"`
	Approval       *ApprovalDefaults `json:"approval,omitempty"`
	Autonomy       *Autonomy         `json:"autonomy,omitempty"`
	Bash           *BashSettings     `json:"bash,omitempty"`
	Rules          []Rule            `json:"rules"`
	// Tests are calls with the verdict the document must give them; they
	// run when the document is stored (fluidbox policy test runs them
	// offline), and a failing one refuses the document.
	Tests []Test `json:"tests,omitempty"`
}

// Test is one call a document must decide as Expect says.
type Test struct {
	// Name says what the test is about; optional.
	Name     string  `json:"name,omitempty"`
	ToolName string  `json:"tool_name"`
	Input    any     `json:"input"`
	Expect   Verdict `json:"expect"`
	// Workspace and Cwd are the run's workspace and the caller's working
	// directory, for documents with relative path globs.
	Workspace string `json:"workspace,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
}

// MaxTests bounds the tests of one document.
const MaxTests = 1000

// BashSettings say how Bash lines the analyser cannot establish are
// decided.
type BashSettings struct {
	// Opaque is the verdict of an opaque line (inline code for an
	// interpreter, a builtin running a string, an unknown wrapper, ...)
	// wherever Bash has a deny or require_approval rule: deny or
	// require_approval (the default).
	Opaque Verdict `json:"opaque,omitempty"`
}

// Options says which words after an allow rule's command prefix it
// accepts. Options are persisted: never rename them.
type Options string

// Options.
const (
	// OptionsCatalogue (the default, also written as "") accepts only the
	// words the read-only catalogue lists as safe for the program.
	OptionsCatalogue Options = "catalogue"
	// OptionsAny accepts any words after the prefix except options that
	// change what a project runner runs or where, and unquoted patterns
	// that could expand to an option. The rule then allows whatever the
	// prefixed program can do with any arguments.
	OptionsAny Options = "any"
)

// ApprovalDefaults apply to require_approval results whose rule does not say.
type ApprovalDefaults struct {
	Scope      Scope `json:"scope,omitempty"`
	TTLSeconds int   `json:"ttl_seconds,omitempty"`
}

// Autonomy says what a require_approval becomes in an autonomous run.
type Autonomy struct {
	OnApprovalRule Verdict `json:"on_approval_rule,omitempty"`
}

// Rule is one policy rule. Tool is a glob over tool names.
type Rule struct {
	ID           string  `json:"id"`
	Tool         string  `json:"tool"`
	Match        *Match  `json:"match,omitempty"`
	Verdict      Verdict `json:"verdict"`
	Scope        Scope   `json:"scope,omitempty"`
	TTLSeconds   int     `json:"ttl_seconds,omitempty"`
	OnAutonomous Verdict `json:"on_autonomous,omitempty"`
}

// Match narrows a rule to some inputs. Every criterion present must hold.
//
// The fields use omitzero rather than omitempty on purpose: an explicitly
// empty list ("command_prefix": []) means "matches nothing" and must survive
// a round trip through JSON; with omitempty it would come back absent, which
// means "matches everything".
type Match struct {
	// CommandPrefix: Bash only. Word-wise prefixes of the command.
	CommandPrefix []string `json:"command_prefix,omitzero"`
	// Path: file tools only. Globs (doublestar) over the cleaned path.
	Path []string `json:"path,omitzero"`
	// Input: JSON pointer -> accepted values (globs over the value's text).
	Input map[string][]string `json:"input,omitzero"`
	// Options: Bash allow rules only. Which words may follow the prefix:
	// "catalogue" (default) or "any".
	Options Options `json:"options,omitempty"`
	// AgentType: globs over the type of the subagent making the call, as
	// the runner reports it (Claude Code's agent_type). A call of the
	// run's main agent has no type and matches no such rule. The model
	// chose the type when it started the subagent: allow it with a rule
	// on Agent's /subagent_type first.
	AgentType []string `json:"agent_type,omitzero"`
}

// ValidationError says which field of a document is wrong.
type ValidationError struct {
	Field   string // e.g. "rules[2].verdict"; empty for the document as a whole
	Message string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Warning flags a valid document part that cannot do what it seems to.
type Warning struct {
	Field   string
	Message string
}

func (w Warning) String() string {
	if w.Field == "" {
		return w.Message
	}
	return w.Field + ": " + w.Message
}

// pathField is one path-bearing input field of a file tool.
type pathField struct {
	name string
	// pattern: the field is a glob searched from the tool's directory
	// field (Glob's pattern, Grep's glob).
	pattern bool
	// dir: the field is the directory a pattern field searches from.
	dir bool
}

// fileTools maps the file tools to every input field that names a path,
// directory fields before the pattern fields that search from them.
var fileTools = map[string][]pathField{
	"Read":         {{name: "file_path"}},
	"Write":        {{name: "file_path"}},
	"Edit":         {{name: "file_path"}},
	"MultiEdit":    {{name: "file_path"}},
	"NotebookEdit": {{name: "notebook_path"}},
	"Glob":         {{name: "path", dir: true}, {name: "pattern", pattern: true}},
	"Grep":         {{name: "path", dir: true}, {name: "glob", pattern: true}},
}

// bashTool is the tool whose input.command is analysed as a shell command.
const bashTool = "Bash"

func verr(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// decode reads a JSON document strictly. Documents written in YAML are
// converted to JSON by package policyyaml first: every stored document is
// JSON, so the functions that only read stored policies link no YAML parser.
func decode(data []byte) (Document, error) {
	var doc Document
	if len(data) > MaxDocumentBytes {
		return doc, verr("", "document larger than %d bytes", MaxDocumentBytes)
	}
	js := bytes.TrimSpace(data)
	if len(js) == 0 {
		return doc, verr("", "empty document")
	}
	var raw any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return doc, verr("", "invalid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return doc, verr("", "invalid JSON: data after the document")
	}
	if err := checkShape(raw); err != nil {
		return doc, err
	}
	dec = json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	dec.UseNumber() // test inputs read as the gate reads a call's
	if err := dec.Decode(&doc); err != nil {
		// checkShape has seen every field, so this is not reached; the
		// decoder's own words would name Go types.
		return doc, verr("", "invalid document")
	}
	return doc, nil
}

// shape is what a document field must hold, for errors that name the
// field by its full path (rules[2].match.command_prefix[0]) and say what it
// must be in JSON's words, never in Go's.
type shape struct {
	kind   shapeKind
	fields []field // object: the known fields, in the order listed in errors
	elem   *shape  // list and map: each element
}

type field struct {
	name  string
	shape *shape
}

type shapeKind uint8

const (
	kindString shapeKind = iota
	kindInteger
	kindObject // known fields only
	kindList
	kindMap // any keys, each value of elem's shape
	kindAny // any JSON value
)

var (
	shapeString  = &shape{kind: kindString}
	shapeInteger = &shape{kind: kindInteger}
	shapeStrings = &shape{kind: kindList, elem: shapeString}
	shapeMatch   = &shape{kind: kindObject, fields: []field{
		{"command_prefix", shapeStrings}, {"path", shapeStrings},
		{"input", &shape{kind: kindMap, elem: shapeStrings}}, {"options", shapeString}, {"agent_type", shapeStrings},
	}}
	shapeRule = &shape{kind: kindObject, fields: []field{
		{"id", shapeString}, {"tool", shapeString}, {"match", shapeMatch}, {"verdict", shapeString},
		{"scope", shapeString}, {"ttl_seconds", shapeInteger}, {"on_autonomous", shapeString},
	}}
	shapeDocument = &shape{kind: kindObject, fields: []field{
		{"name", shapeString},
		{"default_verdict", shapeString},
		{"approval", &shape{kind: kindObject, fields: []field{{"scope", shapeString}, {"ttl_seconds", shapeInteger}}}},
		{"autonomy", &shape{kind: kindObject, fields: []field{{"on_approval_rule", shapeString}}}},
		{"bash", &shape{kind: kindObject, fields: []field{{"opaque", shapeString}}}},
		{"rules", &shape{kind: kindList, elem: shapeRule}},
		{"tests", &shape{kind: kindList, elem: shapeTest}},
	}}
	shapeTest = &shape{kind: kindObject, fields: []field{
		{"name", shapeString}, {"tool_name", shapeString}, {"input", shapeAny}, {"expect", shapeString},
		{"workspace", shapeString}, {"cwd", shapeString},
	}}
	shapeAny = &shape{kind: kindAny}
)

// checkShape checks the decoded JSON against the document's shape, so that
// an unknown field or a value of the wrong kind is reported at its full
// path, which the standard decoder does not do.
func checkShape(raw any) error {
	if _, ok := raw.(map[string]any); !ok {
		return verr("", "document must be an object, not %s", describeJSON(raw))
	}
	return shapeDocument.check("", raw)
}

func (s *shape) check(path string, v any) error {
	if v == nil {
		return nil // null is the field left out
	}
	at := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch s.kind {
	case kindString:
		if _, ok := v.(string); !ok {
			return verr(path, "must be a string, not %s", describeJSON(v))
		}
	case kindInteger:
		n, ok := v.(json.Number)
		if !ok {
			return verr(path, "must be an integer, not %s", describeJSON(v))
		}
		if _, err := n.Int64(); err != nil {
			return verr(path, "must be an integer, not %s", n.String())
		}
	case kindList:
		l, ok := v.([]any)
		if !ok {
			return verr(path, "must be a list, not %s", describeJSON(v))
		}
		for i, e := range l {
			if err := s.elem.check(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	case kindMap:
		m, ok := v.(map[string]any)
		if !ok {
			return verr(path, "must be an object, not %s", describeJSON(v))
		}
		for _, k := range sortedKeys(m) {
			if err := s.elem.check(fmt.Sprintf("%s[%q]", path, k), m[k]); err != nil {
				return err
			}
		}
	case kindObject:
		m, ok := v.(map[string]any)
		if !ok {
			return verr(path, "must be an object, not %s", describeJSON(v))
		}
		for _, k := range sortedKeys(m) {
			f := s.field(k)
			if f == nil {
				return verr(at(k), "unknown field (known: %s)", s.names())
			}
			if err := f.check(at(k), m[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *shape) field(name string) *shape {
	for _, f := range s.fields {
		if f.name == name {
			return f.shape
		}
	}
	return nil
}

func (s *shape) names() string {
	names := make([]string, len(s.fields))
	for i, f := range s.fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describeJSON names the kind of a decoded JSON value for an error, without
// quoting strings (a value may be anything the author pasted).
func describeJSON(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "true or false"
	case json.Number:
		if len(x) <= 20 {
			return x.String()
		}
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	default:
		return "another kind of value"
	}
}

// notOneOf is the message for an enum field holding an unknown value.
func notOneOf(v string, valid ...string) string {
	return fmt.Sprintf("%q is not one of %s", clipValue(v), strings.Join(valid, ", "))
}

// clipValue keeps an echoed value short.
func clipValue(v string) string {
	if len(v) > 40 {
		return v[:40] + "..."
	}
	return v
}

var (
	verdictNames  = []string{string(VerdictAllow), string(VerdictDeny), string(VerdictRequireApproval)}
	scopeNames    = []string{string(ScopeOnce), string(ScopeSession)}
	fallbackNames = []string{string(VerdictAllow), string(VerdictDeny)}
	opaqueNames   = []string{string(VerdictDeny), string(VerdictRequireApproval)}
	optionsNames  = []string{string(OptionsCatalogue), string(OptionsAny)}
)

func validVerdict(v Verdict) bool {
	return v == VerdictAllow || v == VerdictDeny || v == VerdictRequireApproval
}

func validScope(s Scope) bool { return s == ScopeOnce || s == ScopeSession }

func checkTTL(field string, ttl int) error {
	if ttl == 0 {
		return nil
	}
	if ttl < MinTTLSeconds || ttl > MaxTTLSeconds {
		return verr(field, "must be between %d and %d seconds, got %d", MinTTLSeconds, MaxTTLSeconds, ttl)
	}
	return nil
}

// normalize validates a decoded document and fills its defaults. The result
// is what Document() returns and what Digest() hashes.
func normalize(doc Document) (Document, error) {
	if doc.DefaultVerdict == "" {
		return doc, verr("default_verdict", "required")
	}
	if !validVerdict(doc.DefaultVerdict) {
		return doc, verr("default_verdict", "%s", notOneOf(string(doc.DefaultVerdict), verdictNames...))
	}
	ap, err := approvalDefaults(doc.Approval)
	if err != nil {
		return doc, err
	}
	doc.Approval = &ap
	au := Autonomy{OnApprovalRule: VerdictDeny}
	if doc.Autonomy != nil && doc.Autonomy.OnApprovalRule != "" {
		if err := checkFallback("autonomy.on_approval_rule", doc.Autonomy.OnApprovalRule); err != nil {
			return doc, err
		}
		au.OnApprovalRule = doc.Autonomy.OnApprovalRule
	}
	doc.Autonomy = &au
	bs, err := bashSettings(doc.Bash)
	if err != nil {
		return doc, err
	}
	doc.Bash = &bs
	if doc.Rules == nil {
		doc.Rules = []Rule{}
	}
	if err := checkTests(doc.Tests); err != nil {
		return doc, err
	}
	if len(doc.Rules) > MaxRules {
		return doc, verr("rules", "more than %d rules", MaxRules)
	}
	seen := make(map[string]int, len(doc.Rules))
	for i, r := range doc.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		if j, dup := seen[r.ID]; dup && r.ID != "" {
			return doc, verr(f+".id", "duplicate id %q (also rules[%d])", r.ID, j)
		}
		seen[r.ID] = i
		if err := checkRule(f, r); err != nil {
			return doc, err
		}
	}
	return doc, nil
}

// approvalDefaults is the document's approval defaults, checked, with
// what it leaves out filled in.
func approvalDefaults(a *ApprovalDefaults) (ApprovalDefaults, error) {
	ap := ApprovalDefaults{Scope: DefaultScope, TTLSeconds: DefaultTTLSeconds}
	if a == nil {
		return ap, nil
	}
	if a.Scope != "" {
		if !validScope(a.Scope) {
			return ap, verr("approval.scope", "%s", notOneOf(string(a.Scope), scopeNames...))
		}
		ap.Scope = a.Scope
	}
	if a.TTLSeconds != 0 {
		if err := checkTTL("approval.ttl_seconds", a.TTLSeconds); err != nil {
			return ap, err
		}
		ap.TTLSeconds = a.TTLSeconds
	}
	return ap, nil
}

// bashSettings is the document's bash settings, checked: an opaque line
// is never allowed.
func bashSettings(b *BashSettings) (BashSettings, error) {
	bs := BashSettings{Opaque: VerdictRequireApproval}
	if b == nil || b.Opaque == "" {
		return bs, nil
	}
	switch b.Opaque {
	case VerdictDeny, VerdictRequireApproval:
		bs.Opaque = b.Opaque
	case VerdictAllow:
		return bs, verr("bash.opaque", "must be deny or require_approval: an opaque line is never allowed")
	default:
		return bs, verr("bash.opaque", "%s", notOneOf(string(b.Opaque), opaqueNames...))
	}
	return bs, nil
}

// checkTests checks the document's tests.
func checkTests(tests []Test) error {
	if len(tests) > MaxTests {
		return verr("tests", "more than %d tests", MaxTests)
	}
	for i, t := range tests {
		f := fmt.Sprintf("tests[%d]", i)
		if t.ToolName == "" {
			return verr(f+".tool_name", "required")
		}
		if t.Expect == "" {
			return verr(f+".expect", "required")
		}
		if !validVerdict(t.Expect) {
			return verr(f+".expect", "%s", notOneOf(string(t.Expect), verdictNames...))
		}
		for _, p := range []struct{ name, value string }{{"workspace", t.Workspace}, {"cwd", t.Cwd}} {
			if p.value != "" && !strings.HasPrefix(p.value, "/") {
				return verr(f+"."+p.name, "must be an absolute path such as \"/work/app\"")
			}
		}
	}
	return nil
}

// checkRule checks one rule, f naming it (rules[i]).
func checkRule(f string, r Rule) error {
	switch {
	case r.ID == "":
		return verr(f+".id", "required")
	case r.Tool == "":
		return verr(f+".tool", "required")
	}
	if _, err := compileToolGlob(r.Tool); err != nil {
		return verr(f+".tool", "%v in %q", err, r.Tool)
	}
	switch {
	case r.Verdict == "":
		return verr(f+".verdict", "required")
	case !validVerdict(r.Verdict):
		return verr(f+".verdict", "%s", notOneOf(string(r.Verdict), verdictNames...))
	case r.Scope != "" && !validScope(r.Scope):
		return verr(f+".scope", "%s", notOneOf(string(r.Scope), scopeNames...))
	}
	if err := checkTTL(f+".ttl_seconds", r.TTLSeconds); err != nil {
		return err
	}
	if r.OnAutonomous != "" {
		if err := checkFallback(f+".on_autonomous", r.OnAutonomous); err != nil {
			return err
		}
	}
	if r.Match != nil {
		return checkMatch(f+".match", r.Tool, r.Match)
	}
	return nil
}

func checkFallback(field string, v Verdict) error {
	if v == VerdictAllow || v == VerdictDeny {
		return nil
	}
	if validVerdict(v) {
		return verr(field, "must be allow or deny, not %q", v)
	}
	return verr(field, "%s", notOneOf(string(v), fallbackNames...))
}

// onlyFileTools reports whether a rule's tool glob names file tools and
// nothing else: one of them, or a {Read,Glob,Grep} of them.
func onlyFileTools(tool string) bool {
	g, err := compileToolGlob(tool)
	if err != nil {
		return false
	}
	names, ok := g.literals()
	if !ok {
		return false
	}
	for _, n := range names {
		if _, ok := fileTools[n]; !ok {
			return false
		}
	}
	return true
}

func checkMatch(field, tool string, m *Match) error {
	if m.CommandPrefix != nil && tool != bashTool {
		return verr(field+".command_prefix", "only for tool %q, not %q", bashTool, tool)
	}
	switch m.Options {
	case "", OptionsCatalogue, OptionsAny:
	default:
		return verr(field+".options", "%s", notOneOf(string(m.Options), optionsNames...))
	}
	if m.Options != "" && m.CommandPrefix == nil {
		return verr(field+".options", "only with command_prefix")
	}
	for i, p := range m.CommandPrefix {
		if strings.TrimSpace(p) == "" {
			return verr(fmt.Sprintf("%s.command_prefix[%d]", field, i), "empty prefix")
		}
	}
	if m.Path != nil && !onlyFileTools(tool) {
		return verr(field+".path", "only for file tools (Read, Write, Edit, MultiEdit, NotebookEdit, Glob, Grep), or a {...} of them, not %q", tool)
	}
	for i, p := range m.Path {
		if _, err := compilePathGlob(p); err != nil {
			return verr(fmt.Sprintf("%s.path[%d]", field, i), "%v", err)
		}
	}
	for i, g := range m.AgentType {
		if _, err := compileGlob(g); err != nil {
			return verr(fmt.Sprintf("%s.agent_type[%d]", field, i), "%v in %q", err, g)
		}
	}
	keys := make([]string, 0, len(m.Input))
	for k := range m.Input {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kf := fmt.Sprintf("%s.input[%q]", field, k)
		if _, err := parsePointer(k); err != nil {
			return verr(kf, "%v", err)
		}
		for j, g := range m.Input[k] {
			if _, err := compileGlob(g); err != nil {
				return verr(fmt.Sprintf("%s[%d]", kf, j), "%v in %q", err, g)
			}
		}
	}
	return nil
}
