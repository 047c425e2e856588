package schemaguard

import (
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// maxCauses bounds how many causes a reason lists; the rest are counted.
const maxCauses = 10

// causes flattens a validation error into one line per failed leaf,
// "<path>: <what is wrong>", sorted and de-duplicated. err.Error() of the
// engine shows only the first leaf; a model fixing its call needs them all.
// doc is the validated document, used to tell array indexes from keys.
func causes(ve *jsonschema.ValidationError, doc any, root string) []string {
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)

	seen := map[string]bool{}
	var lines []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			lines = append(lines, s)
		}
	}
	for _, l := range leaves {
		path := renderPath(root, l.InstanceLocation, doc)
		switch keyword(l.KeywordLocation) {
		case "required":
			if names, ok := quotedNames(strings.TrimPrefix(l.Message, "missing properties: ")); ok {
				for _, n := range names {
					add(path + segment(n) + ": required property missing")
				}
				continue
			}
		case "additionalProperties":
			msg := strings.TrimSuffix(strings.TrimPrefix(l.Message, "additionalProperties "), " not allowed")
			if names, ok := quotedNames(msg); ok {
				for _, n := range names {
					add(path + segment(n) + ": property is not allowed")
				}
				continue
			}
		}
		msg := l.Message
		if msg == "" {
			msg = "is not valid"
		}
		add(path + ": " + msg)
	}
	sort.Strings(lines)
	if len(lines) > maxCauses {
		more := len(lines) - maxCauses
		lines = append(lines[:maxCauses:maxCauses], "and "+strconv.Itoa(more)+" more")
	}
	return lines
}

func joinCauses(lines []string) string {
	if len(lines) == 0 {
		return "is not valid"
	}
	return strings.Join(lines, "; ")
}

func keyword(loc string) string {
	if i := strings.LastIndexByte(loc, '/'); i >= 0 {
		return loc[i+1:]
	}
	return loc
}

// renderPath turns the engine's instance location (a JSON pointer with
// percent-escaped tokens) into input.a.b[0]["odd key"].
func renderPath(root, ptr string, doc any) string {
	var b strings.Builder
	b.WriteString(root)
	if ptr == "" || ptr == "/" {
		return b.String()
	}
	cur := doc
	for _, raw := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok := raw
		if u, err := url.PathUnescape(raw); err == nil {
			tok = u
		}
		tok = unescapeToken(tok)
		switch c := cur.(type) {
		case []any:
			b.WriteString("[" + tok + "]")
			i, err := strconv.Atoi(tok)
			if err == nil && i >= 0 && i < len(c) {
				cur = c[i]
			} else {
				cur = nil
			}
		case map[string]any:
			b.WriteString(segment(tok))
			cur = c[tok]
		default:
			b.WriteString(segment(tok))
			cur = nil
		}
	}
	return b.String()
}

// segment renders one property name: .name when it is identifier-like,
// otherwise ["quoted"].
func segment(name string) string {
	if name == "" {
		return `[""]`
	}
	for i, r := range name {
		ok := r == '_' || r == '-' && i > 0 || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9'
		if !ok {
			return "[" + strconv.Quote(name) + "]"
		}
	}
	return "." + name
}

// quotedNames parses the engine's list of single-quoted names,
// "'a', 'b\'c'", as produced by its quote function (Go %q with ' and "
// swapped in their escaping).
func quotedNames(s string) ([]string, bool) {
	var names []string
	for s != "" {
		if s[0] != '\'' {
			return nil, false
		}
		end := -1
		for i := 1; i < len(s); i++ {
			if s[i] == '\\' {
				i++
				continue
			}
			if s[i] == '\'' {
				end = i
				break
			}
		}
		if end < 0 {
			return nil, false
		}
		inner := s[1:end]
		inner = strings.ReplaceAll(inner, `\'`, `'`)
		inner = strings.ReplaceAll(inner, `"`, `\"`)
		name, err := strconv.Unquote(`"` + inner + `"`)
		if err != nil {
			return nil, false
		}
		names = append(names, name)
		s = strings.TrimPrefix(s[end+1:], ", ")
	}
	return names, len(names) > 0
}
