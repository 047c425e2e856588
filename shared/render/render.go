// Package render shows a tool call to the human deciding it, safely: the
// CLI, Slack and (through a line-for-line mirror in the page's script,
// checked against the same corpus in testdata/) the approvals page all
// render a call with it.
//
// What it guarantees:
//   - Nothing in a rendering can hide, reorder or fake text. Every control
//     character (C0, DEL, C1), every format character (Unicode Cf: bidi
//     overrides and isolates, zero-width joiners and spaces, the BOM, tag
//     characters), every line or paragraph separator, every space other
//     than U+0020, and the invisible fillers and variation selectors are
//     shown as an escape (\n, \t, \r, \xHH, \u{HHHH}); a backslash is shown
//     as \\, so an escape in the input cannot pass for one made here. A run
//     of more than eight spaces is shown with its length, so padding cannot
//     push the end of a command out of sight.
//   - Nothing is cut silently: Clip says how many characters and lines it
//     hid, and every surface says how to see the rest.
//   - A Write shows the file it would create, an Edit the diff it would
//     make; every other tool shows each input field.
//   - The scope of each decision is said in words (Scope), from the
//     approval's parsed scope key, never from raw input text.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// spaceRun is the longest run of spaces shown as it is.
const spaceRun = 8

// Line escapes s for a single line: a newline shows as \n.
func Line(s string) string { return escape(s, false) }

// Block escapes s for a block of lines: newlines stay line breaks, but a
// run of more than two empty lines is shown as one marker line saying how
// many there were, so blank lines cannot push what follows out of view.
func Block(s string) string { return escape(s, true) }

func escape(s string, lines bool) string {
	var b strings.Builder
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == ' ':
			j := i
			for j < len(rs) && rs[j] == ' ' {
				j++
			}
			if n := j - i; n > spaceRun {
				fmt.Fprintf(&b, "\\u{20}×%d", n)
			} else {
				b.WriteString(strings.Repeat(" ", n))
			}
			i = j - 1
		case r == '\n' && lines:
			j := i
			for j < len(rs) && rs[j] == '\n' {
				j++
			}
			if n := j - i; n > 3 {
				fmt.Fprintf(&b, "\n[%d line breaks]\n", n)
			} else {
				b.WriteString(strings.Repeat("\n", n))
			}
			i = j - 1
		default:
			b.WriteString(Rune(r))
		}
	}
	return b.String()
}

// Rune is how one character is shown: itself, or its escape.
func Rune(r rune) string {
	switch r {
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\t':
		return `\t`
	case '\r':
		return `\r`
	}
	switch {
	case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		return fmt.Sprintf(`\x%02X`, r)
	case hidden(r):
		return fmt.Sprintf(`\u{%04X}`, r)
	}
	return string(r)
}

// hidden reports whether r is a printable-looking character a reader
// cannot see or that changes how the text around it reads.
func hidden(r rune) bool {
	switch {
	case r == utf8.RuneError:
		return false // shown as itself, �: the input was not valid text there
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return true
	case unicode.Is(unicode.Zs, r) && r != ' ':
		return true
	case unicode.Is(unicode.Co, r):
		return true
	}
	return slices.ContainsFunc(invisible, func(rg [2]rune) bool { return r >= rg[0] && r <= rg[1] })
}

// invisible lists characters outside Cf that render as nothing: the
// combining grapheme joiner, Hangul and Khmer fillers, Mongolian and
// Unicode variation selectors, the Braille blank.
var invisible = [][2]rune{
	{0x034F, 0x034F}, {0x115F, 0x1160}, {0x17B4, 0x17B5}, {0x180B, 0x180F},
	{0x2800, 0x2800}, {0x3164, 0x3164}, {0xFE00, 0xFE0F}, {0xFFA0, 0xFFA0},
	{0xE0100, 0xE01EF},
}

// Clipped is a rendering cut to a size.
type Clipped struct {
	// Text is the shown part of the rendering.
	Text string `json:"text"`
	// HiddenChars is how many characters of the rendering were not shown;
	// HiddenLines how many line breaks fell in the hidden part.
	HiddenChars int `json:"hidden_chars"`
	HiddenLines int `json:"hidden_lines"`
	// TotalChars is the whole rendering's length.
	TotalChars int `json:"total_chars"`
}

// Cut reports whether anything was hidden.
func (c Clipped) Cut() bool { return c.HiddenChars > 0 }

// Notice says what was hidden, "" when nothing was; how to see the rest is
// the caller's to add, as it depends on where the text is shown.
func (c Clipped) Notice() string {
	if !c.Cut() {
		return ""
	}
	s := fmt.Sprintf("%d more characters hidden", c.HiddenChars)
	if c.HiddenLines > 0 {
		s += fmt.Sprintf(" (%d more lines)", c.HiddenLines)
	}
	return s + fmt.Sprintf(", %d in all", c.TotalChars)
}

// Clip cuts a rendering (of Line or Block) to at most maxChars characters
// and maxLines lines. It never cuts inside an escape, so what it shows
// still reads as what the input holds.
func Clip(rendered string, maxChars, maxLines int) Clipped {
	toks := tokens(rendered)
	c := Clipped{}
	for _, t := range toks {
		c.TotalChars += utf8.RuneCountInString(t)
	}
	var text strings.Builder
	width, breaks, i := 0, 0, 0
	for ; i < len(toks); i++ {
		n := utf8.RuneCountInString(toks[i])
		nl := 0
		if toks[i] == "\n" {
			nl = 1
		}
		if width+n > maxChars || breaks+nl >= maxLines {
			break
		}
		text.WriteString(toks[i])
		width += n
		breaks += nl
	}
	c.Text = text.String()
	c.HiddenChars = c.TotalChars - width
	for _, t := range toks[i:] {
		if t == "\n" {
			c.HiddenLines++
		}
	}
	return c
}

// tokens splits a rendering into what must not be split: each escape
// (with its ×N count), each line break, each other character.
func tokens(s string) []string {
	var out []string
	for len(s) > 0 {
		n := 1
		if s[0] == '\\' && len(s) > 1 {
			switch s[1] {
			case 'x':
				n = min(4, len(s))
			case 'u':
				if j := strings.IndexByte(s, '}'); j > 0 {
					n = j + 1
					if rest := s[n:]; strings.HasPrefix(rest, "×") {
						k := len("×")
						for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' {
							k++
						}
						n += k
					}
				}
			default:
				n = 2
			}
		} else {
			_, n = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// Section is one part of a call's rendering.
type Section struct {
	// Label names the part: an input field, "file", "diff".
	Label string `json:"label"`
	// Kind is how to show Text: "line" (one line), "block" (lines, kept),
	// "file" (a file's content), "diff" (lines marked "-" and "+").
	Kind string `json:"kind"`
	// Text is already escaped.
	Text string `json:"text"`
}

// View is a call as the human deciding it sees it.
type View struct {
	// Summary is one escaped line: the command, "write PATH (...)", or the
	// compact input.
	Summary  string    `json:"summary"`
	Sections []Section `json:"sections"`
}

// Call renders a tool call's input.
func Call(tool string, input []byte) View {
	obj, ok := object(input)
	if !ok {
		t := Block(string(input))
		return View{Summary: Line(string(input)), Sections: []Section{{Label: "input (not a JSON object)", Kind: "block", Text: t}}}
	}
	str := func(k string) (string, bool) {
		v, ok := obj[k]
		if !ok {
			return "", false
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return s, true
	}
	var v View
	used := map[string]bool{}
	switch tool {
	case "Bash":
		if cmd, ok := str("command"); ok {
			used["command"] = true
			v.Summary = Line(cmd)
			v.Sections = append(v.Sections, Section{Label: "command", Kind: "block", Text: Block(cmd)})
		}
	case "Write":
		path, okp := str("file_path")
		content, okc := str("content")
		if okp && okc {
			used["file_path"], used["content"] = true, true
			v.Summary = fmt.Sprintf("write %s (%s)", Line(path), size(content))
			v.Sections = append(v.Sections,
				Section{Label: "file_path", Kind: "line", Text: Line(path)},
				Section{Label: "file (" + size(content) + ")", Kind: "file", Text: Block(content)})
		}
	case "Edit":
		path, okp := str("file_path")
		oldS, oko := str("old_string")
		newS, okn := str("new_string")
		if okp && oko && okn {
			used["file_path"], used["old_string"], used["new_string"] = true, true, true
			d, minus, plus := Diff(oldS, newS)
			v.Summary = fmt.Sprintf("edit %s (-%d +%d lines)", Line(path), minus, plus)
			v.Sections = append(v.Sections,
				Section{Label: "file_path", Kind: "line", Text: Line(path)},
				Section{Label: "diff", Kind: "diff", Text: d})
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		if !used[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		var s string
		if json.Unmarshal(obj[k], &s) == nil {
			v.Sections = append(v.Sections, Section{Label: Line(k), Kind: "block", Text: Block(s)})
		} else {
			v.Sections = append(v.Sections, Section{Label: Line(k), Kind: "line", Text: Value(obj[k])})
		}
	}
	if v.Summary == "" {
		v.Summary = Value(input)
	}
	return v
}

// object decodes a JSON object's fields, keeping the values raw.
func object(input []byte) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(input, &obj) != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

// Value renders any JSON value on one line: objects with their keys
// sorted, strings quoted and escaped, numbers as written.
func Value(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return Line(string(raw))
	}
	var b strings.Builder
	value(&b, v)
	return b.String()
}

func value(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		b.WriteString(Line(x.String()))
	case string:
		b.WriteString(quote(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			value(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quote(k))
			b.WriteByte(':')
			value(b, x[k])
		}
		b.WriteByte('}')
	}
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(Line(s), `"`, `\"`) + `"`
}

// size says how big a file's content is: lines and bytes.
func size(content string) string {
	n := strings.Count(content, "\n")
	if content != "" && !strings.HasSuffix(content, "\n") {
		n++
	}
	return fmt.Sprintf("%d lines, %d bytes", n, len(content))
}

// Diff shows the change from old to new as lines: the lines both share at
// the start and the end are shown once (" "), the rest as removed ("-")
// then added ("+"). It returns the escaped diff and how many lines it
// removes and adds.
func Diff(oldS, newS string) (string, int, int) {
	a, b := splitLines(oldS), splitLines(newS)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []string
	for _, l := range a[:pre] {
		out = append(out, "  "+Line(l))
	}
	for _, l := range a[pre : len(a)-suf] {
		out = append(out, "- "+Line(l))
	}
	for _, l := range b[pre : len(b)-suf] {
		out = append(out, "+ "+Line(l))
	}
	for _, l := range a[len(a)-suf:] {
		out = append(out, "  "+Line(l))
	}
	return strings.Join(out, "\n"), len(a) - pre - suf, len(b) - pre - suf
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Scopes says in words what each decision on a call allows.
type Scopes struct {
	Once    string `json:"once"`
	Run     string `json:"run"`
	Deny    string `json:"deny"`
	RunOK   bool   `json:"run_ok"`
	Default string `json:"default"`
}

// Scope describes the decisions on a call in run runID. scopeKey is the
// approval's scope key (for Bash "Bash:<program> <prefix words>", else the
// tool name; "" when no session grant can cover the call); defaultScope is
// the rule's default ("once" or "session").
func Scope(scopeKey, runID, defaultScope string) Scopes {
	s := Scopes{
		Once:    "allows this one call only; the next one asks again",
		Deny:    "refuses this call; the agent is told it was denied, with your reason",
		Default: "once",
	}
	if defaultScope == "session" {
		s.Default = "run"
	}
	run := Line(runID)
	switch {
	case scopeKey == "":
		s.Run = "not available: no scope a grant could cover was parsed from this call"
	case strings.HasPrefix(scopeKey, "Bash:"):
		s.RunOK = true
		s.Run = fmt.Sprintf("allows every `%s ...` command for the rest of this run (%s)", Line(strings.TrimPrefix(scopeKey, "Bash:")), run)
	default:
		s.RunOK = true
		s.Run = fmt.Sprintf("allows every %s call for the rest of this run (%s)", Line(scopeKey), run)
	}
	return s
}
