package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
)

// Policy is a compiled, immutable policy. It is safe for concurrent use.
type Policy struct {
	doc    Document // normalized; never handed out without a deep copy
	digest string
	rules  []*rule
	// byTool indexes rules whose tool is a literal name; globRules lists
	// the others. Both hold rule indexes in document order.
	byTool    map[string][]int
	globRules []int
	// applicable caches, per tool name, the merged document-ordered list
	// of rule indexes whose tool glob matches it (bounded in size).
	applicable sync.Map // string -> []int
	cached     atomic.Int64
	fallback   Verdict // autonomy.on_approval_rule
	// opaqueVerdict is bash.opaque.
	opaqueVerdict Verdict
	scope         Scope // approval.scope
	ttl           time.Duration
	// readFileRules and writeFileRules are the deny and require_approval
	// path rules of the tools that read and write files, which judge a
	// Bash line's operands (bashfiles.go).
	readFileRules, writeFileRules []*rule
}

type rule struct {
	index   int
	id      string
	tool    *glob
	verdict Verdict
	scope   Scope
	ttl     time.Duration
	onAuto  Verdict

	// Criteria; a nil slice/map means "not constrained".
	hasPrefix bool
	prefixes  []*bash.Prefix // valid prefixes only
	// anyOptions: the rule opted in to any words after its prefixes.
	anyOptions bool
	hasPath    bool
	paths      []*pathGlob
	inputs     []inputCond
	hasInput   bool
	hasAgent   bool
	agents     []*glob
}

type inputCond struct {
	ptr   pointer
	globs []*glob
	// folded are the globs case-folded, for the deny side's reading.
	folded []*glob
}

// Parse reads, validates and compiles a policy document in JSON (package
// policyyaml reads YAML, converted to the same JSON).
// Unknown fields, unknown verdicts and scopes, bad globs and pointers,
// duplicate rule ids and matchers on the wrong tool are *ValidationError.
// Rules that are valid but can never match are reported as warnings.
func Parse(data []byte) (*Policy, []Warning, error) {
	doc, err := decode(data)
	if err != nil {
		return nil, nil, err
	}
	return compile(doc)
}

// New compiles a document built in Go, with the same validation as Parse.
func New(doc Document) (*Policy, []Warning, error) {
	return compile(copyDocument(doc))
}

func compile(doc Document) (*Policy, []Warning, error) {
	doc, err := normalize(doc)
	if err != nil {
		return nil, nil, err
	}
	canon, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, verr("", "cannot encode document: %v", err)
	}
	sum := sha256.Sum256(canon)
	p := &Policy{
		doc:           doc,
		digest:        "sha256:" + hex.EncodeToString(sum[:]),
		byTool:        make(map[string][]int),
		fallback:      doc.Autonomy.OnApprovalRule,
		opaqueVerdict: doc.Bash.Opaque,
		scope:         doc.Approval.Scope,
		ttl:           time.Duration(doc.Approval.TTLSeconds) * time.Second,
	}
	var warns []Warning
	for i, r := range doc.Rules {
		cr, w := compileRule(i, r)
		warns = append(warns, w...)
		p.rules = append(p.rules, cr)
		if name, ok := cr.tool.literal(); ok {
			p.byTool[name] = append(p.byTool[name], i)
		} else {
			p.globRules = append(p.globRules, i)
		}
	}
	p.readFileRules, p.writeFileRules = p.fileRules(readTools), p.fileRules(writeRules)
	warns = append(warns, shadowWarnings(p.rules)...)
	warns = append(warns, toolWarnings(doc.Rules)...)
	warns = append(warns, verdictWarnings(doc)...)
	return p, warns, nil
}

// claudeTools are the tool names Claude Code calls, for the warning about
// a rule's tool that differs from one only by case.
var claudeTools = []string{"Bash", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "NotebookRead",
	"Glob", "Grep", "LS", "WebFetch", "WebSearch", "Task", "Agent", "TodoWrite", "BashOutput", "KillShell",
	"ExitPlanMode", "SlashCommand", "Skill"}

// claudeSyntax is Claude Code's permission rule syntax, Tool(specifier).
var claudeSyntax = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_]*)\((.*)\)$`)

// toolWarnings flags rule tools that match nothing a caller sends: Claude
// Code's permission syntax written as a tool name, and a known tool's name
// in another case (tool names are matched exactly).
func toolWarnings(rules []Rule) []Warning {
	var warns []Warning
	for i, r := range rules {
		f := fmt.Sprintf("rules[%d].tool", i)
		if m := claudeSyntax.FindStringSubmatch(r.Tool); m != nil {
			hint := fmt.Sprintf(`write {"tool":%q,"match":{...}}`, m[1])
			if m[1] == bashTool {
				prefix := strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(m[2], "*"), ":"))
				hint = fmt.Sprintf(`write {"tool":"Bash","match":{"command_prefix":[%q]}}`, prefix)
			}
			warns = append(warns, Warning{Field: f, Message: fmt.Sprintf("%q is Claude Code's permission syntax, which matches no tool name here; %s (fluidbox policy import-claude translates a settings file)", r.Tool, hint)})
			continue
		}
		for _, t := range claudeTools {
			if r.Tool != t && strings.EqualFold(r.Tool, t) {
				warns = append(warns, Warning{Field: f, Message: fmt.Sprintf("%q matches no tool: tool names are matched exactly, and Claude Code's is %q", r.Tool, t)})
			}
		}
	}
	return warns
}

// verdictWarnings flags a document that gives every call the same verdict.
func verdictWarnings(doc Document) []Warning {
	for _, r := range doc.Rules {
		if r.Verdict != doc.DefaultVerdict {
			return nil
		}
	}
	switch doc.DefaultVerdict {
	case VerdictAllow:
		return []Warning{{Field: "default_verdict", Message: "every call is allowed: the default is allow and no rule denies or asks for approval (only a Bash line that does not parse is refused)"}}
	case VerdictDeny:
		return []Warning{{Field: "default_verdict", Message: "every call is denied: the default is deny and no rule allows or asks for approval"}}
	}
	return []Warning{{Field: "default_verdict", Message: "every call waits for a human: the default is require_approval and no rule allows or denies"}}
}

func compileRule(i int, r Rule) (*rule, []Warning) {
	f := fmt.Sprintf("rules[%d]", i)
	var w warnings
	tool, _ := compileToolGlob(r.Tool) // validated by normalize
	cr := &rule{
		index:   i,
		id:      r.ID,
		tool:    tool,
		verdict: r.Verdict,
		scope:   r.Scope,
		ttl:     time.Duration(r.TTLSeconds) * time.Second,
		onAuto:  r.OnAutonomous,
	}
	if r.Verdict != VerdictRequireApproval {
		w.approvalFields(f, r)
	}
	m := r.Match
	if m == nil {
		return cr, w
	}
	if m.CommandPrefix == nil && m.Path == nil && m.Input == nil && m.AgentType == nil {
		w.add(f+".match", "no criteria: the rule matches every %s call", r.Tool)
	}
	if m.Options == OptionsAny {
		if r.Verdict != VerdictAllow {
			w.add(f+".match.options", "ignored: only allow rules read options; deny and require_approval rules match every option")
		} else {
			cr.anyOptions = true
		}
	}
	cr.compilePrefixes(f, m.CommandPrefix, &w)
	cr.compilePaths(f, m.Path, &w)
	cr.compileAgents(f, m.AgentType, &w)
	cr.compileInputs(f, m.Input, &w)
	return cr, w
}

// warnings collects what compiling a document found worth saying.
type warnings []Warning

func (w *warnings) add(field, format string, args ...any) {
	*w = append(*w, Warning{Field: field, Message: fmt.Sprintf(format, args...)})
}

// approvalFields warns of the approval fields of a rule that does not
// ask for approval.
func (w *warnings) approvalFields(f string, r Rule) {
	if r.Scope != "" {
		w.add(f+".scope", "ignored: only require_approval rules have a scope")
	}
	if r.TTLSeconds != 0 {
		w.add(f+".ttl_seconds", "ignored: only require_approval rules have a ttl")
	}
	if r.OnAutonomous != "" {
		w.add(f+".on_autonomous", "ignored: only require_approval rules have an autonomous fallback")
	}
}

// compilePrefixes compiles match.command_prefix; a prefix that does not
// parse never matches, and is warned of.
func (cr *rule) compilePrefixes(f string, prefixes []string, w *warnings) {
	if prefixes == nil {
		return
	}
	cr.hasPrefix = true
	if len(prefixes) == 0 {
		w.add(f+".match.command_prefix", "empty list: the rule never matches")
	}
	for j, s := range prefixes {
		bp, err := bash.ParsePrefix(s)
		if err != nil {
			w.add(fmt.Sprintf("%s.match.command_prefix[%d]", f, j), "%v: %q never matches", err, s)
			continue
		}
		cr.prefixes = append(cr.prefixes, bp)
	}
}

// compilePaths compiles match.path.
func (cr *rule) compilePaths(f string, paths []string, w *warnings) {
	if paths == nil {
		return
	}
	cr.hasPath = true
	if len(paths) == 0 {
		w.add(f+".match.path", "empty list: the rule never matches")
	}
	for _, s := range paths {
		g, _ := compilePathGlob(s) // validated by normalize
		cr.paths = append(cr.paths, g)
	}
}

// compileAgents compiles match.agent_type.
func (cr *rule) compileAgents(f string, agents []string, w *warnings) {
	if agents == nil {
		return
	}
	cr.hasAgent = true
	if len(agents) == 0 {
		w.add(f+".match.agent_type", "empty list: the rule never matches")
	}
	for _, s := range agents {
		g, _ := compileGlob(s) // validated by normalize
		cr.agents = append(cr.agents, g)
	}
}

// compileInputs compiles match.input, pointer by pointer in sorted order,
// each glob as written and case-folded (the deny side's reading).
func (cr *rule) compileInputs(f string, input map[string][]string, w *warnings) {
	if input == nil {
		return
	}
	cr.hasInput = true
	if len(input) == 0 {
		w.add(f+".match.input", "no pointers: the criterion accepts every input")
	}
	keys := make([]string, 0, len(input))
	for k := range input {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ptr, _ := parsePointer(k) // validated by normalize
		c := inputCond{ptr: ptr}
		field := fmt.Sprintf("%s.match.input[%q]", f, k)
		if len(input[k]) == 0 {
			w.add(field, "empty list: the rule never matches")
		}
		for _, s := range input[k] {
			if cr.verdict != VerdictAllow && strings.Contains(s, "://") {
				w.add(field, "%q is matched against the URL's text (case and number spelling aside): the same host spelt with a port, userinfo, percent-encoding or a trailing dot is not matched; deny the tool by default and allow the hosts instead", s)
			}
			g, _ := compileGlob(s)
			c.globs = append(c.globs, g)
			folded, err := compileGlob(foldCase(s))
			if err != nil {
				folded = g // folding cannot unbalance a valid glob; if it did, the exact one
			}
			c.folded = append(c.folded, folded)
		}
		cr.inputs = append(cr.inputs, c)
	}
}

// shadowWarnings reports rules that can never decide anything because an
// unconditional, more restrictive rule covers every call they could match.
func shadowWarnings(rules []*rule) []Warning {
	var warns []Warning
	for _, r := range rules {
		for _, s := range rules {
			if s == r || !s.unconditional() || restriction(s.verdict) <= restriction(r.verdict) {
				continue
			}
			if !s.tool.covers(r.tool) {
				continue
			}
			warns = append(warns, Warning{
				Field:   fmt.Sprintf("rules[%d]", r.index),
				Message: fmt.Sprintf("rule %q can never decide: rule %q (%s) matches every call to %q", r.id, s.id, s.verdict, r.tool.pattern),
			})
			break
		}
	}
	return warns
}

// maxCachedTools bounds the per-tool-name cache; names beyond it are
// matched against the glob rules on every call.
const maxCachedTools = 4096

// rulesFor returns the indexes, in document order, of the rules whose tool
// glob matches toolName.
func (p *Policy) rulesFor(toolName string) []int {
	if v, ok := p.applicable.Load(toolName); ok {
		return v.([]int)
	}
	lit := p.byTool[toolName]
	out := make([]int, 0, len(lit)+len(p.globRules))
	globs := p.globRules
	for len(lit) > 0 || len(globs) > 0 {
		if len(globs) == 0 || len(lit) > 0 && lit[0] < globs[0] {
			out = append(out, lit[0])
			lit = lit[1:]
			continue
		}
		if p.rules[globs[0]].tool.match(toolName) {
			out = append(out, globs[0])
		}
		globs = globs[1:]
	}
	if p.cached.Add(1) <= maxCachedTools {
		p.applicable.Store(toolName, out)
	}
	return out
}

func (r *rule) unconditional() bool { return !r.hasPrefix && !r.hasPath && !r.hasInput && !r.hasAgent }

// covers reports whether every name matched by o is matched by g (only
// decided for the easy cases; false when unsure).
func (g *glob) covers(o *glob) bool {
	if g.kind == globAny {
		return true
	}
	if o.kind == globAlternatives {
		for _, a := range o.alts {
			if !g.covers(a) {
				return false
			}
		}
		return true
	}
	if g.kind == globAlternatives {
		for _, a := range g.alts {
			if a.covers(o) {
				return true
			}
		}
		return false
	}
	if lit, ok := o.literal(); ok {
		return g.match(lit)
	}
	return g.pattern == o.pattern
}

func restriction(v Verdict) int {
	switch v {
	case VerdictAllow:
		return 1
	case VerdictRequireApproval:
		return 2
	default:
		return 3
	}
}

// RelativeGlobs returns, as "rules[i].match.path[j]", the relative path
// globs that match no absolute path in a run without a workspace, which
// Claude Code's absolute paths then never meet, so run creation warns
// about them. The matchers themselves decide it (unreachable): an allow
// rule reads a relative glob against the workspace only, while a deny or
// require_approval rule reads it at any depth and needs no workspace.
func (p *Policy) RelativeGlobs() []string {
	var out []string
	for _, r := range p.rules {
		for j, g := range r.paths {
			if g.isRelative() && g.unreachableWithoutWorkspace(r.verdict) {
				out = append(out, fmt.Sprintf("rules[%d].match.path[%d] (%q)", r.index, j, g.pattern))
			}
		}
	}
	return out
}

// TestFailure is a document test whose call got another verdict.
type TestFailure struct {
	Index  int     `json:"index"`
	Name   string  `json:"name,omitempty"`
	Expect Verdict `json:"expect"`
	Got    Verdict `json:"got"`
	RuleID string  `json:"rule_id,omitempty"`
	Reason string  `json:"reason"`
}

func (f TestFailure) String() string {
	name := f.Name
	if name == "" {
		name = "(unnamed)"
	}
	return fmt.Sprintf("tests[%d] %s: expected %s, got %s (%s)", f.Index, name, f.Expect, f.Got, f.Reason)
}

// RunTests decides each of the document's tests and returns those whose
// verdict is not the expected one, in order.
func (p *Policy) RunTests() []TestFailure {
	var out []TestFailure
	for i, t := range p.doc.Tests {
		r := p.EvaluateIn(Env{Workspace: t.Workspace, Cwd: t.Cwd}, t.ToolName, t.Input)
		if r.Verdict != t.Expect {
			out = append(out, TestFailure{Index: i, Name: t.Name, Expect: t.Expect, Got: r.Verdict, RuleID: r.RuleID, Reason: r.Reason})
		}
	}
	return out
}

// Document returns a deep copy of the normalized document (defaults filled).
func (p *Policy) Document() Document { return copyDocument(p.doc) }

// Digest is "sha256:<hex>" over the canonical JSON of the normalized
// document; equal documents have equal digests.
func (p *Policy) Digest() string { return p.digest }

// copyJSON deep-copies a decoded JSON value.
func copyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = copyJSON(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = copyJSON(e)
		}
		return l
	}
	return v
}

func copyDocument(d Document) Document {
	out := d
	if d.Approval != nil {
		a := *d.Approval
		out.Approval = &a
	}
	if d.Autonomy != nil {
		a := *d.Autonomy
		out.Autonomy = &a
	}
	if d.Bash != nil {
		b := *d.Bash
		out.Bash = &b
	}
	if d.Tests != nil {
		out.Tests = make([]Test, len(d.Tests))
		for i, t := range d.Tests {
			out.Tests[i] = t
			out.Tests[i].Input = copyJSON(t.Input)
		}
	}
	if d.Rules != nil {
		out.Rules = make([]Rule, len(d.Rules))
		for i, r := range d.Rules {
			out.Rules[i] = r
			if r.Match != nil {
				m := Match{
					CommandPrefix: slices.Clone(r.Match.CommandPrefix),
					Path:          slices.Clone(r.Match.Path),
					Options:       r.Match.Options,
					AgentType:     slices.Clone(r.Match.AgentType),
				}
				if r.Match.Input != nil {
					m.Input = make(map[string][]string, len(r.Match.Input))
					for k, v := range r.Match.Input {
						m.Input[k] = slices.Clone(v)
					}
				}
				out.Rules[i].Match = &m
			}
		}
	}
	return out
}
