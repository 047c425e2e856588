package schemaguard

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestZodFormats: the schema zod 4 generates for z.hostname(),
// z.iso.duration() and z.emoji() (lookahead, \p{Extended_Pictographic})
// compiles, and each pattern answers as ECMAScript's own RegExp does
// (testdata/zod_formats.mjs wrote both files with Node).
func TestZodFormats(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/zod_formats.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Compile(raw)
	if err != nil {
		t.Fatalf("Compile(zod schema) = %v, want it callable", err)
	}
	var answers map[string][]struct {
		Value string `json:"value"`
		Match bool   `json:"match"`
	}
	b, err := os.ReadFile("testdata/zod_formats.answers.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &answers); err != nil {
		t.Fatal(err)
	}
	valid := map[string]any{"host": "example.com", "wait": "P1D", "mood": "😀"}
	if err := s.Validate(valid); err != nil {
		t.Fatalf("Validate(%v) = %v", valid, err)
	}
	for field, cases := range answers {
		for _, c := range cases {
			input := map[string]any{}
			for k, v := range valid {
				input[k] = v
			}
			input[field] = c.Value
			err := s.Validate(input)
			var ie *InvalidError
			switch {
			case c.Match && err != nil:
				t.Errorf("%s %q: Validate = %v, want valid (ECMAScript matches)", field, c.Value, err)
			case !c.Match && (!errors.As(err, &ie) || !strings.Contains(ie.Reason, "input."+field+": does not match pattern")):
				t.Errorf("%s %q: Validate = %v, want a pattern failure on input.%s", field, c.Value, err, field)
			}
		}
	}
}

// TestECMASemantics: where ECMA-262 and RE2 disagree, patterns answer as
// ECMA-262 with the "u" flag.
func TestECMASemantics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, value string
		match          bool
	}{
		{`^[a-z]+$`, "abc\n", false}, // $ is the end of input, not before a final newline
		{`^\d+$`, "١٢", false},       // \d is ASCII
		{`^\w+$`, "é", false},        // \w is ASCII
		{`^.$`, "😀", true},           // . is one code point
		{`^.$`, "\r", false},         // . excludes line terminators
		{`^\s$`, "\u00a0", true},     // \s includes Unicode spaces
		{`^(?=.*\d)(?!.*x).+$`, "a1", true},
		{`^(?=.*\d)(?!.*x).+$`, "a1x", false},
		{`^(a)\1$`, "aa", true},        // backreference
		{`(?<=@)\w+`, "me@host", true}, // lookbehind
		{`^(?<y>\d{4})-\k<y>$`, "2024-2024", true},
		{`^\u{1F600}$`, "😀", true},
		{`^\p{Lu}$`, "É", true},
		{`^[\p{Emoji_Presentation}]$`, "😀", true},
		{`^\P{Extended_Pictographic}$`, "😀", false},
		{`b`, "abc", true}, // unanchored, as JSON Schema says
	}
	for _, tt := range tests {
		s, err := Compile([]byte(`{"type":"string","pattern":` + jsonString(tt.pattern) + `}`))
		if err != nil {
			t.Errorf("Compile(%q) = %v", tt.pattern, err)
			continue
		}
		if err := s.Validate(tt.value); (err == nil) != tt.match {
			t.Errorf("%q on %q: Validate = %v, want match %t", tt.pattern, tt.value, err, tt.match)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzPattern: compiling any pattern and matching it on any input returns,
// and within the pattern time bound (plus a tick of regexp2's clock); a
// timed-out match is a work-budget failure,
// never a match, and its error does not quote the input.
func FuzzPattern(f *testing.F) {
	for _, seed := range [][2]string{
		{`^(a|aa)+$`, strings.Repeat("a", 40) + "!"},
		{`^(?=.{1,253}\.?$)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[-0-9a-zA-Z]{0,61}[0-9a-zA-Z])?)*\.?$`, "a.b"},
		{`(x+x+)+y`, strings.Repeat("x", 30)},
		{`^(\w+\s?)*$`, strings.Repeat("word ", 20) + "!"},
		{`[\p{Extended_Pictographic}\p{Emoji_Component}]+`, "😀"},
		{`(?<!a)b\k<n>(?<n>c)`, "bc"},
		{`((((((((((a*)*)*)*)*)*)*)*)*)*)*b`, strings.Repeat("a", 25)},
		{`a{1000000}`, "a"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, value string) {
		if len(pattern) > MaxKeywordBytes || len(value) > MaxInputStringBytes {
			return
		}
		start := time.Now()
		re, err := compileECMA(pattern)
		if took := time.Since(start); took > time.Second {
			t.Fatalf("compiling %q took %v", pattern, took)
		}
		if err != nil {
			return
		}
		start = time.Now()
		_, err = matchECMA(re, value, MaxPatternTime)
		if took := time.Since(start); took > MaxPatternTime+time.Second {
			t.Fatalf("matching %q took %v, over the bound", pattern, took)
		}
		if err != nil && (!errors.Is(err, errPatternTimeout) || (value != "" && strings.Contains(err.Error(), value))) {
			t.Fatalf("match error %v, want errPatternTimeout without the input", err)
		}
	})
}
