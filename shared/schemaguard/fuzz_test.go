package schemaguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// FuzzCompile: arbitrary bytes never panic, and every failure is a
// *RejectError.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`,
		`{"$ref":"http://x"}`, `{"pattern":"(a+)+$"}`, `{"maximum":1e999999}`, `[`, `{"$dynamicRef":"#meta"}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","patternProperties":{"(":{}}}`,
	} {
		f.Add([]byte(s))
	}
	if raw, err := os.ReadFile("testdata/jira_create_issue.schema.json"); err == nil {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		s, err := Compile(schema)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || re.Reason == "" {
				t.Fatalf("Compile error %T %v is not a *RejectError with a reason", err, err)
			}
			return
		}
		d, err := Digest(schema)
		if err != nil || d != s.Digest() {
			t.Fatalf("Digest = %q, %v; compiled digest %q", d, err, s.Digest())
		}
		_ = s.Validate(map[string]any{})
	})
}

// FuzzValidate: a compiled schema and an arbitrary JSON input never panic,
// every failure is an *InvalidError with a reason, and the fast path never
// accepts what the engine rejects.
func FuzzValidate(f *testing.F) {
	jira, _ := os.ReadFile("testdata/jira_create_issue.schema.json")
	jiraIn, _ := os.ReadFile("testdata/jira_create_issue.input.json")
	f.Add(jira, jiraIn)
	f.Add([]byte(bashLike), []byte(`{"command":"ls","timeout":1e400}`))
	f.Add([]byte(`{"type":"integer","multipleOf":0.01}`), []byte(`1e300`))
	f.Add([]byte(`{"uniqueItems":true}`), []byte(`[1,1.0,{"a":[]},{"a":[]}]`))
	f.Add([]byte(`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"string"}]}},"$ref":"#/$defs/a"}`), []byte(`"x"`))
	f.Fuzz(func(t *testing.T, schema, input []byte) {
		s, err := Compile(schema)
		if err != nil {
			return
		}
		d := json.NewDecoder(bytes.NewReader(input))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		if checkInput(v) == "" && s.fastValid(v) {
			if err := s.validate(v); err != nil {
				t.Fatalf("fast path accepted %s against %s; the engine says %v", input, schema, err)
			}
		}
		if err := s.Validate(v); err != nil {
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Reason == "" || len(ie.Causes) == 0 {
				t.Fatalf("Validate error %T %v is not an *InvalidError with a reason", err, err)
			}
		}
	})
}
