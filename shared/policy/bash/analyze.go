// Package bash reads a Bash command line the way the permission gate needs
// it: with a real shell parser (mvdan.cc/sh), never with string matching.
//
// It answers two different questions, on purpose asymmetrically:
//
//   - Strict (allow rules and session grants): is the command line a single
//     simple command, or a pipeline of simple commands, whose words are plain
//     literals and whose effect is visible in those words? Anything that can
//     run a second command or change what runs (lists, substitutions,
//     expansions, assignments, wrappers such as env/xargs/sudo, shells with
//     -c, find -exec, git -c, output redirection to files, here-documents,
//     compound commands, parse errors) makes the line not strict, so it can
//     never ride on an allow prefix.
//   - Loose (deny and require_approval rules): which simple commands could
//     this line run? Every simple command anywhere in the tree is listed,
//     including those inside substitutions, eval arguments and sh -c strings
//     (re-parsed), xargs and find -exec targets, after stripping assignments,
//     wrappers (env, command, exec, nohup, sudo, timeout, nice, ...), program
//     directories (/usr/bin/git -> git) and git's global options
//     (git -C dir push -> git push). Words whose value is only known at run
//     time match any prefix word. When the analysis cannot see what would run
//     (parse failure, eval of an expansion, a shell reading its script from a
//     pipe) the line is opaque and matches every loose prefix.
//
// The package never panics on any input; a failure inside the parser is
// reported as a parse error.
package bash

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// MaxCommandBytes bounds the command lines the package analyses. Longer
// lines are reported as not parsed, which is the fail-closed reading.
const MaxCommandBytes = 128 << 10

const (
	maxDepth   = 6  // nesting of re-parsed strings (eval, sh -c, ...)
	maxReparse = 64 // re-parsed strings per command line
)

// Analysis is what the policy engine knows about one command line. It is
// immutable once returned.
type Analysis struct {
	parseErr  error
	strict    []strictCommand
	strictWhy string
	loose     []looseCommand
	opaqueWhy string
}

// Parsed reports whether the command line parsed at all.
func (a *Analysis) Parsed() bool { return a.parseErr == nil }

// ParseError returns the parse failure, or nil.
func (a *Analysis) ParseError() error { return a.parseErr }

// Strict reports whether the command line is a single simple command or a
// pipeline of simple commands that allow rules may judge, and if not, why.
func (a *Analysis) Strict() (bool, string) {
	if a.parseErr != nil {
		return false, "does not parse: " + a.parseErr.Error()
	}
	if a.strictWhy != "" {
		return false, a.strictWhy
	}
	return len(a.strict) > 0, "empty command"
}

// Elements returns the number of pipeline elements of a strict command line
// (0 when it is not strict).
func (a *Analysis) Elements() int {
	if ok, _ := a.Strict(); !ok {
		return 0
	}
	return len(a.strict)
}

// ElementHasPrefix reports whether pipeline element i of a strict command line
// starts with the literal words of p. A word that carries an unquoted glob
// never matches a prefix word.
func (a *Analysis) ElementHasPrefix(i int, p *Prefix) bool {
	if i < 0 || i >= a.Elements() || p == nil || len(p.words) == 0 {
		return false
	}
	c := a.strict[i]
	if len(p.words) > len(c.words) || len(p.words) > c.firstGlob {
		return false
	}
	for j, w := range p.words {
		if c.words[j] != w {
			return false
		}
	}
	return true
}

// ElementKeys returns the grant keys that could cover pipeline element i:
// the key text of each leading run of its words ("git", "git push", ...).
func (a *Analysis) ElementKeys(i int) []string {
	if i < 0 || i >= a.Elements() {
		return nil
	}
	c := a.strict[i]
	n := min(len(c.words), c.firstGlob)
	keys := make([]string, 0, n)
	for k := 1; k <= n; k++ {
		keys = append(keys, KeyText(c.words[:k]))
	}
	return keys
}

// ElementWords returns a copy of the words of strict pipeline element i.
func (a *Analysis) ElementWords(i int) []string {
	if i < 0 || i >= a.Elements() {
		return nil
	}
	return append([]string(nil), a.strict[i].words...)
}

// Opaque reports whether the loose analysis could not see everything the
// command line may run, and why. An opaque line matches every loose prefix.
func (a *Analysis) Opaque() (bool, string) {
	if a.parseErr != nil {
		return true, "does not parse: " + a.parseErr.Error()
	}
	return a.opaqueWhy != "", a.opaqueWhy
}

// LooseMatch reports whether any simple command the line could run starts
// with p, reading dynamic words as wildcards. An opaque line always matches.
func (a *Analysis) LooseMatch(p *Prefix) bool {
	if p == nil || len(p.loose) == 0 {
		return false
	}
	if op, _ := a.Opaque(); op {
		return true
	}
	for _, c := range a.loose {
		if c.hasPrefix(p.loose) {
			return true
		}
	}
	return false
}

// Prefix is a compiled command_prefix entry.
type Prefix struct {
	words []string // literal words, for strict matching
	loose []string // program reduced to its base name, for loose matching
}

// Words returns a copy of the prefix's literal words.
func (p *Prefix) Words() []string { return append([]string(nil), p.words...) }

// Key returns the canonical key text of the prefix (see KeyText).
func (p *Prefix) Key() string { return KeyText(p.words) }

// ErrPrefix is wrapped by ParsePrefix errors.
var ErrPrefix = errors.New("invalid command prefix")

// ParsePrefix compiles a command_prefix entry. A prefix must itself be one
// simple command of literal words: a prefix containing an operator, a
// substitution, an expansion, a glob, an assignment or a redirection could
// never match a strict command line, so it is rejected.
func ParsePrefix(s string) (*Prefix, error) {
	f, err := parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: does not parse: %v", ErrPrefix, err)
	}
	if len(f.Stmts) != 1 {
		if len(f.Stmts) == 0 {
			return nil, fmt.Errorf("%w: empty", ErrPrefix)
		}
		return nil, fmt.Errorf("%w: more than one command", ErrPrefix)
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Background || st.Negated || st.Coprocess || st.Disown || len(st.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return nil, fmt.Errorf("%w: not a plain simple command", ErrPrefix)
	}
	p := &Prefix{}
	for _, w := range call.Args {
		cw := convertWord(w)
		if cw.dynamic {
			return nil, fmt.Errorf("%w: word %q is not a literal", ErrPrefix, cw.text)
		}
		p.words = append(p.words, cw.text)
	}
	p.loose = append([]string{basename(p.words[0])}, p.words[1:]...)
	return p, nil
}

// KeyText joins words into canonical key text: words separated by one space,
// each word shell-quoted when it is not plain, so that different word lists
// never produce the same text.
func KeyText(words []string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if plainWord(w) {
			b.WriteString(w)
			continue
		}
		q, err := syntax.Quote(w, syntax.LangBash)
		if err != nil {
			q = "$" + strconv.Quote(w)
		}
		b.WriteString(q)
	}
	return b.String()
}

func plainWord(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-_./:@%+,=", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Analyze parses one command line and runs both analyses.
func Analyze(cmd string) (a *Analysis) {
	a = &Analysis{}
	defer func() {
		// The parser and walker are third-party code; a crash inside
		// them must end in "not understood", never in a crashed gate.
		if r := recover(); r != nil {
			*a = Analysis{parseErr: fmt.Errorf("internal parser failure: %v", r)}
		}
	}()
	f, err := parse(cmd)
	if err != nil {
		a.parseErr = err
		return a
	}
	a.strict, a.strictWhy = analyzeStrict(f)
	if a.strictWhy != "" {
		a.strict = nil
	}
	n := &normalizer{budget: maxReparse}
	n.file(f, 0)
	a.loose, a.opaqueWhy = n.cmds, n.opaqueWhy
	return a
}

func parse(s string) (*syntax.File, error) {
	if len(s) > MaxCommandBytes {
		return nil, fmt.Errorf("command longer than %d bytes", MaxCommandBytes)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errors.New("command contains a NUL byte")
	}
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(s), "")
}
