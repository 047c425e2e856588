package schemaguard

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlclark/regexp2"
)

//go:generate sh -c "node emoji.mjs > emoji_tables.go"

// A JSON Schema "pattern" is an ECMA-262 regular expression, unanchored,
// with the "u" flag (code points, \p{...}, \u{...}). Go's RE2 refuses
// lookaround and backreferences, which schema generators emit (zod's
// hostname, duration and emoji patterns use lookahead), so patterns run on
// regexp2 in ECMAScript mode. regexp2 backtracks, so every match runs under
// a deadline (see meter) and a pattern that takes longer fails the input;
// nothing else bounds a backtracking engine.

// patternClockPeriod is how often regexp2's clock ticks while a deadline is
// pending. A deadline is only noticed on a tick, and the default 100 ms
// would let one match overrun MaxPatternTime fivefold.
const patternClockPeriod = 5 * time.Millisecond

func init() {
	// Set before any match starts regexp2's clock goroutine, which reads it.
	regexp2.SetTimeoutCheckPeriod(patternClockPeriod)
}

// errPatternTimeout is a match that ran out of time.
var errPatternTimeout = errors.New("schemaguard: pattern match timed out")

// compileECMA compiles a pattern as ECMA-262 with the "u" flag. Its error
// text is a reason for a human.
func compileECMA(p string) (*regexp2.Regexp, error) {
	src, err := ecmaSource(p)
	if err != nil {
		return nil, err
	}
	re, err := regexp2.Compile(src, regexp2.ECMAScript|regexp2.Unicode)
	if err != nil {
		// regexp2's message quotes the pattern back, which is schema text,
		// not input: safe to show.
		return nil, fmt.Errorf("%q does not compile as an ECMA-262 regular expression: %v", truncate(p), err)
	}
	return re, nil
}

// matchECMA reports whether re finds a match in s within timeout. Any
// failure (timeout or other) is an error and never a match; the error never
// carries s (regexp2's own timeout error quotes the input).
func matchECMA(re *regexp2.Regexp, s string, timeout time.Duration) (bool, error) {
	if timeout <= 0 {
		return false, errPatternTimeout
	}
	re.MatchTimeout = timeout
	ok, err := re.MatchString(s)
	if err != nil {
		return false, errPatternTimeout
	}
	return ok, nil
}

// ecmaSource rewrites the emoji properties ECMAScript knows and regexp2
// does not (\p{Extended_Pictographic}, \p{Emoji_Component}, ...) into the
// code point ranges they name; every other character is kept as it is, so
// regexp2 judges the rest. A negated emoji property inside a character
// class cannot be written as ranges there and is refused.
func ecmaSource(p string) (string, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			if name, n, ok := emojiEscape(p[i:]); ok {
				ranges := emojiProperties[name]
				negated := p[i+1] == 'P'
				switch {
				case inClass && negated:
					return "", fmt.Errorf("%q negates \\p{%s} inside a character class, which is not supported", truncate(p), name)
				case inClass:
					writeRanges(&b, ranges)
				case negated:
					b.WriteString("[^")
					writeRanges(&b, ranges)
					b.WriteByte(']')
				default:
					b.WriteByte('[')
					writeRanges(&b, ranges)
					b.WriteByte(']')
				}
				i += n - 1
				continue
			}
			// Any other escape is copied whole, so an escaped bracket
			// does not open or close a class.
			b.WriteByte(c)
			b.WriteByte(p[i+1])
			i++
			continue
		case c == '[' && !inClass:
			inClass = true
		case c == ']' && inClass:
			inClass = false
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// emojiEscape recognises \p{Name} or \P{Name} of an emoji property at the
// start of s, returning the property and the escape's length.
func emojiEscape(s string) (string, int, bool) {
	if len(s) < 4 || (s[1] != 'p' && s[1] != 'P') || s[2] != '{' {
		return "", 0, false
	}
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return "", 0, false
	}
	name := s[3:end]
	if _, ok := emojiProperties[name]; !ok {
		return "", 0, false
	}
	return name, end + 1, true
}

func writeRanges(b *strings.Builder, ranges [][2]rune) {
	for _, r := range ranges {
		fmt.Fprintf(b, "\\u{%X}", r[0])
		if r[1] != r[0] {
			fmt.Fprintf(b, "-\\u{%X}", r[1])
		}
	}
}
