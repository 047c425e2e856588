package schemaguard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompileRejects(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"not":`, MaxSchemaDepth) + `{}` + strings.Repeat(`}`, MaxSchemaDepth)
	// A DAG of $refs that doubles at each level: 2^20 subschemas from ~1 KiB.
	var laughs strings.Builder
	laughs.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&laughs, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	laughs.WriteString(`"d20":{"type":"string"}}}`)

	tests := []struct {
		name, schema, reason string
	}{
		{"too large", `{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`, "over the 65536 limit"},
		{"too deep", deep, "deeper than 32 levels"},
		{"not json", `{"type":`, "not valid JSON"},
		{"trailing data", `{} {}`, "not valid JSON"},
		{"invalid utf8", "{\"description\":\"\xff\"}", "not valid UTF-8"},
		{"duplicate key", `{"type":"object","type":"string"}`, `duplicate object key "type"`},
		{"array", `[]`, "must be a JSON object, not an array"},
		{"boolean", `true`, "must be a JSON object, not a boolean"},
		{"remote ref", `{"$ref":"http://x"}`, `$ref "http://x" is not local`},
		{"file ref", `{"properties":{"a":{"$ref":"file:///etc/passwd"}}}`, `$ref "file:///etc/passwd" is not local`},
		{"relative ref", `{"$ref":"other.json#/a"}`, "is not local"},
		{"non-string ref", `{"$ref":1}`, "$ref must be a string"},
		{"remote dynamicRef", `{"$dynamicRef":"https://x/s#meta"}`, `$dynamicRef "https://x/s#meta" is not local`},
		{"recursiveRef not #", `{"$recursiveRef":"#/a"}`, `must be "#"`},
		{"dangling pointer", `{"$ref":"#/$defs/missing"}`, "does not point at a subschema"},
		{"pointer into data", `{"default":{"x":{}},"$ref":"#/default/x"}`, "does not point at a subschema"},
		{"unknown anchor", `{"$ref":"#nope"}`, "anchor this schema does not define"},
		{"remote $schema", `{"$schema":"https://evil.example/meta"}`, "is not a built-in draft"},
		{"file $schema", `{"$schema":"file:///etc/passwd"}`, "is not a built-in draft"},
		{"nested $id", `{"properties":{"a":{"$id":"https://evil.example/a","type":"string"}}}`, "nested $id"},
		{"nested draft4 id", `{"properties":{"a":{"id":"http://x/a"}}}`, "nested id"},
		{"long pattern", `{"pattern":"` + strings.Repeat("a", MaxKeywordBytes+1) + `"}`, "over the 1024 limit"},
		{"pattern not ECMA-262", `{"pattern":"(?<!"}`, "does not compile as an ECMA-262"},
		{"negated emoji property in a class", `{"pattern":"[\\P{Emoji}]"}`, "inside a character class"},
		{"lookahead patternProperties key", `{"patternProperties":{"(?=a)":{}}}`, "does not compile as an RE2"},
		{"reserved keyword", `{"properties":{"a":{"$fluidbox-ecma-pattern":"x"}}}`, "is reserved"},
		{"fan-out", `{"anyOf":[` + strings.TrimSuffix(strings.Repeat(`{},`, MaxFanOut+1), ",") + `]}`, "direct subschemas and references, over the 256 limit"},
		{"bad patternProperties key", `{"patternProperties":{"(":{}}}`, "patternProperties key"},
		{"long format", `{"format":"` + strings.Repeat("f", MaxKeywordBytes+1) + `"}`, "format is 1025 bytes"},
		{"huge exponent in schema", `{"maximum":1e999999}`, "exponent beyond"},
		{"huge exponent in data", `{"const":1e-5000}`, "exponent beyond"},
		{"long number", `{"minimum":` + strings.Repeat("1", MaxNumberBytes+1) + `}`, "longer than 64"},
		{"float overflow", `{"minimum":1e309}`, "out of range"},
		{"billion laughs", laughs.String(), "expands through $ref"},
		{"not a schema", `{"properties":{"a":3}}`, "schema.properties.a: expected object or boolean"},
		{"metaschema violation", `{"type":"strin"}`, "does not compile"},
		{"negative minLength", `{"minLength":-1}`, "does not compile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Compile([]byte(tt.schema))
			var re *RejectError
			if !errors.As(err, &re) {
				t.Fatalf("Compile(%.60q) = %v, %v; want *RejectError", tt.schema, s, err)
			}
			if !strings.Contains(re.Reason, tt.reason) {
				t.Errorf("Compile(%.60q) reason = %q, want it to contain %q", tt.schema, re.Reason, tt.reason)
			}
		})
	}
}

func TestCompileAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, schema string }{
		{"empty object", `{}`},
		{"mcp object", `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`},
		{"draft-07 with definitions", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/definitions/a"}}}`},
		{"2020-12 defs and anchor", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"a":{"$anchor":"A","type":"integer"}},"properties":{"x":{"$ref":"#A"},"y":{"$ref":"#/$defs/a"}}}`},
		{"draft-07 plain-name $id", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"$id":"#A","type":"integer"}},"properties":{"x":{"$ref":"#A"}}}`},
		{"recursive tree", `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`},
		{"escaped pointer", `{"$defs":{"a/b~c":{"type":"string"},"d e":{"type":"number"}},"properties":{"x":{"$ref":"#/$defs/a~1b~0c"},"y":{"$ref":"#/$defs/d%20e"}}}`},
		{"root $id", `{"$id":"https://example.com/tool.json","$defs":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`},
		{"property named id and $ref", `{"properties":{"id":{"type":"string"},"$ref":{"type":"string"}}}`},
		{"data holding a remote $ref", `{"default":{"$ref":"http://not-a-ref"},"examples":[{"$id":"x"}]}`},
		{"unknown format", `{"properties":{"x":{"type":"string","format":"jira-key"}}}`},
		{"boolean subschemas", `{"properties":{"a":true,"b":false},"additionalProperties":false}`},
		{"patternProperties", `{"patternProperties":{"^x-[a-z]+$":{"type":"string"}}}`},
		{"draft-04", `{"$schema":"http://json-schema.org/draft-04/schema#","id":"urn:tool","properties":{"n":{"type":"integer","minimum":0,"exclusiveMinimum":true}}}`},
		{"max depth", strings.Repeat(`{"not":`, MaxSchemaDepth-1) + `{}` + strings.Repeat(`}`, MaxSchemaDepth-1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Compile([]byte(tt.schema))
			if err != nil {
				t.Fatalf("Compile(%q) = %v", tt.schema, err)
			}
			d, err := Digest([]byte(tt.schema))
			if err != nil || s.Digest() != d {
				t.Errorf("Compile(%q).Digest() = %q, Digest() = %q, %v", tt.schema, s.Digest(), d, err)
			}
		})
	}
}

func TestUnknownFormatNotAsserted(t *testing.T) {
	t.Parallel()
	for _, draft := range []string{"http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"} {
		s, err := Compile([]byte(`{"$schema":"` + draft + `","properties":{"k":{"type":"string","format":"jira-key"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(decode(t, `{"k":"anything at all"}`)); err != nil {
			t.Errorf("%s: unknown format asserted: %v", draft, err)
		}
	}
}

// TestCompilerLoadsNothing checks the engine's loader, behind the pre-guard:
// a schema file on disk must not be read even if a reference to it reached
// the compiler.
func TestCompilerLoadsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "s.json")
	if err := os.WriteFile(path, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{
		`{"$ref":"file://` + path + `"}`,
		`{"$schema":"file://` + path + `"}`,
		`{"$ref":"https://json-schema.org/not-built-in"}`,
	} {
		_, err := compileEngine([]byte(schema))
		var re *RejectError
		if !errors.As(err, &re) {
			t.Errorf("compileEngine(%q) = %v, want *RejectError", schema, err)
		}
	}
}

func TestDigest(t *testing.T) {
	t.Parallel()
	a, err := Digest([]byte(`{"b":[1, 2.50, {"y":true,"x":null}], "a":"<&>\u00e9"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Digest([]byte("{\n  \"a\": \"<&>é\",\n  \"b\": [1,2.50,{\"x\":null,\"y\":true}]\n}"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("Digest differs for key order/whitespace: %s vs %s", a, b)
	}
	if !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Errorf("Digest = %q, want sha256:<64 hex>", a)
	}
	canon, err := Canonical([]byte(`{"b":[1, 2.50], "a":"<&>"}`))
	if want := `{"a":"<&>","b":[1,2.50]}`; err != nil || string(canon) != want {
		t.Errorf("Canonical = %s, %v; want %s", canon, err, want)
	}
	c, _ := Digest([]byte(`{"a":"<&>é","b":[1,2.5,{"x":null,"y":true}]}`))
	if c == a {
		t.Errorf("Digest does not keep numbers as written: 2.5 and 2.50 collide")
	}
	for _, bad := range []string{``, `{`, `{"a":1,"a":2}`, "\"\xff\"", `1 2`} {
		if d, err := Digest([]byte(bad)); err == nil {
			t.Errorf("Digest(%q) = %q, want error", bad, d)
		}
	}
}
