package bash

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// word is one shell word reduced to what the matchers need.
//
// text is the word after quote removal when the word is static. A dynamic word
// (an expansion, a substitution, a $'...' string, a glob or brace pattern) has
// no trustworthy text: the deny side treats it as a wildcard and the allow side
// refuses it.
type word struct {
	text string
	// dynamic: the value is decided when the shell runs, not by the text.
	dynamic bool
	// split: the word may expand to zero or several words (unquoted
	// expansion, glob or brace pattern).
	split bool
	// glob: the only dynamic part is an unquoted glob/brace/tilde pattern.
	// The allow side accepts such words as plain arguments of ordinary
	// programs, never in a position a prefix has to match.
	glob bool
	// execs: the word contains a command or process substitution, or an
	// arithmetic expansion.
	execs bool
}

// convertWord reduces a parsed word. It never fails: anything it does not
// understand makes the word dynamic, which is the conservative reading on both
// sides.
func convertWord(w *syntax.Word) word {
	if len(w.Parts) == 1 {
		// The common word: one literal without escapes or patterns, or one
		// plain single-quoted string. Its text is the parser's, as is.
		switch p := w.Parts[0].(type) {
		case *syntax.Lit:
			if !globChars.in(p.Value) {
				return word{text: p.Value}
			}
		case *syntax.SglQuoted:
			if !p.Dollar {
				return word{text: p.Value}
			}
		}
	}
	var wb wordBuilder
	for _, part := range w.Parts {
		wb.part(part)
	}
	out := wb.out
	out.text = wb.b.String()
	out.dynamic = wb.hasGlob || wb.other
	out.glob = wb.hasGlob && !wb.other
	return out
}

// wordBuilder joins a word's parts: the text, and what the parts make of
// it (a pattern, something known only at run time, a substitution).
type wordBuilder struct {
	b              strings.Builder
	out            word
	hasGlob, other bool
}

func (wb *wordBuilder) part(part syntax.WordPart) {
	switch p := part.(type) {
	case *syntax.Lit:
		text, glob := unescapeUnquoted(p.Value)
		wb.b.WriteString(text)
		if glob {
			wb.hasGlob = true
			wb.out.split = true
		}
	case *syntax.SglQuoted:
		// $'...' decodes escapes such as \x67; it is treated as
		// dynamic rather than re-implementing the decoder.
		wb.other = wb.other || p.Dollar
		wb.b.WriteString(p.Value)
	case *syntax.DblQuoted:
		wb.other = wb.other || p.Dollar // $"..." is locale-translated
		for _, dp := range p.Parts {
			wb.quoted(dp)
		}
	case *syntax.ParamExp:
		wb.other, wb.out.split = true, true
	case *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst:
		wb.other, wb.out.split, wb.out.execs = true, true, true
	default: // ExtGlob, BraceExp and anything newer
		wb.other, wb.out.split = true, true
	}
}

// quoted reads a part inside double quotes.
func (wb *wordBuilder) quoted(dp syntax.WordPart) {
	switch q := dp.(type) {
	case *syntax.Lit:
		wb.b.WriteString(unescapeDouble(q.Value))
	case *syntax.ParamExp:
		wb.other = true
		if q.Param != nil && (q.Param.Value == "@" || q.Param.Value == "*") || q.Index != nil || q.Names != 0 {
			wb.out.split = true // "$@", "${a[@]}"
		}
	case *syntax.CmdSubst, *syntax.ArithmExp:
		wb.other, wb.out.execs = true, true
	default:
		wb.other, wb.out.split = true, true
	}
}

// unescapeUnquoted removes backslash escapes from an unquoted literal and
// reports whether an unescaped glob, brace or tilde character remains.
func unescapeUnquoted(s string) (string, bool) {
	if !globChars.in(s) {
		return s, false
	}
	var b strings.Builder
	glob := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					b.WriteByte(s[i])
				}
			}
			continue
		case '*', '?', '[', ']', '{', '}':
			glob = true
		case '~':
			if i == 0 {
				glob = true
			}
		}
		b.WriteByte(c)
	}
	return b.String(), glob
}

// unescapeDouble applies the backslash rules of a double-quoted string.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				b.WriteByte(s[i+1])
				i++
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// literalText returns the static text of a word and whether it is static
// (no expansion of any kind, no unquoted glob).
func literalText(w *syntax.Word) (string, bool) {
	cw := convertWord(w)
	return cw.text, !cw.dynamic
}

// hdocText returns the body of a here-document or here-string when it is
// static text.
func hdocText(w *syntax.Word, quoted bool) (string, bool) {
	if w == nil {
		return "", false
	}
	if quoted {
		var b strings.Builder
		for _, part := range w.Parts {
			lit, ok := part.(*syntax.Lit)
			if !ok {
				return "", false
			}
			b.WriteString(lit.Value)
		}
		return b.String(), true
	}
	var b strings.Builder
	for _, part := range w.Parts {
		lit, ok := part.(*syntax.Lit)
		if !ok {
			return "", false
		}
		b.WriteString(unescapeDouble(lit.Value))
	}
	return b.String(), true
}

// basename strips a directory from a program name: /usr/bin/git -> git.
func basename(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 && i+1 < len(s) {
		return s[i+1:]
	}
	return s
}

// byteSet is a set of ASCII bytes, for the scans run on every word of a
// line (strings.ContainsAny builds its set on each call).
type byteSet [256]bool

func newByteSet(chars string) *byteSet {
	var s byteSet
	for i := 0; i < len(chars); i++ {
		s[chars[i]] = true
	}
	return &s
}

// in reports whether s contains a byte of the set.
func (set *byteSet) in(s string) bool {
	for i := 0; i < len(s); i++ {
		if set[s[i]] {
			return true
		}
	}
	return false
}

var (
	// globChars: an escape or a glob, brace or tilde character.
	globChars = newByteSet(`\*?[]{}~`)
	// codeChars start a substitution somewhere in quoted text.
	codeChars = newByteSet("$`<>")
	// shellChars make a program name something only a shell can run.
	shellChars = newByteSet(" \t\n;&|<>()$`")
)
