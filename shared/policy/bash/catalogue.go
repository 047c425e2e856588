package bash

import (
	"fmt"
	"strings"
	"sync"
)

// The read-only catalogue: for each program agents use to look at a
// repository, the options that cannot write a file, run another program,
// reach the network or read anything but the paths the words name. It is
// data (catalogueSpecs below, one entry per program or git subcommand) read
// by one small option parser; catalogue_test.go holds a safe and an unsafe
// line for every entry. An option outside a program's entry is not safe,
// and neither is a program outside the catalogue.
//
// Option spelling in a spec:
//
//	-a         a short flag (clusters such as -la are split)
//	-n:        a short option taking a value, attached (-n5) or next word
//	-M?        a short option with an optional attached value only (-M, -M50%)
//	--all      a long flag
//	--lines=   a long option taking a value (--lines=5 or --lines 5)
//	--arg::    a long option taking the next two words
//	--color?   a long option with an optional =value only
//	-NUM       the program accepts -<digits> (head -5)
//
// Long options are matched exactly: GNU getopt and git accept unambiguous
// abbreviations (sort --out=x is --output=x), and an abbreviation is not in
// any entry, so it is refused.

// optKind is how an option takes its value.
type optKind uint8

const (
	optFlag     optKind = iota
	optValue            // attached or the next word
	optAttached         // optional, attached only
	optTwo              // two values, the next two words (jq --arg name value)
)

// entry is one catalogue entry.
type entry struct {
	name  string
	opts  map[string]optKind
	num   bool // -NUM
	ddash bool // "--" ends the options
	// maxPos bounds the positional words (-1: any). A glob word may expand
	// to several, so it counts as unbounded.
	maxPos int
	// check judges the parsed words (scripts, expressions, subcommand
	// forms); "" when safe.
	check func(p *parsed) string
	// subs are subcommands (git), chosen by the first positional word.
	subs map[string]*entry
	// literal: every word is printed, none is an option (echo).
	literal bool
	// custom replaces the option parser for programs whose words are
	// not options and operands (find's expression).
	custom func(words []string, glob []bool, trusted int) string
	// source names where the entry was checked.
	source string
}

// parsed is one command line read against an entry.
type parsed struct {
	words []string
	glob  []bool
	// opts lists each option given with its value ("" for a flag), in
	// order. A slice, not a map: lines are short and this is the hot path.
	opts []givenOpt
	// pos lists positional word indexes.
	pos []int
	// globPos: some positional word is a glob (count unknown).
	globPos bool
}

func (p *parsed) has(names ...string) bool {
	for _, o := range p.opts {
		for _, n := range names {
			if o.name == n {
				return true
			}
		}
	}
	return false
}

// values returns the values given for an option, in order.
func (p *parsed) values(name string) []string {
	var out []string
	for _, o := range p.opts {
		if o.name == name {
			out = append(out, o.value)
		}
	}
	return out
}

type givenOpt struct{ name, value string }

func (p *parsed) add(name, value string) { p.opts = append(p.opts, givenOpt{name, value}) }

func (p *parsed) posText(i int) string { return p.words[p.pos[i]] }

func parseSpec(spec string) (map[string]optKind, bool) {
	m := map[string]optKind{}
	num := false
	for _, f := range strings.Fields(spec) {
		switch {
		case f == "-NUM":
			num = true
		case strings.HasSuffix(f, "::"):
			m[f[:len(f)-2]] = optTwo
		case strings.HasSuffix(f, ":") || strings.HasSuffix(f, "="):
			m[f[:len(f)-1]] = optValue
		case strings.HasSuffix(f, "?"):
			m[f[:len(f)-1]] = optAttached
		default:
			m[f] = optFlag
		}
	}
	return m, num
}

func mk(name, spec string, maxPos int, source string) *entry {
	opts, num := parseSpec(spec)
	return &entry{name: name, opts: opts, num: num, ddash: true, maxPos: maxPos, source: source}
}

func (e *entry) with(check func(p *parsed) string) *entry {
	e.check = check
	return e
}

// optionLike reports whether a glob word could expand to a word that a
// program reads as an option: it starts with '-' or with a pattern
// character (so a file named "--prefix=sub" could be what it expands to).
func optionLike(w string) bool {
	return w == "" || strings.IndexByte("-*?[{~", w[0]) >= 0
}

// judge reads words[start:] against e and runs its check: "" when safe,
// else why not. The parse state is pooled: every part of every compound
// line is judged, and the state is dropped before judge returns.
func (e *entry) judge(words []string, glob []bool, start, trusted int) string {
	p := parsedPool.Get().(*parsed)
	p.words, p.glob = words, glob
	why := e.parseWords(p, start, trusted)
	if why == "" && e.check != nil {
		why = e.check(p)
	}
	*p = parsed{opts: p.opts[:0], pos: p.pos[:0]}
	parsedPool.Put(p)
	return why
}

// shortNames holds "-c" for every byte c, so that splitting a cluster of
// short options allocates nothing.
var shortNames = func() (t [256]string) {
	var b [2 * len(t)]byte
	for c := range t {
		b[2*c], b[2*c+1] = '-', byte(c)
	}
	all := string(b[:]) // one allocation, not one per name
	for c := range t {
		t[c] = all[2*c : 2*c+2]
	}
	return t
}()

func shortName(c byte) string { return shortNames[c] }

var parsedPool = sync.Pool{New: func() any { return &parsed{} }}

// parseWords reads p.words[start:] against e into p. words[:trusted] come
// from a rule's prefix: they are parsed but not judged. It returns "" when
// every judged word is safe, else a reason naming the first unsafe word.
func (e *entry) parseWords(p *parsed, start, trusted int) string {
	wp := wordParser{e: e, p: p, trusted: trusted}
	if e.literal {
		return wp.literal(start)
	}
	words := p.words
	opts := true
	for i := start; i < len(words); i++ {
		w := words[i]
		why := ""
		switch {
		case p.glob[i]:
			if opts && optionLike(w) {
				return wp.bad(i, "unquoted pattern %s could expand to an option", quotePattern(w))
			}
			p.pos = append(p.pos, i)
			p.globPos = true
		case !opts || w == "-" || !strings.HasPrefix(w, "-"):
			p.pos = append(p.pos, i)
		case w == "--" && e.ddash:
			opts = false
		case strings.HasPrefix(w, "--"):
			i, why = wp.long(i)
		case e.num && isDigits(w[1:]):
			p.add("-NUM", w[1:])
		default:
			i, why = wp.short(i)
		}
		if why != "" {
			return why
		}
	}
	if e.maxPos >= 0 && (len(p.pos) > e.maxPos || p.globPos) {
		return fmt.Sprintf("%s takes at most %d operands here (another would be written to)", e.name, e.maxPos)
	}
	return ""
}

// wordParser reads one command's words by its catalogue entry.
type wordParser struct {
	e       *entry
	p       *parsed
	trusted int
}

// bad is why word i is refused; errTrusted for a word of the trusted
// prefix.
func (wp *wordParser) bad(i int, format string, args ...any) string {
	if i < wp.trusted {
		return errTrusted
	}
	return fmt.Sprintf(format, args...)
}

// literal reads the words of a program whose words are all operands; an
// unquoted pattern could still expand to an option.
func (wp *wordParser) literal(start int) string {
	for i := start; i < len(wp.p.words); i++ {
		if wp.p.glob[i] && optionLike(wp.p.words[i]) {
			return wp.bad(i, "unquoted pattern %s could expand to an option", quotePattern(wp.p.words[i]))
		}
		wp.p.pos = append(wp.p.pos, i)
	}
	return ""
}

// long reads the long option at i (--name, --name=value, --name value,
// --name v1 v2) and returns the index of its last word, and why it is
// refused.
func (wp *wordParser) long(i int) (int, string) {
	words := wp.p.words
	name, val, hasVal := strings.Cut(words[i], "=")
	k, ok := wp.e.opts[name]
	switch {
	case !ok:
		return i, wp.bad(i, "option %s is not in the read-only catalogue for %s", quoteWord(name), wp.e.name)
	case k == optFlag && hasVal:
		return i, wp.bad(i, "option %s takes no value", quoteWord(name))
	case k == optValue && !hasVal:
		if i+1 >= len(words) {
			return i, wp.bad(i, "option %s needs a value", quoteWord(name))
		}
		i++
		val = words[i]
	case k == optTwo:
		if hasVal || i+2 >= len(words) {
			return i, wp.bad(i, "option %s needs two values", quoteWord(name))
		}
		i += 2
		val = words[i-1]
	}
	wp.p.add(name, val)
	return i, ""
}

// short reads the cluster of short options at i (-abc, -fVALUE, -f VALUE)
// and returns the index of its last word, and why it is refused.
func (wp *wordParser) short(i int) (int, string) {
	words := wp.p.words
	w := words[i]
	for j := 1; j < len(w); j++ {
		name := shortName(w[j])
		k, ok := wp.e.opts[name]
		if !ok {
			return i, wp.bad(i, "option %s is not in the read-only catalogue for %s", quoteWord(name), wp.e.name)
		}
		if k == optFlag {
			wp.p.add(name, "")
			continue
		}
		val := w[j+1:]
		if k == optValue && val == "" {
			if i+1 >= len(words) {
				return i, wp.bad(i, "option %s needs a value", quoteWord(name))
			}
			i++
			val = words[i]
		}
		wp.p.add(name, val)
		break
	}
	return i, ""
}

// errTrusted marks a prefix word the catalogue cannot read; the caller then
// accepts only the prefix itself.
const errTrusted = "\x00trusted"

// quoteWord shows a word in a reason: plain short words only, so that a
// reason never carries arbitrary input text.
func quoteWord(w string) string {
	if len(w) > 40 || !plainWord(w) {
		return "a word"
	}
	return "`" + w + "`"
}

// quotePattern shows an unquoted pattern word in a reason: short words of
// plain and pattern characters only, else "a pattern".
func quotePattern(w string) string {
	if w == "" || len(w) > 40 {
		return "a pattern"
	}
	for i := 0; i < len(w); i++ {
		if !plainWord(w[i:i+1]) && strings.IndexByte("*?[]{}~!^", w[i]) < 0 {
			return "a pattern"
		}
	}
	return "`" + w + "`"
}

// Safe reports whether words (one simple command, program first, quote
// removal done; glob marks unquoted pattern words) are read-only by the
// catalogue. words[:trusted] are a rule's prefix: judged only for context.
func catalogueSafe(words []string, glob []bool, trusted int) string {
	if len(words) == 0 {
		return "empty command"
	}
	if glob[0] {
		return "the program name is a pattern"
	}
	e := catalogue()[words[0]]
	if e == nil {
		return fmt.Sprintf("%s is not in the read-only catalogue", quoteWord(words[0]))
	}
	if e.custom != nil {
		return e.custom(words, glob, trusted)
	}
	if e.subs != nil {
		return subSafe(e, words, glob, 1, trusted)
	}
	return e.judge(words, glob, 1, trusted)
}

// subSafe judges a program with subcommands (git) from words[start]:
// global options, then the subcommand's entry.
func subSafe(e *entry, words []string, glob []bool, start, trusted int) string {
	i := start
	for ; i < len(words) && strings.HasPrefix(words[i], "-") && !glob[i]; i++ {
		if _, ok := e.opts[words[i]]; !ok {
			if i < trusted {
				return errTrusted
			}
			return fmt.Sprintf("%s option %s is not in the read-only catalogue", e.name, quoteWord(words[i]))
		}
	}
	if i >= len(words) {
		if i > start && words[i-1] == "--version" {
			return ""
		}
		return fmt.Sprintf("%s without a subcommand is not in the read-only catalogue", e.name)
	}
	if glob[i] {
		return fmt.Sprintf("%s subcommand is a pattern", e.name)
	}
	sub := e.subs[words[i]]
	if sub == nil {
		if i < trusted {
			return errTrusted
		}
		return fmt.Sprintf("%s %s is not in the read-only catalogue", e.name, quoteWord(words[i]))
	}
	if sub.subs != nil {
		return subSafe(sub, words, glob, i+1, trusted)
	}
	return sub.judge(words, glob, i+1, trusted)
}
