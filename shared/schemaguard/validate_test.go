package schemaguard

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func decode(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

const bashLike = `{"type":"object","properties":{
	"command":{"type":"string"},
	"timeout":{"type":"number","maximum":600000},
	"run_in_background":{"type":"boolean"},
	"env":{"type":"object","additionalProperties":{"type":"string"}},
	"args":{"type":"array","items":{"type":"string","maxLength":5}}},
	"required":["command"],"additionalProperties":false}`

func TestValidateReasons(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, bashLike)
	tests := []struct {
		name, input string
		want        []string
	}{
		{"missing and too large", `{"timeout":700000}`, []string{
			"input.command: required property missing",
			"input.timeout: must be <= 600000 but found 700000",
		}},
		{"unknown properties", `{"command":"ls","colour":1,"odd key":2}`, []string{
			"input.colour: property is not allowed",
			`input["odd key"]: property is not allowed`,
		}},
		{"nested wrong types", `{"command":1,"run_in_background":"yes","env":{"A":1,"B/C":true},"args":["ok","toolong"]}`, []string{
			"input.args[1]: length must be <= 5, but got 7",
			"input.command: expected string, but got number",
			"input.env.A: expected string, but got number",
			`input.env["B/C"]: expected string, but got boolean`,
			"input.run_in_background: expected boolean, but got string",
		}},
		{"not an object", `["ls"]`, []string{"input: expected object, but got array"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(decode(t, tt.input))
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Validate(%s) = %v, want *InvalidError", tt.input, err)
			}
			if diff := cmp.Diff(tt.want, ie.Causes); diff != "" {
				t.Errorf("Validate(%s) causes (-want +got):\n%s", tt.input, diff)
			}
			if want := strings.Join(tt.want, "; "); ie.Reason != want {
				t.Errorf("Validate(%s).Reason = %q, want %q", tt.input, ie.Reason, want)
			}
		})
	}
	if err := s.Validate(decode(t, `{"command":"git status","timeout":120000}`)); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
}

func TestValidateCapsCauses(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"additionalProperties":false}`)
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 25; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"p` + string(rune('a'+i)) + `":1`)
	}
	b.WriteString("}")
	var ie *InvalidError
	if err := s.Validate(decode(t, b.String())); !errors.As(err, &ie) {
		t.Fatalf("Validate = %v", err)
	}
	if len(ie.Causes) != maxCauses+1 || ie.Causes[maxCauses] != "and 15 more" {
		t.Errorf("Causes = %q, want %d causes and \"and 15 more\"", ie.Causes, maxCauses)
	}
}

func TestValidateBounds(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":["object","array","string","number","integer","boolean","null"],"items":{"type":"integer"}}`)
	deep := strings.Repeat("[", MaxInputDepth+1) + strings.Repeat("]", MaxInputDepth+1)
	many := "[" + strings.TrimSuffix(strings.Repeat("1,", MaxInputNodes), ",") + "]"
	tests := []struct {
		name   string
		input  any
		reason string
	}{
		{"too deep", decode(t, deep), "nests deeper than 16 levels"},
		{"too many nodes", decode(t, many), "more than 2000 values"},
		{"long string", strings.Repeat("x", MaxInputStringBytes+1), "over the 65536 limit"},
		{"long key", map[string]any{strings.Repeat("k", MaxInputStringBytes+1): true}, "property name is"},
		{"huge exponent", decode(t, `[1e10000000]`), "exponent beyond"},
		{"bogus json.Number", json.Number("0x10"), "not a JSON number"},
		{"NaN", math.NaN(), "not finite"},
		{"Go int", map[string]any{"n": 1}, "int is not a JSON value"},
		{"Go struct", struct{}{}, "is not a JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := s.Validate(tt.input)
			var ie *InvalidError
			if !errors.As(err, &ie) || !strings.Contains(ie.Reason, tt.reason) {
				t.Errorf("Validate(%.40v) = %v, want *InvalidError containing %q", tt.input, err, tt.reason)
			}
		})
	}
	okDeep := strings.Repeat("[", MaxInputDepth) + strings.Repeat("]", MaxInputDepth)
	if err := mustCompile(t, `{}`).Validate(decode(t, okDeep)); err != nil {
		t.Errorf("Validate(depth %d) = %v", MaxInputDepth, err)
	}
}

func TestValidateNilSchema(t *testing.T) {
	t.Parallel()
	var s *Schema
	if err := s.Validate(map[string]any{}); err == nil {
		t.Error("nil Schema accepted an input")
	}
	if err := (&Schema{}).Validate(map[string]any{}); err == nil {
		t.Error("zero Schema accepted an input")
	}
}

func TestValidateJiraCreateIssue(t *testing.T) {
	t.Parallel()
	schema, input := jiraFixture(t)
	s, err := Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(decode(t, string(input))); err != nil {
		t.Fatalf("Validate(realistic input) = %v", err)
	}
	bad := decode(t, string(input)).(map[string]any)
	fields := bad["additional_fields"].(map[string]any)
	fields["priority"] = map[string]any{"name": "Urgent"}
	fields["issuelinks"] = []any{map[string]any{"type": map[string]any{"name": "Blocks"}}}
	delete(bad, "summary")
	var ie *InvalidError
	if err := s.Validate(bad); !errors.As(err, &ie) {
		t.Fatalf("Validate(broken input) = %v", err)
	}
	for _, want := range []string{
		"input.summary: required property missing",
		"input.additional_fields.priority.name: value must be one of",
		"input.additional_fields.issuelinks[0].outwardIssue: required property missing",
	} {
		if !strings.Contains(ie.Reason, want) {
			t.Errorf("Reason = %q, want it to contain %q", ie.Reason, want)
		}
	}
}

func jiraFixture(t testing.TB) (schema, input []byte) {
	t.Helper()
	schema, err := os.ReadFile("testdata/jira_create_issue.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	input, err = os.ReadFile("testdata/jira_create_issue.input.json")
	if err != nil {
		t.Fatal(err)
	}
	return schema, input
}

func BenchmarkValidateJiraCreateIssue(b *testing.B) {
	schema, raw := jiraFixture(b)
	s, err := Compile(schema)
	if err != nil {
		b.Fatal(err)
	}
	input := decode(b, string(raw))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(input); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompileJiraCreateIssue(b *testing.B) {
	schema, _ := jiraFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(schema); err != nil {
			b.Fatal(err)
		}
	}
}
