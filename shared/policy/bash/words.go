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
	var b strings.Builder
	var out word
	hasGlob, other := false, false
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			text, glob := unescapeUnquoted(p.Value)
			b.WriteString(text)
			if glob {
				hasGlob = true
				out.split = true
			}
		case *syntax.SglQuoted:
			// $'...' decodes escapes such as \x67; it is treated as
			// dynamic rather than re-implementing the decoder.
			other = other || p.Dollar
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			other = other || p.Dollar // $"..." is locale-translated
			for _, dp := range p.Parts {
				switch q := dp.(type) {
				case *syntax.Lit:
					b.WriteString(unescapeDouble(q.Value))
				case *syntax.ParamExp:
					other = true
					if q.Param != nil && (q.Param.Value == "@" || q.Param.Value == "*") || q.Index != nil || q.Names != 0 {
						out.split = true // "$@", "${a[@]}"
					}
				case *syntax.CmdSubst, *syntax.ArithmExp:
					other, out.execs = true, true
				default:
					other, out.split = true, true
				}
			}
		case *syntax.ParamExp:
			other, out.split = true, true
		case *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst:
			other, out.split, out.execs = true, true, true
		default: // ExtGlob, BraceExp and anything newer
			other, out.split = true, true
		}
	}
	out.text = b.String()
	out.dynamic = hasGlob || other
	out.glob = hasGlob && !other
	return out
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
