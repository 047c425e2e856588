package policy

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Searches are narrowed, not refused. A Grep whose tree may hold a path a
// deny (or require_approval) rule matches, while the path it names is not
// itself such a path, is answered allow with the search narrowed: its glob
// field gets one exclusion per such rule's glob, and the tool runs with
// that input (Result.UpdatedInput), so it never opens what the rule
// matches and the agent still searches the rest. An exclusion covers at
// least what its glob matches: the glob's last relative segments at any
// depth ("**/secrets/**" for "/work/repo/secrets/**"), with every ASCII
// letter matched in either case, since the deny side reads paths
// case-insensitively. A glob no exclusion can express (no literal tail, a
// character class, a separator the tool would split on) is not narrowed:
// the rule then decides as before.

// exclusionTail returns, for a path glob, the relative glob every path it
// matches ends with, or "" when there is none.
func exclusionTail(g *pathGlob) string {
	tail := g.pattern
	if !g.isRelative() {
		if len(g.relative) == 0 {
			return ""
		}
		tail = g.relative[len(g.relative)-1]
	}
	tail = strings.TrimPrefix(tail, "./")
	for strings.HasPrefix(tail, "**/") {
		tail = tail[3:]
	}
	if tail == "" || tail == "**" {
		return ""
	}
	return tail
}

// foldGlob writes a glob so that it matches in any ASCII case (.env as
// .[eE][nN][vV]); ok is false for a glob this cannot be done for.
func foldGlob(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80, c == '[', c == ']', c == '\\', c == ' ', c == '\t', c == '\n', c == ',' && !strings.Contains(s, "{"):
			return "", false
		case c >= 'a' && c <= 'z':
			b.WriteString("[" + string(c) + string(c-32) + "]")
		case c >= 'A' && c <= 'Z':
			b.WriteString("[" + string(c+32) + string(c) + "]")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// grepExclusion is the Grep glob piece that excludes what g matches.
func grepExclusion(g *pathGlob) (string, bool) {
	tail := exclusionTail(g)
	if tail == "" {
		return "", false
	}
	folded, ok := foldGlob(tail)
	if !ok {
		return "", false
	}
	return "!**/" + folded, true
}

// narrowable reports whether rule r reaches the Grep call only through the
// tree it searches (never through the path it names, given or resolved),
// with a glob every reached part of which an exclusion can express.
func (c *call) narrowable(r *rule) bool {
	if c.tool != "Grep" || !r.hasPath || r.hasInput || len(r.paths) == 0 {
		return false
	}
	if _, ok := c.pathValues(); !ok {
		return false
	}
	if c.directHit(r) {
		return false // the named path itself
	}
	for _, g := range r.paths {
		if _, ok := grepExclusion(g); !ok {
			return false
		}
	}
	return true
}

// narrowGrep returns the Grep input with the rules' exclusions added to
// its glob field, and the reason part naming them.
func (c *call) narrowGrep(rules []*rule) (map[string]any, string) {
	m, _ := c.input.(map[string]any)
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	var pieces []string
	if g, ok := m["glob"].(string); ok && strings.TrimSpace(g) != "" {
		pieces = append(pieces, g)
	}
	var named []string
	seen := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.paths {
			ex, _ := grepExclusion(g)
			if !seen[ex] {
				seen[ex] = true
				pieces = append(pieces, ex)
			}
		}
		named = append(named, fmt.Sprintf("rule %q (%s)", r.id, strings.Join(r.globs(), ", ")))
	}
	out["glob"] = strings.Join(pieces, " ")
	return out, "narrowed: the searched tree may hold files matching " + strings.Join(named, " and ") + ", so the search excludes them"
}

// globs returns the rule's path globs as written.
func (r *rule) globs() []string {
	out := make([]string, len(r.paths))
	for i, g := range r.paths {
		out[i] = g.pattern
	}
	return out
}

// Input is a tool input as JSON text, so that decisions holding one stay
// comparable values; the zero Input is no input. It encodes as the object.
type Input struct{ text string }

// InputOf encodes an input; the zero Input for nil or one that cannot be
// encoded (which a decoded JSON object always can).
func InputOf(m map[string]any) Input {
	if m == nil {
		return Input{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return Input{}
	}
	return Input{text: string(b)}
}

// IsZero reports whether there is no input.
func (in Input) IsZero() bool { return in.text == "" }

// Value decodes the input (numbers as json.Number, as the gate reads one).
func (in Input) Value() (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(in.text))
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}

// MarshalJSON writes the input's object (null for none).
func (in Input) MarshalJSON() ([]byte, error) {
	if in.text == "" {
		return []byte("null"), nil
	}
	return []byte(in.text), nil
}
