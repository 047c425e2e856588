package policy

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// pointer is a compiled RFC 6901 JSON pointer.
type pointer []string

func parsePointer(s string) (pointer, error) {
	if s == "" {
		return pointer{}, nil
	}
	if s[0] != '/' {
		return nil, errors.New(`JSON pointer must be empty or start with "/"`)
	}
	parts := strings.Split(s[1:], "/")
	for i, p := range parts {
		if !strings.Contains(p, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			if p[j] != '~' {
				b.WriteByte(p[j])
				continue
			}
			if j+1 >= len(p) || (p[j+1] != '0' && p[j+1] != '1') {
				return nil, errors.New(`JSON pointer has "~" not followed by 0 or 1`)
			}
			if p[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		parts[i] = b.String()
	}
	return pointer(parts), nil
}

// resolve walks decoded JSON. Anything that is not there, or not decoded
// JSON, is "missing".
func (p pointer) resolve(v any) (any, bool) {
	for _, tok := range p {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, ok := arrayIndex(tok, len(x))
			if !ok {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func arrayIndex(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i >= n {
		return 0, false
	}
	return i, true
}

// scalarText is the text an input glob is matched against: a string as is,
// a number as written, a boolean as true/false. Null, objects and arrays
// have no text and never match.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	default:
		return "", false
	}
}
