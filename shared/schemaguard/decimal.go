package schemaguard

import (
	"encoding/json"
	"strconv"
)

// maxDecimalDigits bounds the significant digits a decimal holds. Every
// number that reaches the fast path fits: input and schema numbers are at
// most MaxNumberBytes long, and a float64 prints in at most 17 digits.
const maxDecimalDigits = MaxNumberBytes

// decimal is the exact value of a JSON number literal, 0.d[0]d[1]... ×
// 10^dp, with no leading or trailing zero digits (zero has nd == 0). It is
// what the engine compares numbers by (a big.Rat of the literal), without
// the allocations: it lives on the stack.
type decimal struct {
	neg bool
	nd  int
	dp  int
	d   [maxDecimalDigits]byte
}

// parseDecimal reads a JSON number literal, or a float64 as strconv's 'g'
// format writes it. It reports false for anything else, or for more digits
// or a larger exponent than it holds; callers then leave the decision to
// the engine.
func parseDecimal[T string | []byte](s T) (x decimal, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		x.neg = true
		i++
	}
	if i, ok = mantissa(&x, s, i); !ok {
		return x, false
	}
	if i < len(s) {
		exp, ok := exponent(s, i)
		if !ok {
			return x, false
		}
		x.dp += exp
	}
	for x.nd > 0 && x.d[x.nd-1] == '0' {
		x.nd--
	}
	if x.nd == 0 {
		x.dp = 0
	}
	return x, true
}

// mantissa reads the digits and the point of s from i into x; it returns
// where they end, and false when there is no digit or more digits than x
// holds.
func mantissa[T string | []byte](x *decimal, s T, i int) (int, bool) {
	digits, dot := false, false
	for ; i < len(s); i++ {
		c := s[i]
		if c == '.' && !dot {
			dot = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		digits = true
		if c == '0' && x.nd == 0 {
			if dot {
				x.dp-- // a leading zero after the point: 0.05
			}
			continue
		}
		if x.nd == len(x.d) {
			return i, false
		}
		x.d[x.nd] = c
		x.nd++
		if !dot {
			x.dp++
		}
	}
	return i, digits
}

// exponent reads an exponent (e or E, a sign, digits) from s[i] to the end
// of s; false for anything else, or one past what a decimal holds.
func exponent[T string | []byte](s T, i int) (int, bool) {
	if s[i] != 'e' && s[i] != 'E' {
		return 0, false
	}
	i++
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i == len(s) {
		return 0, false
	}
	exp := 0
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		exp = exp*10 + int(c-'0')
		if exp > 100_000 {
			return 0, false
		}
	}
	if neg {
		exp = -exp
	}
	return exp, true
}

// numberOf returns the exact value the engine gives a number of the input:
// a json.Number as written, a float64 as its shortest decimal (the engine
// reads fmt.Sprint of it).
func numberOf(v any) (decimal, bool) {
	switch n := v.(type) {
	case json.Number:
		return parseDecimal(string(n))
	case float64:
		var buf [32]byte
		return parseDecimal(strconv.AppendFloat(buf[:0], n, 'g', -1, 64))
	}
	return decimal{}, false
}

func (x *decimal) sign() int {
	switch {
	case x.nd == 0:
		return 0
	case x.neg:
		return -1
	}
	return 1
}

// isInt says whether x has no fractional part, as big.Rat.IsInt would.
func (x *decimal) isInt() bool { return x.nd == 0 || x.dp >= x.nd }

// cmp compares x and y exactly: -1, 0 or +1.
func (x *decimal) cmp(y *decimal) int {
	sx, sy := x.sign(), y.sign()
	if sx != sy {
		if sx < sy {
			return -1
		}
		return 1
	}
	if sx == 0 {
		return 0
	}
	m := x.cmpAbs(y)
	if sx < 0 {
		return -m
	}
	return m
}

func (x *decimal) cmpAbs(y *decimal) int {
	if x.dp != y.dp {
		if x.dp < y.dp {
			return -1
		}
		return 1
	}
	for i := 0; i < x.nd && i < y.nd; i++ {
		if x.d[i] != y.d[i] {
			if x.d[i] < y.d[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case x.nd < y.nd:
		return -1
	case x.nd > y.nd:
		return 1
	}
	return 0
}
