package policy

import (
	"strings"

	"github.com/fluidbox/fluidbox/shared/policy/bash"
)

// GrantKey is what one session grant is stored under: the rule that asked
// ("" when the policy's default verdict asked) and the scope key that rule
// gave the call. A grant belongs to the rule that asked: the same scope key
// under another rule is another grant.
type GrantKey struct {
	RuleID   string
	ScopeKey string
}

// Grants is the set of session grants a run holds, as its caller read them.
// The zero value holds none.
type Grants struct {
	held map[GrantKey]struct{}
}

// NewGrants returns the set holding keys.
func NewGrants(keys ...GrantKey) Grants {
	g := Grants{held: make(map[GrantKey]struct{}, len(keys))}
	for _, k := range keys {
		g.held[k] = struct{}{}
	}
	return g
}

// Has reports whether the set holds k.
func (g Grants) Has(k GrantKey) bool {
	_, ok := g.held[k]
	return ok
}

// GrantAnswer is how session grants answer a call the policy said
// require_approval for.
type GrantAnswer struct {
	// Covered: held grants answer the call; Grant is the first of them.
	Covered bool
	Grant   GrantKey
	// Grantable: some set of grants could answer the call (false for an
	// opaque line, or a call no asking rule can key, or one a stricter
	// rule asks about that no grant can answer).
	Grantable bool
	// Ask is the require_approval to file when the call is not covered:
	// the policy's own answer, or the first asking rule whose grant is
	// missing when another asking rule holds its grant already, so that
	// approving the ask for the session makes progress instead of asking
	// the same question again.
	Ask Result
}

// AnswerGrants says whether the session grants held answer a call whose
// policy answer res is require_approval. res must be what EvaluateCall gave
// for the same call and environment; any other verdict is answered by no
// grant.
//
// A grant belongs to the rule that asked: a grant (R, K) answers a call
// only if rule R asks about it (a require_approval rule matching it) and
// gives it the scope key K, read strictly, the way an allow rule is read:
//   - Bash: the line must be strict (parsed, not opaque, only simple
//     commands joined by lists and pipes), and every simple command must
//     start with the words of a granted rule's matched prefix, followed by
//     words an allow rule with "options": "any" accepts, or be allowed on
//     its own by an allow rule. A line the file rules ask about (or that
//     must be narrowed to stay clear of them), or that may write a path
//     programs obey, no grant answers (EvaluateCall marks it). Rules without a command_prefix
//     and the default verdict give no scope key: "rm a.txt" approved for
//     the session must not cover "rm -rf /srv/app".
//   - File tools: every path of the call, given and resolved, must be
//     inside the granted rule's path glob the call matched, with no other
//     reading of any of them.
//   - Other tools: the rule and the tool name.
//
// A grant never answers a call that a stricter rule also matches: a deny
// rule, or a require_approval rule whose scope is once, unless that very
// rule holds a grant for the call too (a human chose the session for it).
// A call only the default verdict asks about is answered only by a grant
// of the default verdict.
func (p *Policy) AnswerGrants(env Env, pc *Call, res Result, held Grants) GrantAnswer {
	no := GrantAnswer{Ask: res}
	if res.Verdict != VerdictRequireApproval || pc == nil {
		return no
	}
	c := call{Call: pc, env: env}
	a, ok := grantable(&c)
	if !ok {
		return no
	}
	asks, ok := p.asking(&c)
	switch {
	case !ok:
		return no
	case len(asks) == 0:
		k := GrantKey{ScopeKey: scopeKey(&c, nil)}
		if res.RuleID != "" || k.ScopeKey == "" {
			return no // not the answer EvaluateCall gives, or nothing to key
		}
		return GrantAnswer{Covered: held.Has(k), Grant: k, Grantable: true, Ask: res}
	case res.RuleID != asks[0].id:
		return no
	}
	g, ok := p.keyedAsks(&c, asks, held)
	if !ok || !p.grantsCover(&c, a, g.keyed) {
		return no
	}
	return p.answerKeyed(&c, a, asks[0], res, g, held)
}

// grantable reports whether any grant may answer the call, and returns
// the analysis of its Bash line. A write to a path programs obey is
// decided by a rule that names it, never by a grant given for another
// call, and neither is a call a file rule asks about: not when an
// evaluation of this call found one (with the run's paths resolved), nor
// when the path as given names one. An opaque, unparsed or not strict
// Bash line no grant can see.
func grantable(c *call) (*bash.Analysis, bool) {
	if c.Call.noGrant.Load() || c.protectedWrite() != nil {
		return nil, false
	}
	if c.tool != bashTool {
		return nil, true
	}
	a := c.bash()
	return a, a != nil && a.Parts() > 0
}

// asking returns the require_approval rules that match the call; ok is
// false when a deny rule does.
func (p *Policy) asking(c *call) ([]*rule, bool) {
	var asks []*rule
	for _, idx := range p.rulesFor(c.tool) {
		r := p.rules[idx]
		switch r.verdict {
		case VerdictDeny:
			if r.matchLoose(c) {
				return nil, false
			}
		case VerdictRequireApproval:
			if r.matchLoose(c) {
				asks = append(asks, r)
			}
		}
	}
	return asks, true
}

// keyedGrants are the asking rules a grant can name (every stricter one
// must be among them, and hold its grant, before any grant answers),
// their keys, and those whose grant is held.
type keyedGrants struct {
	keyed, granted []*rule
	keys           map[*rule]GrantKey
}

// keyedAsks keys the asking rules; ok is false when a stricter rule (a
// scope-once one) has no key, so no grant can answer it.
func (p *Policy) keyedAsks(c *call, asks []*rule, held Grants) (keyedGrants, bool) {
	g := keyedGrants{keys: map[*rule]GrantKey{}}
	for _, r := range asks {
		k := scopeKey(c, r)
		if k == "" {
			if p.scopeOf(r) == ScopeOnce {
				return g, false
			}
			continue
		}
		g.keyed = append(g.keyed, r)
		g.keys[r] = GrantKey{RuleID: r.id, ScopeKey: k}
		if held.Has(g.keys[r]) {
			g.granted = append(g.granted, r)
		}
	}
	return g, true
}

// answerKeyed answers from the keyed rules' grants: covered when every
// stricter rule holds its grant and the held grants cover the call; else
// the approval asks under the first rule whose grant is missing.
func (p *Policy) answerKeyed(c *call, a *bash.Analysis, first *rule, res Result, g keyedGrants, held Grants) GrantAnswer {
	out := GrantAnswer{Grantable: true, Ask: res}
	for _, r := range g.keyed {
		if p.scopeOf(r) == ScopeOnce && !held.Has(g.keys[r]) {
			out.Ask = p.ask(c, r, first, res)
			return out
		}
	}
	if p.grantsCover(c, a, g.granted) {
		out.Covered, out.Grant = true, g.keys[g.granted[0]]
		return out
	}
	for _, r := range g.keyed {
		if !held.Has(g.keys[r]) {
			out.Ask = p.ask(c, r, first, res)
			break
		}
	}
	return out
}

// ask is the require_approval rule r files: the policy's own answer res
// when r is the rule that reported it (first), else r's, whose fallback in
// an autonomous run is allow only when res's is too: asking under another
// rule so that a human's grant makes progress must not let a run without
// a human do more than the policy's answer lets it.
func (p *Policy) ask(c *call, r, first *rule, res Result) Result {
	if r == first {
		return res
	}
	out := p.approval(c, r)
	out.OnAutonomous = stricterFallback(res.OnAutonomous, out.OnAutonomous)
	return out
}

// scopeOf is a require_approval rule's default approval scope.
func (p *Policy) scopeOf(r *rule) Scope {
	if r.scope != "" {
		return r.scope
	}
	return p.scope
}

// grantsCover reports whether grants of the rules given (asking rules
// with a scope key), all held, would answer the whole call.
func (p *Policy) grantsCover(c *call, a *bash.Analysis, rules []*rule) bool {
	if len(rules) == 0 {
		return false
	}
	switch {
	case a != nil:
		for i := 0; i < a.Parts(); i++ {
			if !p.partCovered(c, a, i, rules) {
				return false
			}
		}
		return true
	case isFileTool(c.tool):
		for _, r := range rules {
			if g := askGlob(c, r); g == nil || globHolds(c, g) {
				return true // a rule without globs keys the tool itself
			}
		}
		return false
	}
	return true
}

// partCovered: simple command i starts with the matched prefix of one of
// the rules, followed by words an allow rule with "options": "any" would
// accept (no option that changes what a project runner runs, no pattern
// that could expand to an option), or an allow rule allows it on its own.
func (p *Policy) partCovered(c *call, a *bash.Analysis, i int, rules []*rule) bool {
	for _, r := range rules {
		if pf := askPrefix(a, r); pf != nil {
			if ok, _ := a.PartAllowed(i, pf, true); ok {
				return true
			}
		}
	}
	for _, idx := range p.rulesFor(bashTool) {
		r := p.rules[idx]
		if r.verdict != VerdictAllow || !r.matchStrictNonPrefix(c) {
			continue
		}
		if !r.hasPrefix {
			return true // a strict line, and the rule asks nothing more
		}
		for _, pf := range r.prefixes {
			if ok, _ := a.PartAllowed(i, pf, r.anyOptions); ok {
				return true
			}
		}
	}
	return false
}

// scopeKey names what a session grant asked for by rule r (nil: the
// default verdict) covers of this call; "" when no grant can safely
// describe it. It is built from the parse and the rule, never from the
// raw text:
//   - Bash: "Bash:<words of r's first prefix the line hits>" (hit loosely,
//     so "git -C x push" under "git push" is keyed "Bash:git push"); no key
//     for an opaque line, a rule without prefixes, or the default verdict.
//   - A file tool: "<tool>:<r's first path glob the call reaches>"; the
//     tool name for a rule without path globs; no key for the default
//     verdict, which names no path a human could approve.
//   - Any other tool: its name. A name with ':' in it gets no key, so no
//     tool can pass for a Bash or file key.
func scopeKey(c *call, r *rule) string {
	switch {
	case c.tool == bashTool:
		a := c.bash()
		if a == nil || r == nil {
			return ""
		}
		if op, _ := a.Opaque(); op {
			return ""
		}
		if pf := askPrefix(a, r); pf != nil {
			return bashKeyPrefix + pf.Key()
		}
		return ""
	case strings.Contains(c.tool, ":"):
		return ""
	case isFileTool(c.tool):
		if r == nil {
			return ""
		}
		if !r.hasPath {
			return c.tool
		}
		if g := askGlob(c, r); g != nil {
			return c.tool + ":" + g.pattern
		}
		return ""
	}
	return c.tool
}

const bashKeyPrefix = bashTool + ":"

// askPrefix is the first of r's prefixes the line hits, loosely.
func askPrefix(a *bash.Analysis, r *rule) *bash.Prefix {
	for _, pf := range r.prefixes {
		if a.LooseMatch(pf) {
			return pf
		}
	}
	return nil
}

// askGlob is the first of r's path globs a path of the call reaches,
// loosely; nil for a rule without path globs, or a call without paths.
func askGlob(c *call, r *rule) *pathGlob {
	if !r.hasPath {
		return nil
	}
	vals, ok := c.pathValues()
	if !ok {
		return nil
	}
	for _, g := range r.paths {
		for _, v := range vals {
			if g.matchLoose(v, &c.env) {
				return g
			}
		}
	}
	return nil
}

// globHolds reports whether every path of the call, given and resolved,
// is inside g, read as an allow rule reads its globs.
func globHolds(c *call, g *pathGlob) bool {
	vals, ok := c.pathValues()
	if !ok || len(vals) == 0 {
		return false
	}
	for _, v := range vals {
		if v.alt {
			return false
		}
		if v.search {
			continue
		}
		if !g.matchStrict(v, &c.env) {
			return false
		}
	}
	return true
}

func isFileTool(tool string) bool {
	_, ok := fileTools[tool]
	return ok
}
