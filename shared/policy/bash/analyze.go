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
//     (git -C dir push -> git push). A wrapper's options are read every way
//     getopt_long may read them (abbreviated long options, values inside
//     clusters). Words whose value is only known at run time match any
//     prefix word. When the analysis cannot see what would run (parse
//     failure, eval of an expansion, a shell reading its script from a pipe,
//     arithmetic on a variable, a variable name known only at run time, an
//     option whose value is a command) the line is opaque and matches every
//     loose prefix.
//
// The package never panics on any input; a failure inside the parser is
// reported as a parse error.
package bash

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

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
	runsWhy   string

	// What the line may write (see Writes), read from the normalizer's
	// findings on first need.
	redirected  []word
	configWrite string
	writesOnce  sync.Once
	writes      []Target
	unseen      string
	// Whether it only reads (see ReadOnly), judged once: the trust tier,
	// each policy and Writes all ask.
	readOnlyOnce sync.Once
	readOnly     bool
	readOnlyWhy  string
	// What it may read (see Reads).
	redirectedIn []word
	readsOnce    sync.Once
	reads        []Operand
}

// Parsed reports whether the command line parsed at all.
func (a *Analysis) Parsed() bool { return a.parseErr == nil }

// ParseError returns the parse failure, or nil.
func (a *Analysis) ParseError() error { return a.parseErr }

// Strict reports whether allow rules and grants may judge the command line:
// it parses, is not opaque, and is made only of simple commands joined by
// ';', '&&', '||' and pipes with nothing else in it. If not, it says why.
func (a *Analysis) Strict() (bool, string) {
	if a.parseErr != nil {
		return false, "does not parse: " + ParseReason(a.parseErr)
	}
	if a.opaqueWhy != "" {
		return false, a.opaqueWhy
	}
	if a.strictWhy != "" {
		return false, a.strictWhy
	}
	if a.runsWhy != "" {
		return false, a.runsWhy
	}
	return len(a.strict) > 0, "empty command"
}

// Parts returns the number of simple commands of a strict command line (0
// when it is not strict).
func (a *Analysis) Parts() int {
	if ok, _ := a.Strict(); !ok {
		return 0
	}
	return len(a.strict)
}

// PartAllowed reports whether simple command i of a strict line is covered
// by an allow prefix: it starts with the prefix's words and every word
// after them is read-only by the catalogue, or, with anyOptions, is
// anything but an option that changes what a project runner runs and a
// pattern that could expand to an option. When it is not, why says what
// did not match ("" when the prefix's words are not there at all).
func (a *Analysis) PartAllowed(i int, p *Prefix, anyOptions bool) (ok bool, why string) {
	if i < 0 || i >= a.Parts() {
		return false, ""
	}
	return a.strict[i].allowedBy(p, anyOptions)
}

// PartReadOnly reports whether simple command i is read-only by the
// catalogue, and if not, why.
func (a *Analysis) PartReadOnly(i int) (bool, string) {
	if i < 0 || i >= a.Parts() {
		return false, "not a strict command"
	}
	c := a.strict[i]
	if why := catalogueSafe(c.words, c.glob, 0); why != "" {
		return false, why
	}
	return true, ""
}

// ReadOnly reports whether every simple command of the line is read-only
// by the catalogue: it cannot write a file, run another program, reach the
// network or read beyond the paths its words name. If not, why names the
// part and what is not read-only.
func (a *Analysis) ReadOnly() (bool, string) {
	a.readOnlyOnce.Do(func() { a.readOnly, a.readOnlyWhy = a.computeReadOnly() })
	return a.readOnly, a.readOnlyWhy
}

func (a *Analysis) computeReadOnly() (bool, string) {
	if ok, why := a.Strict(); !ok {
		return false, why
	}
	for i := range a.strict {
		if ok, why := a.PartReadOnly(i); !ok {
			return false, a.PartName(i) + ": " + why
		}
	}
	return true, ""
}

// PartName names simple command i for a reason without quoting its
// arguments: "part 2 of 3 (`curl`)", or "`curl`" for a single command.
func (a *Analysis) PartName(i int) string {
	prog := "a command"
	if i >= 0 && i < len(a.strict) {
		w := a.strict[i].words
		prog = quoteWord(w[0])
		// git's subcommand is part of what the command is; it is one
		// of git's own names, never free text.
		if basename(w[0]) == "git" && len(w) > 1 && !a.strict[i].glob[1] && gitCommands[w[1]] {
			prog = "`git " + w[1] + "`"
		}
	}
	if len(a.strict) <= 1 {
		return prog
	}
	return fmt.Sprintf("part %d of %d (%s)", i+1, len(a.strict), prog)
}

// PartKeys returns the grant keys that could cover simple command i: the
// key text of each leading run of its literal words ("git", "git push",
// ...), up to the first pattern word.
func (a *Analysis) PartKeys(i int) []string {
	if i < 0 || i >= a.Parts() {
		return nil
	}
	c := a.strict[i]
	keys := make([]string, 0, len(c.words))
	for k := 1; k <= len(c.words) && !c.glob[k-1]; k++ {
		keys = append(keys, KeyText(c.words[:k]))
	}
	return keys
}

// Program returns the program of a line that is one simple command, as a
// grant key word: its base name when plain and short, else "".
func (a *Analysis) Program() string {
	if a.parseErr != nil || a.opaqueWhy != "" || len(a.loose) == 0 {
		return ""
	}
	first := a.loose[0].words[0]
	for _, c := range a.loose[1:] {
		if c.words[0].dynamic || c.words[0].text != first.text {
			return ""
		}
	}
	if first.dynamic || len(first.text) > 64 || !plainWord(first.text) {
		return ""
	}
	return first.text
}

// Opaque reports whether the analysis could not establish everything the
// command line may run, and why (naming the construct, never quoting
// arguments).
func (a *Analysis) Opaque() (bool, string) {
	if a.parseErr != nil {
		return true, "does not parse: " + ParseReason(a.parseErr)
	}
	return a.opaqueWhy != "", a.opaqueWhy
}

// LooseMatch reports whether any simple command the analysis found the
// line could run starts with p, reading dynamic words as wildcards. It does
// not consider opacity: the caller asks Opaque for that.
func (a *Analysis) LooseMatch(p *Prefix) bool {
	if p == nil || len(p.loose) == 0 {
		return false
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

// errParserFailure is the parse error of a line the parser crashed on; the
// panic's value is not kept, since it may quote the line.
var errParserFailure = errors.New("internal parser failure")

// ParseReason is a parse error as a reason may show it: the parser quotes
// the text it stopped at, so each quoted piece is kept only when it is
// shell punctuation (`|`, `${`) or a reserved word (`then`), else it
// becomes "a word". A reason then never carries the command's text.
func ParseReason(err error) string {
	if err == nil {
		return ""
	}
	text := err.Error()
	var b strings.Builder
	for {
		i := strings.IndexByte(text, '`')
		if i < 0 {
			break
		}
		j := strings.IndexByte(text[i+1:], '`')
		if j < 0 {
			break
		}
		b.WriteString(text[:i])
		piece := text[i+1 : i+1+j]
		if punctuation(piece) || reservedWords[piece] {
			b.WriteString("`" + piece + "`")
		} else {
			b.WriteString("a word")
		}
		text = text[i+2+j:]
	}
	if strings.IndexByte(text, '`') >= 0 {
		return b.String() + "the command cannot be parsed"
	}
	b.WriteString(text)
	return b.String()
}

var reservedWords = map[string]bool{
	"if": true, "then": true, "elif": true, "else": true, "fi": true, "for": true, "in": true,
	"do": true, "done": true, "while": true, "until": true, "case": true, "esac": true,
	"select": true, "function": true, "time": true, "coproc": true, "[[": true, "]]": true,
}

// punctuation: a short run of shell operator characters.
func punctuation(s string) bool {
	if s == "" || len(s) > 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte("|&;()<>{}[]$\"'!=+-*/%#^~:?,.@", s[i]) < 0 {
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
			a = &Analysis{parseErr: errParserFailure}
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
	a.loose, a.opaqueWhy, a.runsWhy = n.cmds, n.opaqueWhy, n.runsWhy
	a.redirected, a.configWrite, a.redirectedIn = n.redirected, n.configWrite, n.redirectedIn
	return a
}

func parse(s string) (*syntax.File, error) {
	if len(s) > MaxCommandBytes {
		return nil, fmt.Errorf("command longer than %d bytes", MaxCommandBytes)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errors.New("command contains a NUL byte")
	}
	p := parsers.Get().(*syntax.Parser)
	defer parsers.Put(p)
	return p.Parse(strings.NewReader(s), "")
}

// parsers are reused: a Parser is not safe for concurrent use, but may
// parse one input after another, and making one is a large part of the
// cost of a short line.
var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// Commands returns, for a strict line, its simple commands as allow rules
// read them (quote removal done, git's reducing global options dropped);
// nil when the line is not strict.
func (a *Analysis) Commands() [][]string {
	if ok, _ := a.Strict(); !ok {
		return nil
	}
	out := make([][]string, len(a.strict))
	for i, c := range a.strict {
		out[i] = append([]string(nil), c.words...)
	}
	return out
}

// DynamicWord stands, in Normalized, for a word known only at run time.
const DynamicWord = "<expansion>"

// Normalized returns every simple command the line could run as deny and
// require_approval rules see them: inside substitutions and re-read
// strings, wrappers stripped, programs reduced to their base names, git's
// own executables as git <sub>. A word known only at run time is
// DynamicWord.
func (a *Analysis) Normalized() [][]string {
	out := make([][]string, len(a.loose))
	for i, c := range a.loose {
		ws := make([]string, len(c.words))
		for j, w := range c.words {
			ws[j] = w.text
			if w.dynamic {
				ws[j] = DynamicWord
			}
		}
		out[i] = ws
	}
	return out
}
