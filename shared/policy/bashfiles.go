package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
)

// One file policy across every tool. A Bash line's path operands are
// judged by the file rules: what it reads (cat .env, head secrets/k, cp
// .env /tmp/x, git show HEAD:.env, grep -r KEY .) by the deny and
// require_approval path rules of the tools that read (Read, Grep, Glob),
// what it writes (redirections, the operands of commands that are not
// read-only) by those of the tools that write (Write, Edit, MultiEdit,
// NotebookEdit). Paths are read as the deny side reads a file tool's:
// case folded, relative to the caller's working directory, a tail at any
// depth where part of the word is known only at run time. A search (rg,
// grep -r) whose tree may hold what a rule matches is narrowed instead of
// refused (see narrowBash).

var (
	readTools  = []string{"Read", "Grep", "Glob"}
	writeRules = []string{"Write", "Edit", "MultiEdit", "NotebookEdit"}
)

// fileRules returns the deny and require_approval rules with path globs
// of the given tools, once per policy.
func (p *Policy) fileRules(tools []string) []*rule {
	var out []*rule
	seen := map[int]bool{}
	for _, t := range tools {
		for _, i := range p.rulesFor(t) {
			r := p.rules[i]
			if seen[i] || r.verdict == VerdictAllow || !r.hasPath || r.hasInput || len(r.paths) == 0 {
				continue
			}
			seen[i] = true
			out = append(out, r)
		}
	}
	return out
}

// bashFileFinding is what the file rules say about a Bash line.
type bashFileFinding struct {
	rule   *rule
	reason string
	// narrow: the rule reaches the line only through searches that a
	// rewrite can narrow, with these exclusions.
	narrow []bash.Exclusion
}

// bashNarrowing is what the line's searches must leave out, and the first
// rule a search reaches and the first deny rule, for reasons that name
// them.
type bashNarrowing struct {
	ex          []bash.Exclusion
	first, deny treeReach
}

// treeReach is a rule a search reaches through its tree: the glob reached,
// and the search by position (operandName).
type treeReach struct {
	rule          *rule
	glob, operand string
}

// bashFiles judges the line's operands by the file rules: the first deny,
// else the first require_approval, else the searches to narrow (nil when
// none need be).
func (p *Policy) bashFiles(c *call) (deny, ask *bashFileFinding, narrow *bashNarrowing) {
	reads, writes := p.readFileRules, p.writeFileRules
	if len(reads) == 0 && len(writes) == 0 {
		return nil, nil, nil
	}
	a := c.bash()
	if a == nil {
		return nil, nil, nil
	}
	j := bashJudge{a: a, base: c.env.Cwd, resolved: c.env.Resolved}
	if j.base == "" {
		j.base = c.env.Workspace
	}
	for _, op := range a.Reads() {
		j.read(op, reads, &c.env)
	}
	targets, _ := a.Writes()
	for _, t := range targets {
		text := operandPath(t, j.base)
		for _, r := range writes {
			if g := r.hitGlob(pathValue{text: text, pattern: t.Pattern}, &c.env); g != "" {
				j.found(r, fmt.Sprintf("a path the line may write is one it matches (%q)", g))
			}
		}
	}
	return j.deny, j.ask, j.narrow
}

// bashJudge is what bashFiles finds as it judges a line's operands. It
// holds what it needs of the call, not the call, which its findings would
// then carry to the heap.
type bashJudge struct {
	a         *bash.Analysis
	base      string
	resolved  map[string]string
	deny, ask *bashFileFinding
	narrow    *bashNarrowing
	seenEx    map[string]bool
}

// found records rule r's finding: the first deny, the first
// require_approval.
func (j *bashJudge) found(r *rule, why string) {
	f := &bashFileFinding{rule: r, reason: why}
	switch {
	case r.verdict == VerdictDeny && j.deny == nil:
		j.deny = f
	case r.verdict == VerdictRequireApproval && j.ask == nil:
		j.ask = f
	}
}

// read judges one path the line reads by the read rules: the path as
// written, as the sandbox resolved it (a link committed as notes.txt ->
// .env is judged as .env), and for a search the tree under it.
func (j *bashJudge) read(op bash.Operand, reads []*rule, env *Env) {
	text := operandPath(op.Target, j.base)
	resolved := j.resolved[OperandField(op)]
	if resolved == "" {
		resolved = j.resolved[OperandTextField(op.Text)]
	}
	for _, r := range reads {
		if g := r.hitGlob(pathValue{text: text, pattern: op.Pattern}, env); g != "" {
			j.found(r, fmt.Sprintf("%s is a path it matches (%q)", operandName(op), g))
			continue
		}
		if resolved != "" {
			if g := r.hitGlob(pathValue{text: resolved}, env); g != "" {
				j.found(r, fmt.Sprintf("%s resolves in the sandbox to a path it matches (%q)", operandName(op), g))
				continue
			}
		}
		if op.Tree {
			j.tree(op, r, text, env)
		}
	}
}

// tree judges the tree a search reads: left alone where the line already
// excludes what the rule matches, narrowed where a rewrite can exclude
// it, else a finding.
func (j *bashJudge) tree(op bash.Operand, r *rule, text string, env *Env) {
	tree := strings.TrimSuffix(text, "/") + "/**"
	if text == "" || text == "." {
		tree = "**"
	}
	g := r.hitGlob(pathValue{text: tree, pattern: true, search: true}, env)
	if g == "" {
		return
	}
	tails, ok := ruleTails(r)
	excluded := ok
	for _, t := range tails {
		excluded = excluded && j.a.Excludes(op.Part, t)
	}
	switch {
	case excluded:
	case op.Narrow && ok:
		j.narrowBy(op, r, g, tails)
	default:
		j.found(r, fmt.Sprintf("%s reads the tree under its path, which may hold paths it matches (%q), and the search cannot be narrowed", operandName(op), g))
	}
}

// narrowBy adds the rule's exclusions to those the line's searches need.
func (j *bashJudge) narrowBy(op bash.Operand, r *rule, g string, tails []bash.Exclusion) {
	if j.narrow == nil {
		j.narrow = &bashNarrowing{first: treeReach{rule: r, glob: g, operand: operandName(op)}}
		j.seenEx = map[string]bool{}
	}
	if r.verdict == VerdictDeny && j.narrow.deny.rule == nil {
		j.narrow.deny = treeReach{rule: r, glob: g, operand: operandName(op)}
	}
	for _, t := range tails {
		if !j.seenEx[t.Tail] {
			j.seenEx[t.Tail] = true
			j.narrow.ex = append(j.narrow.ex, t)
		}
	}
}

// OperandField is the key under which a runner sends, in Env.Resolved
// (resolved_paths), the sandbox's realpath of a Bash line's path operand:
// "command#<part>.<index>", as bash.Operand numbers it. The hook analyses
// the line with the same package, so both number the operands alike.
func OperandField(op bash.Operand) string { return fmt.Sprintf("command#%d.%d", op.Part, op.Index) }

// OperandTextField is the other key a runner may send an operand's realpath
// under: "command@" and the hex sha256 of the operand's text, for a runner
// that finds a line's words without this package's analysis (the Agent SDK
// adapter resolves every word that may be a path). A resolution only ever
// adds a path for the deny side to judge, so a key that names no operand
// changes nothing.
func OperandTextField(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "command@" + hex.EncodeToString(sum[:])
}

// operandPath is an operand's path as the deny side reads it: absolute
// against the working directory when known; ~ and a partly expanded word
// as a tail at an unknown place.
func operandPath(t bash.Target, base string) string {
	switch {
	case strings.HasPrefix(t.Text, "~"):
		_, rest, _ := strings.Cut(t.Text, "/")
		return rest
	case t.Partial:
		return strings.TrimLeft(t.Text, "/")
	}
	return absolute(t.Text, base)
}

// operandName names an operand by position, never by text.
func operandName(op bash.Operand) string {
	if op.Part == 0 {
		return "a file redirected into the line"
	}
	if op.Index == 0 {
		return fmt.Sprintf("the working directory command %d (`%s`) searches", op.Part, op.Program)
	}
	return fmt.Sprintf("word %d of command %d (`%s`)", op.Index, op.Part, op.Program)
}

// hitGlob is the first of the rule's globs the path may reach, "" for none.
func (r *rule) hitGlob(v pathValue, env *Env) string {
	for _, g := range r.paths {
		if g.matchLoose(v, env) {
			return g.pattern
		}
	}
	return ""
}

// ruleTails are the exclusions that leave out everything the rule's globs
// match; ok is false when some glob has none.
func ruleTails(r *rule) ([]bash.Exclusion, bool) {
	var out []bash.Exclusion
	for _, g := range r.paths {
		t := exclusionTail(g)
		if t == "" || strings.ContainsAny(t, " \t\n[]\\") {
			return nil, false
		}
		out = append(out, bash.Exclusion{Tail: t})
	}
	return out, true
}

// narrowBash rewrites the line so that its searches leave the exclusions
// out, and returns the new input when the policy allows it as it is.
func (p *Policy) narrowBash(c *call, ex []bash.Exclusion) (map[string]any, Result, bool) {
	if c.Call.narrowed {
		return nil, Result{}, false // a rewrite that still reaches the rules
	}
	cmd, _ := bashCommand(c.input)
	narrowed, ok := bash.Narrow(cmd, ex)
	if !ok || narrowed == cmd {
		return nil, Result{}, false
	}
	m, _ := c.input.(map[string]any)
	in := make(map[string]any, len(m))
	for k, v := range m {
		in[k] = v
	}
	in["command"] = narrowed
	again := NewCall(bashTool, in)
	again.narrowed = true
	res := p.EvaluateCall(c.env, again)
	if res.Verdict != VerdictAllow || res.UpdatedInput != nil {
		return nil, res, false
	}
	return in, res, true
}
