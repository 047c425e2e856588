package policy

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// glob is a compiled shell-style pattern over a whole string, used for tool
// names and input values. '*' matches any run of characters (including '/'),
// '?' one character, [abc], [a-z] and [!a-z] a class, '\' escapes. Unlike path
// globs, nothing is special about '/': a deny on "https://evil.example/*" must
// match every URL under it.
type glob struct {
	pattern string
	kind    globKind
	lit     string  // exact text, or the prefix for globPrefix
	alts    []*glob // globAlternatives: the patterns a {a,b} names
}

type globKind uint8

const (
	globExact globKind = iota
	globAny
	globPrefix
	globSuffix
	globContains
	globGeneral
	// globAlternatives is a tool glob with one {a,b,...} group: it
	// matches what any of its expansions matches. Only tool globs have
	// it (compileToolGlob): in an input value '{' is a literal character.
	globAlternatives
)

// maxAlternatives bounds a tool glob's {a,b,...} group.
const maxAlternatives = 64

// compileToolGlob compiles a rule's tool glob: a glob (compileGlob) that
// may also hold one {a,b,...} group, as in "{Read,Glob,Grep}" or
// "mcp__{jira,github}__*". A second group, a nested one, an unclosed one
// or an empty alternative is refused, so a pattern reads one way only.
func compileToolGlob(p string) (*glob, error) {
	open := unescaped(p, '{')
	if open < 0 {
		if unescaped(p, '}') >= 0 {
			return nil, errors.New("bad glob: '}' without '{'")
		}
		return compileGlob(p)
	}
	end := unescaped(p[open+1:], '}')
	if end < 0 {
		return nil, errors.New("bad glob: '{' without '}'")
	}
	end += open + 1
	body, rest := p[open+1:end], p[end+1:]
	if unescaped(body, '{') >= 0 || unescaped(rest, '{') >= 0 || unescaped(rest, '}') >= 0 {
		return nil, errors.New("bad glob: one {a,b} group at most, not nested")
	}
	names := strings.Split(body, ",")
	if len(names) > maxAlternatives {
		return nil, fmt.Errorf("bad glob: at most %d alternatives in {...}", maxAlternatives)
	}
	g := &glob{pattern: p, kind: globAlternatives}
	for _, n := range names {
		if n == "" {
			return nil, errors.New("bad glob: an empty alternative in {...}")
		}
		a, err := compileGlob(p[:open] + n + rest)
		if err != nil {
			return nil, err
		}
		g.alts = append(g.alts, a)
	}
	return g, nil
}

// unescaped is the index of the first c in p not escaped by '\' and not
// inside a [class], or -1.
func unescaped(p string, c byte) int {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			if end, err := classEnd(p, i); err == nil {
				i = end
			}
		case c:
			return i
		}
	}
	return -1
}

// literals returns the names a glob matches when it matches only a fixed
// set of them (an exact glob, or alternatives of exact ones).
func (g *glob) literals() ([]string, bool) {
	if lit, ok := g.literal(); ok {
		return []string{lit}, true
	}
	if g.kind != globAlternatives {
		return nil, false
	}
	var out []string
	for _, a := range g.alts {
		lit, ok := a.literal()
		if !ok {
			return nil, false
		}
		out = append(out, lit)
	}
	return out, true
}

var errBadGlob = errors.New("bad glob")

func compileGlob(p string) (*glob, error) {
	if err := validateGlob(p); err != nil {
		return nil, err
	}
	g := &glob{pattern: p, kind: globGeneral}
	switch {
	case !strings.ContainsAny(p, `*?[\`):
		g.kind, g.lit = globExact, p
	case p == "*":
		g.kind = globAny
	case strings.HasSuffix(p, "*") && !strings.ContainsAny(p[:len(p)-1], `*?[\`):
		g.kind, g.lit = globPrefix, p[:len(p)-1]
	case strings.HasPrefix(p, "*") && !strings.ContainsAny(p[1:], `*?[\`):
		g.kind, g.lit = globSuffix, p[1:]
	case len(p) > 2 && p[0] == '*' && p[len(p)-1] == '*' && !strings.ContainsAny(p[1:len(p)-1], `*?[\`):
		g.kind, g.lit = globContains, p[1:len(p)-1]
	}
	return g, nil
}

// literal reports whether the pattern matches exactly one string.
func (g *glob) literal() (string, bool) { return g.lit, g.kind == globExact }

func (g *glob) match(s string) bool {
	switch g.kind {
	case globExact:
		return s == g.lit
	case globAny:
		return true
	case globPrefix:
		return strings.HasPrefix(s, g.lit)
	case globSuffix:
		return strings.HasSuffix(s, g.lit)
	case globContains:
		return strings.Contains(s, g.lit)
	case globAlternatives:
		for _, a := range g.alts {
			if a.match(s) {
				return true
			}
		}
		return false
	default:
		return globMatch(g.pattern, s)
	}
}

func validateGlob(p string) error {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 >= len(p) {
				return errors.New("bad glob: trailing backslash")
			}
			i++
		case '[':
			end, err := classEnd(p, i)
			if err != nil {
				return err
			}
			i = end
		}
	}
	return nil
}

// classEnd returns the index of the ']' closing the class opened at p[i].
func classEnd(p string, i int) (int, error) {
	j := i + 1
	if j < len(p) && (p[j] == '!' || p[j] == '^') {
		j++
	}
	first := j
	for ; j < len(p); j++ {
		switch {
		case p[j] == '\\':
			j++
		case p[j] == ']' && j > first:
			return j, nil
		}
	}
	return 0, errors.New("bad glob: unterminated character class")
}

// globMatch is a backtracking matcher with one star checkpoint, linear in
// practice and never exponential.
func globMatch(p, s string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[si:])
				pi++
				si += n
				continue
			case '[':
				end, err := classEnd(p, pi)
				if err == nil {
					r, n := utf8.DecodeRuneInString(s[si:])
					if classMatch(p[pi+1:end], r) {
						pi = end + 1
						si += n
						continue
					}
				}
			case '\\':
				if pi+1 < len(p) && p[pi+1] == s[si] {
					pi += 2
					si++
					continue
				}
			default:
				if p[pi] == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		si = starS
		pi = starP + 1
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func classMatch(class string, r rune) bool {
	negate := false
	if class != "" && (class[0] == '!' || class[0] == '^') {
		negate = true
		class = class[1:]
	}
	matched := false
	for len(class) > 0 {
		lo, n := classRune(class)
		class = class[n:]
		hi := lo
		if len(class) > 1 && class[0] == '-' {
			hi, n = classRune(class[1:])
			class = class[1+n:]
		}
		if lo <= r && r <= hi {
			matched = true
		}
	}
	return matched != negate
}

func classRune(s string) (rune, int) {
	if s[0] == '\\' && len(s) > 1 {
		r, n := utf8.DecodeRuneInString(s[1:])
		return r, n + 1
	}
	return utf8.DecodeRuneInString(s)
}
