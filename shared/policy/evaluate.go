package policy

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
	"github.com/fluidbox/fluidbox/shared/policy/tree"
)

// Result is the policy's answer for one call. It is a value: a denial is an
// answer, not an error.
type Result struct {
	Verdict Verdict
	// RuleID names the deciding rule; "" when default_verdict applied
	// (or when the call was refused because its Bash command could not be
	// parsed). For an opaque Bash line it names the rule the line was
	// treated as matching (bash.opaque).
	RuleID string
	// Reason is human text naming the rule or the default, and for Bash
	// the part or construct that decided. It never quotes a command's
	// arguments, only program names and option names.
	Reason string
	// Scope and TTL are the approval defaults of a require_approval result
	// (zero otherwise). Scope is always once when ScopeKey is "".
	Scope Scope
	TTL   time.Duration
	// OnAutonomous is what a require_approval becomes in an autonomous run:
	// the rule's on_autonomous, else autonomy.on_approval_rule, else deny.
	// Empty for other verdicts.
	OnAutonomous Verdict
	// UpdatedInput, on an allow, is the input the tool must run with
	// instead of the one asked about: a search narrowed to leave out what
	// a deny rule matches. nil when the input runs as asked.
	UpdatedInput map[string]any
	// ScopeKey is the key a session grant for this call is stored under,
	// beside RuleID ("" when no session grant can safely describe the
	// call; see scopeKey and AnswerGrants).
	ScopeKey string
}

// Env is what a run knows about where a call happens. The zero value is a
// run without a workspace, asked without a working directory.
type Env struct {
	// Workspace is the run's declared workspace, an absolute path;
	// relative path globs resolve against it.
	Workspace string
	// Cwd is the caller's working directory (the hook sends Claude
	// Code's cwd); relative paths in the input resolve against it, else
	// against the workspace.
	Cwd string
	// Resolved maps a path-bearing input field ("file_path", "path", ...)
	// to the path the sandbox resolved it to (symlinks followed). A call
	// is allowed only if both the given and the resolved path are, and
	// denied if either is.
	Resolved map[string]string
	// Kinds maps a path-bearing input field to what the sandbox found
	// there without following a final symbolic link (lstat): KindFile,
	// KindDir or KindAbsent. A Grep whose path is a file is judged as
	// that file, not as a tree.
	Kinds map[string]string
	// AgentType is the type of the subagent making the call; empty for
	// the run's main agent.
	AgentType string
	// Report is what the sandbox found under the directory a Glob walks
	// (nil when the runner sent none). Only a Glob's decision reads it,
	// and only to let a rule that reaches the call through that tree pass
	// when nothing there matches it (globreport.go).
	Report *tree.Report
}

// Path kinds the sandbox reports. They are on the wire: never rename them.
const (
	KindFile   = "file"
	KindDir    = "dir"
	KindAbsent = "absent"
)

// isFile reports whether the sandbox found the field's path to be a file
// (not a directory, a symbolic link or anything else).
func (e *Env) isFile(field string) bool { return e.Kinds[field] == KindFile }

// Call is one tool call prepared for evaluation. Its Bash line is analysed
// at most once, on first need, however many policies evaluate it: a run's
// enforced and shadow policies, the trust tier's read-only question and
// the session grants all read the same analysis. A Call is safe for
// concurrent use; the input must not change once it is made.
type Call struct {
	tool  string
	input any
	// narrowed: the call is a rewrite the policy made to narrow a search;
	// it is judged as it is, never narrowed again.
	narrowed bool
	once     sync.Once
	analysis *bash.Analysis // nil when the input has no string command
	// noGrant is set once an evaluation found that no session grant may
	// cover the call: it writes a path programs obey, or a file rule
	// asks about one of its paths.
	noGrant atomic.Bool
}

// NewCall prepares a call for EvaluateCall, BashReadOnly and AnswerGrants.
func NewCall(toolName string, input any) *Call {
	return &Call{tool: toolName, input: input}
}

// bash returns the analysis of input.command, nil when there is none.
func (c *Call) bash() *bash.Analysis {
	c.once.Do(func() {
		if cmd, ok := bashCommand(c.input); ok {
			c.analysis = bash.Analyze(cmd)
		}
	})
	return c.analysis
}

// call holds what one evaluation learns about a call, computed at most
// once: the prepared call, and the paths as this environment resolves them.
type call struct {
	*Call
	env      Env
	paths    []pathValue
	pathsOK  bool
	pathsSet bool
	folds    foldCache
	// prot is the protected path a write tool's call may name.
	prot    *protectedGlob
	protSet bool
}

// foldCache remembers the case-folded input values of one evaluation: the
// deny rules of a tool often test the same few fields, and folding is the
// one allocation of their reading.
type foldCache struct {
	n   int
	key [8]string
	val [8]string
}

func (f *foldCache) fold(s string) string {
	for i := 0; i < f.n; i++ {
		if f.key[i] == s {
			return f.val[i]
		}
	}
	v := foldCase(s)
	if f.n < len(f.key) {
		f.key[f.n], f.val[f.n] = s, v
		f.n++
	}
	return v
}

// opaque reports whether this is a Bash call whose effect cannot be
// established, and why.
func (c *call) opaque() (bool, string) {
	if c.tool != bashTool {
		return false, ""
	}
	a := c.bash()
	if a == nil {
		return true, "the call has no string command"
	}
	return a.Opaque()
}

// bashCommand returns input.command of a Bash call.
func bashCommand(input any) (string, bool) {
	m, ok := input.(map[string]any)
	if !ok {
		return "", false
	}
	s, ok := m["command"].(string)
	return s, ok
}

// Evaluate decides one call for a run without a workspace; see EvaluateIn.
func (p *Policy) Evaluate(toolName string, input any) Result {
	return p.EvaluateIn(Env{}, toolName, input)
}

// EvaluateIn decides one call. Precedence is by restriction, not by order:
// any matching deny beats any matching require_approval, which beats any
// matching allow; with no match the default verdict applies. Among rules of
// the same verdict the first in document order is reported.
//
// Matching is asymmetric. Allow rules match strictly: a Bash line only when
// every simple command in it starts with an allowed prefix followed by
// words the read-only catalogue accepts (or any words, for a rule that opts
// in with "options": "any"), a path only when every path of the call (the
// given and the resolved) stays inside the glob. Deny and require_approval
// rules match conservatively: every command the line could run, after
// stripping known wrappers; any path (given or resolved, case folded) that
// could reach the glob. A Bash line whose effect cannot be established
// (opaque) matches no allow rule, and where Bash has any deny or
// require_approval rule it gets the document's bash.opaque verdict. A Bash
// call whose command is missing or does not parse is never allowed.
func (p *Policy) EvaluateIn(env Env, toolName string, input any) Result {
	return p.EvaluateCall(env, NewCall(toolName, input))
}

// EvaluateCall is EvaluateIn for a prepared call, so that several policies
// deciding the same call share one analysis of it. It reads the rules in
// document order (read), then settles the answer in named steps, each of
// which either decides or passes to the next: the Bash line's paths by
// the file rules, an opaque line, a narrowed search, the rules that
// matched, the fallbacks for protected writes and narrowed lines under a
// default allow, and the default verdict. A Bash line it asks about is
// then checked once more (bashAsked): an approval never passes a deny,
// nor a grant what the file rules ask about.
func (p *Policy) EvaluateCall(env Env, pc *Call) Result {
	e := evaluation{p: p, c: call{Call: pc, env: env}, isBash: pc.tool == bashTool}
	if e.isBash {
		e.opaque, e.opaqueWhy = e.c.opaque()
	}
	res := e.settle()
	if e.isBash && res.Verdict == VerdictRequireApproval {
		return e.bashAsked(res)
	}
	return res
}

// settle reads the rules and settles the answer (see EvaluateCall).
func (e *evaluation) settle() Result {
	for _, idx := range e.p.rulesFor(e.c.tool) {
		if res, done := e.read(e.p.rules[idx]); done {
			return res
		}
	}
	if res, done := e.bashFileRules(); done {
		return res
	}
	if res, done := e.opaqueLine(); done {
		return res
	}
	if res, done := e.narrowedSearch(); done {
		return res
	}
	if res, done := e.matched(); done {
		return res
	}
	if res, done := e.fallback(); done {
		return res
	}
	return e.byDefault()
}

// evaluation is what one EvaluateCall learns as it reads the rules.
type evaluation struct {
	p      *Policy
	c      call
	isBash bool
	// opaque: a Bash line whose effect cannot be established, and why.
	opaque    bool
	opaqueWhy string
	// ra is the first require_approval rule that matched, allow the
	// allow rule that covers the call (and allowWhy why), restrictive
	// the rule an opaque line gets the verdict of (the first deny, else
	// the first require_approval, for the tool).
	ra, allow, restrictive *rule
	allowWhy               string
	// Simple commands covered by allow prefixes, across rules, the
	// first rule that covered one, and why each uncovered one was not.
	covered   []bool
	missed    []string
	coveredBy *rule
	// broad is an allow rule that covered a write to a protected path
	// without naming it.
	broad *rule
	// narrow are the deny and require_approval rules a search reaches
	// only through its tree, which narrowing it can keep it from.
	narrow   []*rule
	sawAllow bool
	// narrowEx is what the Bash line's searches must leave out.
	narrowEx *bashNarrowing
	// fileAsk is a file rule's require_approval of a Bash line that a
	// Bash rule asks about too.
	fileAsk *bashFileFinding
}

// read takes one rule of the tool into account; done when a deny
// settles the call.
func (e *evaluation) read(r *rule) (Result, bool) {
	switch r.verdict {
	case VerdictDeny:
		return e.readDeny(r)
	case VerdictRequireApproval:
		e.readAsk(r)
	case VerdictAllow:
		e.readAllow(r)
	}
	return Result{}, false
}

// readDeny: a deny rule that matches decides, unless it reaches a search
// only through a tree that narrowing, or a Glob's report, keeps it from.
func (e *evaluation) readDeny(r *rule) (Result, bool) {
	if e.restrictive == nil || e.restrictive.verdict != VerdictDeny {
		e.restrictive = r
	}
	if !r.matchLoose(&e.c) {
		return Result{}, false
	}
	if e.c.narrowable(r) {
		e.narrow = append(e.narrow, r)
		return Result{}, false
	}
	if e.c.tool == "Glob" && e.c.globReport(r).clear {
		return Result{}, false
	}
	return Result{Verdict: VerdictDeny, RuleID: r.id, Reason: e.p.denyReason(&e.c, r)}, true
}

// readAsk remembers the first require_approval rule that matches, as
// readDeny reads a deny.
func (e *evaluation) readAsk(r *rule) {
	if e.restrictive == nil {
		e.restrictive = r
	}
	if e.ra != nil || !r.matchLoose(&e.c) {
		return
	}
	if e.c.narrowable(r) {
		e.narrow = append(e.narrow, r)
		return
	}
	if e.c.tool == "Glob" && e.c.globReport(r).clear {
		return
	}
	e.ra = r
}

// readAllow takes an allow rule into account, unless the outcome can no
// longer change but by a deny that follows.
func (e *evaluation) readAllow(r *rule) {
	e.sawAllow = true
	if e.allow != nil || e.ra != nil || e.opaque {
		return
	}
	if !r.hasPrefix {
		e.allowPlain(r)
		return
	}
	e.allowPrefixed(r)
}

// allowPlain: a rule without command prefixes allows what it matches
// strictly, except a write to a protected path it does not name.
func (e *evaluation) allowPlain(r *rule) {
	if !r.matchStrict(&e.c) {
		return
	}
	if h := e.c.protectedWrite(); h != nil && !r.names(h) {
		if e.broad == nil {
			e.broad = r
		}
		return
	}
	e.allow, e.allowWhy = r, fmt.Sprintf("allowed by rule %q", r.id)
}

// allowPrefixed: a rule with command prefixes covers the parts of the
// line its prefixes allow; the line is allowed once every part is
// covered, by this rule or earlier ones.
func (e *evaluation) allowPrefixed(r *rule) {
	if !r.matchStrictNonPrefix(&e.c) {
		return
	}
	a := e.c.bash()
	n := 0
	if a != nil {
		n = a.Parts()
	}
	if n == 0 {
		return
	}
	if e.covered == nil {
		e.covered, e.missed = make([]bool, n), make([]string, n)
	}
	all := true
	for i := range e.covered {
		if !e.covered[i] {
			e.cover(a, i, r)
		}
		all = all && e.covered[i]
	}
	if !all {
		return
	}
	e.allow = e.coveredBy
	if e.coveredBy == r {
		e.allowWhy = fmt.Sprintf("allowed by rule %q", r.id)
	} else {
		e.allowWhy = fmt.Sprintf("allowed by rule %q and rule %q (every part of the line)", e.coveredBy.id, r.id)
	}
}

// cover tries rule r's prefixes on part i of the line, and remembers why
// the first that starts it does not cover it.
func (e *evaluation) cover(a *bash.Analysis, i int, r *rule) {
	for _, pf := range r.prefixes {
		ok, why := a.PartAllowed(i, pf, r.anyOptions)
		if ok {
			e.covered[i] = true
			if e.coveredBy == nil {
				e.coveredBy = r
			}
			return
		}
		if why != "" && e.missed[i] == "" {
			e.missed[i] = fmt.Sprintf("%s starts with a prefix of rule %q but %s", a.PartName(i), r.id, why)
			if !r.anyOptions {
				e.missed[i] += " (the rule does not opt in to other options)"
			}
		}
	}
}

// bashFileRules judges a Bash line's paths by the file rules: a deny
// decides, a require_approval asks once (no grant covers other paths),
// and searches to narrow are remembered.
func (e *evaluation) bashFileRules() (Result, bool) {
	if !e.isBash {
		return Result{}, false
	}
	deny, ask, ex := e.p.bashFiles(&e.c)
	if deny != nil {
		return Result{Verdict: VerdictDeny, RuleID: deny.rule.id, Reason: fmt.Sprintf("denied by rule %q (a rule of %s): %s", deny.rule.id, deny.rule.tool.pattern, deny.reason)}, true
	}
	e.narrowEx = ex
	if ask != nil && e.ra == nil {
		res := e.p.approval(&e.c, ask.rule)
		res.Reason = fmt.Sprintf("rule %q (a rule of %s) requires approval: %s", ask.rule.id, ask.rule.tool.pattern, ask.reason)
		// A grant on the command would cover other paths too.
		res.ScopeKey, res.Scope = "", ScopeOnce
		e.c.Call.noGrant.Store(true)
		return res, true
	}
	e.fileAsk = ask
	return Result{}, false
}

// bashAsked settles a Bash line the policy asks about. An approval never
// passes a deny, and a line asked about is not rewritten, so a line whose
// searches reach what a deny rule matches (which an allow would have
// narrowed) is denied. A session grant names a program, not the files it
// reaches: a line the file rules ask about too, whose searches reach what
// they ask about, or that may write a path programs obey (git's checkouts,
// merges and patches included: the names are in the repository, not on
// the line) is asked about once, under no key, and no grant answers it
// (AnswerGrants).
func (e *evaluation) bashAsked(res Result) Result {
	n := e.narrowEx
	if n != nil && n.deny.rule != nil {
		d := n.deny
		return Result{Verdict: VerdictDeny, RuleID: d.rule.id, Reason: fmt.Sprintf("denied by rule %q (a rule of %s): %s reads the tree under its path, which may hold paths it matches (%q), and a line that requires approval is not narrowed, since no approval passes a deny: name the paths to search, or leave those paths out with the search's own exclusion", d.rule.id, d.rule.tool.pattern, d.operand, d.glob)}
	}
	var why string
	switch {
	case e.fileAsk != nil:
		r := e.fileAsk.rule
		why = fmt.Sprintf("rule %q (a rule of %s) requires approval too: %s", r.id, r.tool.pattern, e.fileAsk.reason)
		res.OnAutonomous = stricterFallback(res.OnAutonomous, e.p.approval(&e.c, r).OnAutonomous)
	case n != nil:
		f := n.first
		why = fmt.Sprintf("%s reads the tree under its path, which may hold paths rule %q (a rule of %s) asks about (%q)", f.operand, f.rule.id, f.rule.tool.pattern, f.glob)
		res.OnAutonomous = stricterFallback(res.OnAutonomous, e.p.approval(&e.c, f.rule).OnAutonomous)
	default:
		why = e.c.bashProtectedWrite()
	}
	if a := e.c.bash(); why == "" && a != nil {
		if why = a.GitTreeWrite(); why != "" {
			why += ", which may be a file a program obeys"
		}
	}
	if why == "" {
		return res
	}
	e.c.Call.noGrant.Store(true)
	if res.ScopeKey != "" {
		res.ScopeKey, res.Scope = "", ScopeOnce
		res.Reason += "; " + why + ", so it can be approved only once (no session grant covers such a line)"
	}
	return res
}

// stricterFallback is what an autonomous run does with a call two rules
// ask about: allow only when both fall back to allow.
func stricterFallback(a, b Verdict) Verdict {
	if a == VerdictAllow {
		return b
	}
	return a
}

// opaqueLine gives an opaque line the bash.opaque verdict where Bash has
// deny or require_approval rules, saying that the rule named was chosen
// only for that.
func (e *evaluation) opaqueLine() (Result, bool) {
	if !e.opaque || e.restrictive == nil {
		return Result{}, false
	}
	why := fmt.Sprintf("%s; the line is given the verdict of rule %q (bash.opaque) only because the policy has deny or require_approval rules for Bash, not because the line matches it", e.opaqueWhy, e.restrictive.id)
	if e.p.opaqueVerdict == VerdictDeny {
		return Result{Verdict: VerdictDeny, RuleID: e.restrictive.id, Reason: why}, true
	}
	if e.ra == nil {
		res := e.p.approval(&e.c, e.restrictive)
		res.Reason = why
		return res, true
	}
	return Result{}, false
}

// narrowedSearch allows a search the policy otherwise allows with its
// input narrowed; a search not allowed otherwise is decided by the rules
// it reaches, as they read.
func (e *evaluation) narrowedSearch() (Result, bool) {
	if len(e.narrow) == 0 {
		return Result{}, false
	}
	if e.ra == nil && (e.allow != nil || e.p.doc.DefaultVerdict == VerdictAllow) {
		in, why := e.c.narrowGrep(e.narrow)
		by, id := "no rule matched; default verdict allow", ""
		if e.allow != nil {
			by, id = e.allowWhy, e.allow.id
		}
		return Result{Verdict: VerdictAllow, RuleID: id, Reason: by + "; " + why, UpdatedInput: in}, true
	}
	// A narrowed search is no reason to ask or refuse less.
	for _, r := range e.narrow {
		if r.verdict == VerdictDeny {
			return Result{Verdict: VerdictDeny, RuleID: r.id, Reason: e.p.denyReason(&e.c, r)}, true
		}
	}
	if e.ra == nil {
		e.ra = e.narrow[0]
	}
	return Result{}, false
}

// matched answers with the rule that matched: a require_approval asks; an
// allow allows, unless the Bash line writes a protected path (the
// fallback decides) or its searches must be narrowed.
func (e *evaluation) matched() (Result, bool) {
	switch {
	case e.ra != nil:
		return e.p.approval(&e.c, e.ra), true
	case e.allow == nil:
		return Result{}, false
	}
	if e.isBash {
		if why := e.c.bashProtectedWrite(); why != "" {
			return e.p.protectedFallback(&e.c, fmt.Sprintf("rule %q covers every part, but %s; no allow rule covers such a Bash line (write the file with a file tool under a rule that names it)", e.allow.id, why)), true
		}
		if e.narrowEx != nil {
			return e.p.narrowedBash(&e.c, e.narrowEx, e.allowWhy), true
		}
	}
	return e.p.neverAllowUnparsed(&e.c, Result{Verdict: VerdictAllow, RuleID: e.allow.id, Reason: e.allowWhy}), true
}

// fallback answers what no rule decided but a broad rule or a default
// allow would let through: a write to a protected path, and a Bash line
// under a default allow that writes one or whose searches must be
// narrowed.
func (e *evaluation) fallback() (Result, bool) {
	if h := e.c.protectedWrite(); h != nil && (e.broad != nil || e.p.doc.DefaultVerdict == VerdictAllow) {
		return e.p.protectedFallback(&e.c, protectedWriteReason(h, e.broad)), true
	}
	if !e.isBash || e.p.doc.DefaultVerdict != VerdictAllow {
		return Result{}, false
	}
	if why := e.c.bashProtectedWrite(); why != "" {
		return e.p.protectedFallback(&e.c, "no rule matched, and "+why+"; the default verdict allow does not cover such a Bash line"), true
	}
	if e.narrowEx != nil {
		return e.p.narrowedBash(&e.c, e.narrowEx, "no rule matched; default verdict allow"), true
	}
	return Result{}, false
}

// byDefault is the default verdict. For a refusal of a Bash line, it says
// which part no allow rule covered and why; an allow by default needs no
// explanation.
func (e *evaluation) byDefault() Result {
	detail := ""
	if e.isBash && e.p.doc.DefaultVerdict != VerdictAllow {
		detail = e.p.unmatchedDetail(&e.c, e.covered, e.missed, e.opaqueWhy, e.sawAllow)
	}
	reason := func(constant string) string {
		if detail == "" {
			return constant // no allocation on the common path
		}
		return "no rule matched" + detail + constant[len("no rule matched"):]
	}
	switch e.p.doc.DefaultVerdict {
	case VerdictAllow:
		return e.p.neverAllowUnparsed(&e.c, Result{Verdict: VerdictAllow, Reason: reason("no rule matched; default verdict allow")})
	case VerdictRequireApproval:
		res := e.p.approval(&e.c, nil)
		res.Reason = reason("no rule matched; default verdict require_approval")
		return res
	default:
		return Result{Verdict: VerdictDeny, Reason: reason("no rule matched; default verdict deny")}
	}
}

// narrowedBash answers a line the policy allows (by) whose searches must
// leave the exclusions out: allow with the rewritten line, or deny when it
// cannot be rewritten or the rewrite is not allowed.
func (p *Policy) narrowedBash(c *call, n *bashNarrowing, by string) Result {
	tails := make([]string, len(n.ex))
	for i, e := range n.ex {
		tails[i] = e.Tail
	}
	in, res, ok := p.narrowBash(c, n.ex)
	if !ok {
		why := "a search in it follows symbolic links, runs under a wrapper, or cannot be rewritten"
		if res.Verdict != "" {
			why = "the rewritten line is not allowed (" + res.Reason + ")"
		}
		f := n.first
		return Result{Verdict: VerdictDeny, RuleID: f.rule.id, Reason: fmt.Sprintf("denied by rule %q (a rule of %s): %s reads the tree under its path, which may hold paths it matches (%q; the file rules deny %s there), and it is not narrowed because %s", f.rule.id, f.rule.tool.pattern, f.operand, f.glob, strings.Join(tails, ", "), why)}
	}
	res.UpdatedInput = in
	res.Reason = by + "; narrowed: its searches leave out " + strings.Join(tails, ", ") + ", which the file rules deny"
	return res
}

// denyReason says why rule r denies the call: for a search, which glob of
// the rule the searched tree may reach and why the search was not
// narrowed instead.
func (p *Policy) denyReason(c *call, r *rule) string {
	if c.tool == "Glob" {
		f := c.globReport(r)
		g := f.glob
		if g == "" {
			g = c.reachedGlob(r)
		}
		return fmt.Sprintf("denied by rule %q: the search may reach paths matching %q, and it is not narrowed because %s", r.id, g, f.why)
	}
	if c.tool == "Grep" {
		if g := c.directGlob(r); g != "" {
			return fmt.Sprintf("denied by rule %q: the search may reach paths matching %q, and it is not narrowed because the path it names is such a path", r.id, g)
		}
		if g := c.reachedGlob(r); g != "" {
			why := "it names no path a rule allows"
			if !c.narrowable(r) {
				why = "no exclusion can express the glob"
			}
			return fmt.Sprintf("denied by rule %q: the search may reach paths matching %q, and it is not narrowed because %s", r.id, g, why)
		}
	}
	return fmt.Sprintf("denied by rule %q", r.id)
}

// reachedGlob is the first of r's globs a search call's paths may reach.
func (c *call) reachedGlob(r *rule) string {
	vals, _ := c.pathValues()
	for _, g := range r.paths {
		for _, v := range vals {
			if g.matchLoose(v, &c.env) {
				return g.pattern
			}
		}
	}
	return ""
}

// directHit: r matches a path the call names, not only its tree: the path
// itself, or a glob piece that names only files r matches (".env" under
// "**/.env").
func (c *call) directHit(r *rule) bool { return c.directGlob(r) != "" }

// directGlob is the first of r's globs that a path the call names matches
// directly (see directHit), "" for none.
func (c *call) directGlob(r *rule) string {
	vals, _ := c.pathValues()
	for _, v := range vals {
		for _, g := range r.paths {
			if !v.pattern {
				if g.matchLoose(v, &c.env) {
					return g.pattern
				}
				continue
			}
			last := foldCase(v.text[strings.LastIndexByte(v.text, '/')+1:])
			if g.lastLiteral != "" && last == g.lastLiteral && (g.lower == last || g.lower == "**/"+last) {
				return g.pattern
			}
		}
	}
	return ""
}

// protectedFallback answers a call that writes a path programs obey and
// that only a broad rule or the default would allow: the default verdict,
// and deny where that is allow.
func (p *Policy) protectedFallback(c *call, reason string) Result {
	c.Call.noGrant.Store(true)
	switch p.doc.DefaultVerdict {
	case VerdictRequireApproval:
		res := p.approval(c, nil)
		res.Reason = reason + "; default verdict require_approval"
		// A human may allow this one call; no grant may name it.
		res.ScopeKey, res.Scope = "", ScopeOnce
		return res
	}
	return Result{Verdict: VerdictDeny, Reason: reason}
}

// unmatchedDetail says, for a Bash line no rule decided, which part did not
// match an allow rule and why.
func (p *Policy) unmatchedDetail(c *call, covered []bool, missed []string, opaqueWhy string, sawAllow bool) string {
	a := c.bash()
	if a == nil {
		return ""
	}
	if opaqueWhy != "" {
		return " (" + opaqueWhy + ", so no allow rule can match)"
	}
	if !sawAllow {
		return " (the policy has no allow rule for Bash)"
	}
	if ok, why := a.Strict(); !ok {
		return " (allow rules judge only plain command lines: " + why + ")"
	}
	for i := 0; i < a.Parts(); i++ {
		if covered != nil && covered[i] {
			continue
		}
		if missed != nil && missed[i] != "" {
			return " (" + missed[i] + ")"
		}
		return " (" + a.PartName(i) + " matches no allow rule)"
	}
	return ""
}

// neverAllowUnparsed turns an allow of a Bash call whose command is missing
// or does not parse into a deny: nothing about such a call can be trusted.
func (p *Policy) neverAllowUnparsed(c *call, r Result) Result {
	if c.tool != bashTool {
		return r
	}
	a := c.bash()
	switch {
	case a == nil:
		return Result{Verdict: VerdictDeny, Reason: "Bash call without a string command is never allowed"}
	case !a.Parsed():
		return Result{Verdict: VerdictDeny, Reason: "Bash command is never allowed when it cannot be parsed (" + bash.ParseReason(a.ParseError()) + ")"}
	}
	return r
}

func (p *Policy) approval(c *call, r *rule) Result {
	res := Result{
		Verdict:      VerdictRequireApproval,
		Scope:        p.scope,
		TTL:          p.ttl,
		OnAutonomous: p.fallback,
	}
	if r != nil {
		res.RuleID = r.id
		res.Reason = fmt.Sprintf("rule %q requires approval", r.id)
		if r.scope != "" {
			res.Scope = r.scope
		}
		if r.ttl != 0 {
			res.TTL = r.ttl
		}
		if r.onAuto != "" {
			res.OnAutonomous = r.onAuto
		}
	} else {
		res.Reason = "no rule matched; default verdict require_approval"
	}
	res.ScopeKey = scopeKey(c, r)
	if res.ScopeKey == "" {
		res.Scope = ScopeOnce
	}
	return res
}

// matchLoose is the deny/require_approval reading of a rule's criteria.
func (r *rule) matchLoose(c *call) bool {
	if r.hasAgent && !r.matchAgent(c.env.AgentType) {
		return false
	}
	if r.hasInput && !r.matchInputLoose(c) {
		return false
	}
	if r.hasPath {
		if len(r.paths) == 0 {
			return false
		}
		vals, ok := c.pathValues()
		if ok {
			hit := false
			for _, v := range vals {
				for _, g := range r.paths {
					if g.matchLoose(v, &c.env) {
						hit = true
						break
					}
				}
				if hit {
					break
				}
			}
			if !hit {
				return false
			}
		}
		// A missing path could be anything (Grep without a path searches
		// the working directory): conservatively a match.
	}
	if r.hasPrefix {
		if len(r.prefixes) == 0 {
			return false
		}
		a := c.bash()
		if a == nil {
			return true // no command to analyse: conservatively a match
		}
		for _, pf := range r.prefixes {
			if a.LooseMatch(pf) {
				return true
			}
		}
		return false
	}
	return true
}

// matchStrict is the allow reading of a rule without command prefixes.
func (r *rule) matchStrict(c *call) bool {
	return r.matchStrictNonPrefix(c)
}

func (r *rule) matchStrictNonPrefix(c *call) bool {
	if r.hasAgent && !r.matchAgent(c.env.AgentType) {
		return false
	}
	if r.hasInput && !r.matchInput(c.input) {
		return false
	}
	if r.hasPath {
		vals, ok := c.pathValues()
		if !ok || len(vals) == 0 {
			return false
		}
		// Every path of the call, given and resolved, must be inside,
		// and there must be no other reading of one.
		for _, v := range vals {
			if v.alt {
				return false
			}
			if v.search {
				continue
			}
			inside := false
			for _, g := range r.paths {
				if g.matchStrict(v, &c.env) {
					inside = true
					break
				}
			}
			if !inside {
				return false
			}
		}
		return true
	}
	return true
}

// matchAgent reports whether the subagent type agent matches the rule's
// agent_type globs, exactly (the type is an identifier the runner reports,
// not a path or text to fold). The main agent ("") matches none.
func (r *rule) matchAgent(agent string) bool {
	if agent == "" {
		return false
	}
	for _, g := range r.agents {
		if g.match(agent) {
			return true
		}
	}
	return false
}

func (r *rule) matchInput(input any) bool {
	for _, cond := range r.inputs {
		v, ok := cond.ptr.resolve(input)
		if !ok {
			return false
		}
		text, ok := scalarText(v)
		if !ok {
			return false
		}
		hit := false
		for _, g := range cond.globs {
			if g.match(text) {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// matchInputLoose is the deny side's reading of input criteria: a value
// matches in any case, and a number (or a string holding one) in any
// notation, since the receiver may read "Evil-Org" as evil-org and 5.0 or
// "05" as 5. It allocates only for text that needs folding or a number
// not already in its shortest form.
func (r *rule) matchInputLoose(c *call) bool {
	for _, cond := range r.inputs {
		v, ok := cond.ptr.resolve(c.input)
		if !ok {
			return false
		}
		text, ok := scalarText(v)
		if !ok {
			return false
		}
		if !matchesAny(cond.folded, c.folds.fold(text)) && !matchesNumber(cond.folded, text) {
			return false
		}
	}
	return true
}

func matchesAny(globs []*glob, text string) bool {
	for _, g := range globs {
		if g.match(text) {
			return true
		}
	}
	return false
}

// matchesNumber matches a finite number's other spellings: its shortest
// decimal and, for an integral one, the integer.
func matchesNumber(globs []*glob, text string) bool {
	t := strings.TrimSpace(text)
	if t == "" || strings.IndexByte("0123456789+-.", t[0]) < 0 || plainInteger(t) {
		return false // not a number, or already in its one spelling
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return false
	}
	if matchesAny(globs, strconv.FormatFloat(f, 'f', -1, 64)) {
		return true
	}
	return f == math.Trunc(f) && math.Abs(f) < 1<<53 && matchesAny(globs, strconv.FormatInt(int64(f), 10))
}

// plainInteger: digits without a leading zero (or "0"), which no other
// notation shortens.
func plainInteger(t string) bool {
	if t == "0" {
		return true
	}
	if t[0] < '1' || t[0] > '9' {
		return false
	}
	for i := 1; i < len(t); i++ {
		if t[i] < '0' || t[i] > '9' {
			return false
		}
	}
	return true
}

// pathValue is one path the call touches: a path, or a glob pattern joined
// to the directory it searches.
type pathValue struct {
	text    string
	pattern bool
	// alt: another reading of a given path, which the tool may open
	// instead of what the text says (see readings). Only deny and
	// require_approval rules match alternative readings; a call with one
	// is never allowed by a path rule.
	alt bool
	// search: the tree a search tool reads (Grep with a path and no
	// glob reads every file under it). Only deny and require_approval
	// rules read it; an allow rule judges the path itself.
	search bool
}

// pathValues returns every path-bearing field of a file tool call, given
// and resolved, made absolute where the working directory or workspace is
// known. ok is false when the call names no path at all, or a field holds
// something other than a string.
func (c *call) pathValues() ([]pathValue, bool) {
	if c.pathsSet {
		return c.paths, c.pathsOK
	}
	c.pathsSet = true
	fields, isFile := fileTools[c.tool]
	m, isMap := c.input.(map[string]any)
	if !isFile || !isMap {
		return nil, false
	}
	pc := pathCollector{tool: c.tool, resolved: c.env.Resolved, base: c.env.Cwd}
	if pc.base == "" {
		pc.base = c.env.Workspace
	}
	for _, f := range fields {
		if !pc.field(f, m) {
			return nil, false
		}
	}
	if pc.dir != "" && !pc.hasPattern && c.tool == "Grep" && !c.env.isFile("path") {
		// Grep without a glob reads every file under its path, unless
		// the sandbox found the path to be a file.
		for _, v := range pc.out {
			if !v.pattern {
				pc.out = append(pc.out, pathValue{text: strings.TrimSuffix(v.text, "/") + "/**", pattern: true, search: true})
			}
		}
	}
	c.paths, c.pathsOK = pc.out, len(pc.out) > 0
	return c.paths, c.pathsOK
}

// pathCollector gathers a file tool call's paths, field by field.
type pathCollector struct {
	// tool and resolved are the call's tool and the sandbox's resolved
	// paths (not the call itself, which would then escape to the heap
	// with the paths gathered).
	tool     string
	resolved map[string]string
	base     string
	// dir is the directory the tool searches, once a field named it.
	dir        string
	out        []pathValue
	hasPattern bool
}

// field adds the paths of one field; false when it holds something other
// than a non-empty string.
func (pc *pathCollector) field(f pathField, m map[string]any) bool {
	raw, present := m[f.name]
	if !present {
		if f.dir && pc.tool == "Grep" && strings.HasPrefix(pc.base, "/") {
			// Grep without a path searches the working directory.
			pc.out = appendPath(pc.out, pc.base, "")
			pc.dir = pc.base
		}
		return true
	}
	s, ok := raw.(string)
	if !ok || s == "" {
		return false
	}
	if f.pattern {
		pc.pattern(s)
		return true
	}
	pc.out = appendPath(pc.out, s, pc.base)
	if f.dir {
		pc.dir = absolute(s, pc.base)
	}
	if r, ok := pc.resolved[f.name]; ok && r != "" {
		pc.out = appendPath(pc.out, r, pc.base)
	}
	return true
}

// pattern adds a glob field: it searches from the tool's directory field,
// else the working directory. rg's glob without a '/' matches a file
// name at any depth: Grep's glob, and Glob's pattern (Claude Code's Glob
// runs rg --files --glob). The field may hold several globs, and rg reads
// one starting with '!' as every file but those: deny rules see each.
func (pc *pathCollector) pattern(s string) {
	pc.hasPattern = true
	pc.out = append(pc.out, pathValue{text: pc.join(s), pattern: true})
	pieces := globPieces(s)
	if len(pieces) == 1 && pieces[0] == s && !strings.HasPrefix(s, "!") {
		return
	}
	for _, piece := range pieces {
		if strings.HasPrefix(piece, "!") {
			piece = "**"
		}
		pc.out = append(pc.out, pathValue{text: pc.join(piece), pattern: true, search: true})
	}
}

// join places a glob under the directory it searches.
func (pc *pathCollector) join(pat string) string {
	d := pc.dir
	if d == "" {
		d = pc.base
	}
	if (pc.tool == "Grep" || pc.tool == "Glob") && !strings.Contains(pat, "/") {
		pat = "**/" + pat
	}
	if !strings.HasPrefix(pat, "/") && d != "" {
		pat = strings.TrimSuffix(d, "/") + "/" + pat
	}
	return pat
}

// globPieces splits a search tool's glob field on whitespace and commas
// outside braces (*.{ts,tsx} stays one glob).
func globPieces(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case c == '{':
			depth++
		case c == '}':
			if depth > 0 {
				depth--
			}
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n'):
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	if len(out) == 0 {
		out = []string{s}
	}
	return out
}

// appendPath appends a given path, made absolute, and every other path the
// tool may read its text as, marked alt: Claude Code trims the path
// (JavaScript's trim) and expands a leading ~ or ~user to a home directory;
// a Windows harness reads '\' as a separator and C: as a drive; a harness
// that expands variables reads $HOME. A path under ~ or a variable is kept
// relative, since that directory is not known: deny rules then match it
// wherever it could be.
func appendPath(out []pathValue, s, base string) []pathValue {
	out = append(out, pathValue{text: absolute(s, base)})
	// The cleaned text too: /work/ / is /work/ once cleaned, which the
	// tool trims to /work.
	forms := []string{s}
	if c := path.Clean(s); c != s {
		forms = append(forms, c)
	}
	for _, f := range forms {
		trimmed := strings.TrimFunc(f, func(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' })
		slashed := strings.ReplaceAll(trimmed, `\`, "/")
		if len(slashed) >= 2 && slashed[1] == ':' && (slashed[0]|0x20 >= 'a' && slashed[0]|0x20 <= 'z') {
			slashed = slashed[2:]
		}
		seen := f
		for _, r := range []string{trimmed, slashed} {
			if r == seen || r == "" {
				continue
			}
			seen = r
			out = append(out, pathValue{text: absolute(r, base), alt: true})
		}
		for _, r := range []string{f, trimmed, slashed} {
			// ~, ~user and a leading $VAR or ${VAR} name a directory
			// the analysis does not know.
			if strings.HasPrefix(r, "~") || strings.HasPrefix(r, "$") {
				_, tail, _ := strings.Cut(r, "/")
				out = append(out, pathValue{text: tail, alt: true})
			}
		}
	}
	return out
}

// absolute joins a relative path to base when base is known.
func absolute(p, base string) string {
	if strings.HasPrefix(p, "/") || base == "" || !strings.HasPrefix(base, "/") {
		return p
	}
	return path.Join(base, p)
}

// BashReadOnly reports whether a Bash call only reads: every simple
// command of its line is read-only by the catalogue (it cannot write a
// file, run another program, reach the network or read beyond the paths
// its words name). The gate gives such a call the class read. If not, why
// says which part is not, naming programs and options only.
func BashReadOnly(input any) (bool, string) {
	return NewCall(bashTool, input).BashReadOnly()
}

// BashReadOnly is the package's BashReadOnly for a prepared call: its
// input read as a Bash call's, whatever the tool.
func (c *Call) BashReadOnly() (bool, string) {
	a := c.bash()
	if a == nil {
		return false, "the call has no string command"
	}
	return a.ReadOnly()
}

// BashTrace is what the analysis made of a Bash call, for an evaluation's
// trace: the parse, the simple commands allow rules judge, the commands
// deny rules see, what made the line opaque, and whether it only reads.
type BashTrace struct {
	Parsed     bool       `json:"parsed"`
	ParseError string     `json:"parse_error,omitempty"`
	Commands   [][]string `json:"commands"`
	NotPlain   string     `json:"not_plain,omitempty"`
	Normalized [][]string `json:"normalized"`
	Opaque     string     `json:"opaque,omitempty"`
	ReadOnly   bool       `json:"read_only"`
	NotRead    string     `json:"not_read_only,omitempty"`
}

// TraceBash analyses a Bash call's input.command for a trace; nil when the
// input has no string command.
func TraceBash(input any) *BashTrace {
	cmd, ok := bashCommand(input)
	if !ok {
		return nil
	}
	a := bash.Analyze(cmd)
	t := &BashTrace{Parsed: a.Parsed(), Commands: a.Commands(), Normalized: a.Normalized()}
	if !t.Parsed {
		t.ParseError = bash.ParseReason(a.ParseError())
	}
	if t.Commands == nil {
		t.Commands = [][]string{}
		_, t.NotPlain = a.Strict()
	}
	if op, why := a.Opaque(); op {
		t.Opaque = why
	}
	t.ReadOnly, t.NotRead = a.ReadOnly()
	return t
}
