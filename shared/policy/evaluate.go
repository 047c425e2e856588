package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
)

// Result is the policy's answer for one call. It is a value: a denial is an
// answer, not an error.
type Result struct {
	Verdict Verdict
	// RuleID names the deciding rule; "" when default_verdict applied
	// (or when the call was refused because its Bash command could not be
	// parsed).
	RuleID string
	// Reason is human text naming the rule or the default.
	Reason string
	// Scope and TTL are the approval defaults of a require_approval result
	// (zero otherwise). Scope is always once when ScopeKey is "".
	Scope Scope
	TTL   time.Duration
	// OnAutonomous is what a require_approval becomes in an autonomous run:
	// the rule's on_autonomous, else autonomy.on_approval_rule, else deny.
	// Empty for other verdicts.
	OnAutonomous Verdict
	// ScopeKey is the key a session grant for this call is stored under
	// ("" when no session grant can safely describe the call). For Bash,
	// "Bash:<matched prefix words>", e.g. "Bash:git push"; for other tools,
	// the tool name.
	ScopeKey string
}

// call holds what Evaluate learns about one call, computed at most once.
type call struct {
	tool     string
	input    any
	analysis *bash.Analysis
	command  string
	hasCmd   bool
	analyzed bool
}

func (c *call) bash() *bash.Analysis {
	if !c.analyzed {
		c.analyzed = true
		c.command, c.hasCmd = bashCommand(c.input)
		if c.hasCmd {
			c.analysis = bash.Analyze(c.command)
		}
	}
	return c.analysis
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

// Evaluate decides one call. Precedence is by restriction, not by order:
// any matching deny beats any matching require_approval, which beats any
// matching allow; with no match the default verdict applies. Among rules of
// the same verdict the first in document order is reported.
//
// Matching is asymmetric. Allow rules match strictly (a Bash command only
// through a real parse of a plain command or pipeline, a path only when it
// stays inside the working directory). Deny and require_approval rules
// match conservatively (every command the line could run, after stripping
// wrappers; any path that could reach the glob; a Bash command that cannot
// be analysed matches every command_prefix). A Bash call whose command is
// missing or does not parse is never allowed.
func (p *Policy) Evaluate(toolName string, input any) Result {
	c := call{tool: toolName, input: input}
	var ra, allow *rule
	var allowWhy string
	// Pipeline elements covered by allow prefixes, across rules.
	var covered []bool
	var coveredBy *rule

	for _, idx := range p.rulesFor(toolName) {
		r := p.rules[idx]
		switch r.verdict {
		case VerdictDeny:
			if r.matchLoose(&c) {
				return Result{Verdict: VerdictDeny, RuleID: r.id, Reason: fmt.Sprintf("denied by rule %q", r.id)}
			}
		case VerdictRequireApproval:
			if ra == nil && r.matchLoose(&c) {
				ra = r
			}
		case VerdictAllow:
			if allow != nil || ra != nil {
				continue // cannot change the outcome unless a deny follows
			}
			if !r.hasPrefix {
				if r.matchStrict(&c) {
					allow, allowWhy = r, fmt.Sprintf("allowed by rule %q", r.id)
				}
				continue
			}
			if !r.matchStrictNonPrefix(&c) {
				continue
			}
			a := c.bash()
			n := 0
			if a != nil {
				n = a.Elements()
			}
			if n == 0 {
				continue
			}
			if covered == nil {
				covered = make([]bool, n)
			}
			all := true
			for i := range covered {
				if !covered[i] {
					for _, pf := range r.prefixes {
						if a.ElementHasPrefix(i, pf) {
							covered[i] = true
							if coveredBy == nil {
								coveredBy = r
							}
							break
						}
					}
				}
				all = all && covered[i]
			}
			if all {
				allow = coveredBy
				if coveredBy == r {
					allowWhy = fmt.Sprintf("allowed by rule %q", r.id)
				} else {
					allowWhy = fmt.Sprintf("allowed by rule %q and rule %q (pipeline)", coveredBy.id, r.id)
				}
			}
		}
	}
	switch {
	case ra != nil:
		return p.approval(&c, ra)
	case allow != nil:
		return p.neverAllowUnparsed(&c, Result{Verdict: VerdictAllow, RuleID: allow.id, Reason: allowWhy})
	}
	switch p.doc.DefaultVerdict {
	case VerdictAllow:
		return p.neverAllowUnparsed(&c, Result{Verdict: VerdictAllow, Reason: "no rule matched; default verdict allow"})
	case VerdictRequireApproval:
		return p.approval(&c, nil)
	default:
		return Result{Verdict: VerdictDeny, Reason: "no rule matched; default verdict deny"}
	}
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
		return Result{Verdict: VerdictDeny, Reason: fmt.Sprintf("Bash command is never allowed when it cannot be parsed (%v)", a.ParseError())}
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
	res.ScopeKey = p.scopeKey(c, r)
	if res.ScopeKey == "" {
		res.Scope = ScopeOnce
	}
	return res
}

// scopeKey names what a session grant for this call covers. For Bash it
// comes from the parse: the first prefix of the rule that the command hits
// (loosely, so "git -C x push" under "git push" is keyed "Bash:git push"),
// else the whole command when it is one strict simple command, else nothing.
func (p *Policy) scopeKey(c *call, r *rule) string {
	if c.tool != bashTool {
		return c.tool
	}
	a := c.bash()
	if a == nil || !a.Parsed() {
		return ""
	}
	if r != nil {
		for _, pf := range r.prefixes {
			if a.LooseMatch(pf) {
				return bashKeyPrefix + pf.Key()
			}
		}
	}
	if a.Elements() == 1 {
		keys := a.ElementKeys(0)
		words := a.ElementWords(0)
		if len(keys) > 0 && len(keys) == len(words) {
			return bashKeyPrefix + keys[len(keys)-1]
		}
	}
	return ""
}

const bashKeyPrefix = bashTool + ":"

// matchLoose is the deny/require_approval reading of a rule's criteria.
func (r *rule) matchLoose(c *call) bool {
	if r.hasInput && !r.matchInput(c.input) {
		return false
	}
	if r.hasPath {
		v, ok := pathValue(c.tool, c.input)
		if ok {
			hit := false
			for _, g := range r.paths {
				if g.matchLoose(v) {
					hit = true
					break
				}
			}
			if !hit {
				return false
			}
		}
		// A missing path could be anything (Grep without a path searches
		// the working directory): conservatively a match, unless the
		// rule lists no globs at all.
		if !ok && len(r.paths) == 0 {
			return false
		}
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
	if r.hasInput && !r.matchInput(c.input) {
		return false
	}
	if r.hasPath {
		v, ok := pathValue(c.tool, c.input)
		if !ok {
			return false
		}
		cleaned, ok := strictPath(v)
		if !ok {
			return false
		}
		for _, g := range r.paths {
			if g.matchStrict(cleaned) {
				return true
			}
		}
		return false
	}
	return true
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

// pathValue returns the path field of a file tool call.
func pathValue(tool string, input any) (string, bool) {
	field, ok := fileTools[tool]
	if !ok {
		return "", false
	}
	m, ok := input.(map[string]any)
	if !ok {
		return "", false
	}
	s, ok := m[field].(string)
	if !ok || s == "" {
		return "", false
	}
	return s, true
}

// Covered reports whether session grants cover a call, matching strictly:
// for Bash the command must parse as a plain command or pipeline and every
// element must start with the words of some granted key ("Bash:git push"
// covers "git push --force origin main", not "git pull", not
// "git push && rm -rf x", not "GIT_SSH_COMMAND=x git push"). For other tools
// the key is the tool name. granted is asked about candidate keys only.
func Covered(toolName string, input any, granted func(scopeKey string) bool) bool {
	if granted == nil || toolName == "" {
		return false
	}
	if toolName != bashTool {
		if strings.HasPrefix(toolName, bashKeyPrefix) {
			return false
		}
		return granted(toolName)
	}
	cmd, ok := bashCommand(input)
	if !ok {
		return false
	}
	a := bash.Analyze(cmd)
	n := a.Elements()
	if n == 0 {
		return false
	}
	for i := 0; i < n; i++ {
		hit := false
		for _, k := range a.ElementKeys(i) {
			if granted(bashKeyPrefix + k) {
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
