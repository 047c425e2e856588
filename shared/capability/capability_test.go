package capability

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const objSchema = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`

func tool(name string, class Class, schema string) Tool {
	return Tool{Name: name, Class: class, InputSchema: json.RawMessage(schema)}
}

func TestClassValid(t *testing.T) {
	t.Parallel()
	for _, c := range []Class{ClassRead, ClassWrite, ClassExecute, ClassEgress} {
		if !c.Valid() {
			t.Errorf("Class(%q).Valid() = false", c)
		}
	}
	for _, c := range []Class{"", "READ", "admin", "read "} {
		if c.Valid() {
			t.Errorf("Class(%q).Valid() = true", c)
		}
	}
}

func TestNewBundleErrors(t *testing.T) {
	t.Parallel()
	ok := tool("search", ClassRead, objSchema)
	tests := []struct {
		name     string
		id, bn   string
		tools    []Tool
		field    string
		contains string
	}{
		{"empty id", "", "x", []Tool{ok}, "id", "must not be empty"},
		{"bad id", "cap x", "x", []Tool{ok}, "id", "[A-Za-z0-9_-]"},
		{"empty name", "cap_1", "", []Tool{ok}, "name", "must not be empty"},
		{"upper-case name", "cap_1", "Claude", []Tool{ok}, "name", "[a-z0-9-_]"},
		{"name with slash", "cap_1", "a/b", []Tool{ok}, "name", "[a-z0-9-_]"},
		{"no tools", "cap_1", "x", nil, "tools", "at least one tool"},
		{"bad tool name", "cap_1", "x", []Tool{ok, tool("mcp.jira", ClassRead, objSchema)}, "tools[1].name", "must match"},
		{"long tool name", "cap_1", "x", []Tool{tool(strings.Repeat("a", 65), ClassRead, objSchema)}, "tools[0].name", "must match"},
		{"duplicate tool", "cap_1", "x", []Tool{ok, ok}, "tools[1].name", "duplicates tools[0].name"},
		{"bad class", "cap_1", "x", []Tool{ok, tool("w", "admin", objSchema)}, "tools[1].class", `"admin"`},
		{"empty class", "cap_1", "x", []Tool{tool("w", "", objSchema)}, "tools[0].class", "must be one of"},
		{"missing schema", "cap_1", "x", []Tool{ok, {Name: "w", Class: ClassRead}}, "tools[1].input_schema", "is required"},
		{"remote ref", "cap_1", "x", []Tool{ok, tool("w", ClassRead, `{"$ref":"http://x"}`)}, "tools[1].input_schema", `$ref "http://x" is not local`},
		{"schema not object", "cap_1", "x", []Tool{tool("w", ClassRead, `"string"`)}, "tools[0].input_schema", "must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := NewBundle(tt.id, tt.bn, tt.tools)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("NewBundle(%q, %q) = %+v, %v; want *FieldError", tt.id, tt.bn, b, err)
			}
			if fe.Field != tt.field || !strings.Contains(fe.Reason, tt.contains) {
				t.Errorf("NewBundle(%q, %q) error = %q (field %q), want field %q containing %q", tt.id, tt.bn, err, fe.Field, tt.field, tt.contains)
			}
			if !strings.HasPrefix(err.Error(), tt.field+": ") {
				t.Errorf("error %q does not start with the field name %q", err, tt.field)
			}
		})
	}
}

func TestNewBundleDigest(t *testing.T) {
	t.Parallel()
	a := []Tool{
		tool("search", ClassRead, `{"type":"object", "properties":{"q":{"type":"string"}}}`),
		tool("create_issue", ClassWrite, objSchema),
	}
	b := []Tool{ // same tools, other order, other whitespace and key order
		tool("create_issue", ClassWrite, "{\n \"required\": [\"q\"],\n \"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}}}"),
		tool("search", ClassRead, `{"properties":{"q":{"type":"string"}},"type":"object"}`),
	}
	ba, err := NewBundle("cap_1", "jira", a)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := NewBundle("cap_2", "jira-copy", b)
	if err != nil {
		t.Fatal(err)
	}
	if ba.Digest != bb.Digest {
		t.Errorf("digest depends on order/formatting: %s vs %s", ba.Digest, bb.Digest)
	}
	if got := []string{ba.Tools[0].Name, ba.Tools[1].Name}; !cmp.Equal(got, []string{"create_issue", "search"}) {
		t.Errorf("tools not sorted by name: %v", got)
	}
	if string(ba.Tools[1].InputSchema) != `{"properties":{"q":{"type":"string"}},"type":"object"}` {
		t.Errorf("schema not canonical: %s", ba.Tools[1].InputSchema)
	}
	for name, change := range map[string]func([]Tool){
		"class":       func(ts []Tool) { ts[0].Class = ClassWrite },
		"description": func(ts []Tool) { ts[0].Description = "now says more" },
		"schema":      func(ts []Tool) { ts[0].InputSchema = json.RawMessage(`{"type":"object"}`) },
		"name":        func(ts []Tool) { ts[0].Name = "search2" },
	} {
		ts := append([]Tool(nil), a...)
		change(ts)
		bc, err := NewBundle("cap_1", "jira", ts)
		if err != nil {
			t.Fatal(err)
		}
		if bc.Digest == ba.Digest {
			t.Errorf("changing a tool's %s did not change the digest", name)
		}
	}
	// The bundle does not alias the caller's schema bytes.
	raw := json.RawMessage(`{"type":"object"}`)
	bd, err := NewBundle("cap_1", "x", []Tool{{Name: "t", Class: ClassRead, InputSchema: raw}})
	if err != nil {
		t.Fatal(err)
	}
	raw[2] = 'X'
	if string(bd.Tools[0].InputSchema) != `{"type":"object"}` {
		t.Errorf("bundle aliases caller's bytes: %s", bd.Tools[0].InputSchema)
	}
}
