package policyyaml

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/policy"
)

func mustParse(t testing.TB, doc string) *policy.Policy {
	t.Helper()
	p, _, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(%q): %v", doc, err)
	}
	return p
}

// jsonDocument is the document as the control API stores it.
func jsonDocument(p *policy.Policy) ([]byte, error) { return json.Marshal(p.Document()) }

func TestValidationErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, doc, field, msg string }{
		{"yaml unknown verdict", "name: x\ndefault_verdict: deny\nrules:\n  - id: a\n    tool: Bash\n    verdict: alow\n", "rules[0].verdict", `"alow" is not one of allow, deny, require_approval`},
		{"yaml unknown field", "name: x\ndefault_verdict: deny\nrules:\n  - id: a\n    tool: Bash\n    verdict: allow\n    colour: red\n", "rules[0].colour", "unknown field"},
		{"yaml duplicate key", "name: x\nname: y\ndefault_verdict: deny\n", "", "invalid YAML"},
		{"yaml bad glob", "name: x\ndefault_verdict: deny\nrules:\n  - {id: a, tool: 'x[', verdict: allow}\n", "rules[0].tool", "bad glob"},
		{"yaml key not plain", "? [a, b]\n: c\n", "", "not a mapping of plain keys to values"},
		{"yaml not a mapping", "- a\n- b\n", "", "must be an object, not a list"},
		{"json as policy.Parse reads it", `{"name":"x","default_verdict":"maybe"}`, "default_verdict", `"maybe" is not one of allow, deny, require_approval`},
		{"empty", " \n ", "", "empty"},
		{"too large", "name: " + strings.Repeat("x", policy.MaxDocumentBytes), "", "document larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, warns, err := Parse([]byte(tt.doc))
			var ve *policy.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse(%.100q) = %v, %v, want *policy.ValidationError", tt.doc, p, err)
			}
			if ve.Field != tt.field || !strings.Contains(ve.Message, tt.msg) {
				t.Errorf("Parse(%.100q) error = %q (field %q), want field %q and message containing %q", tt.doc, err, ve.Field, tt.field, tt.msg)
			}
			if p != nil || warns != nil {
				t.Errorf("Parse(%.100q) returned a policy or warnings with an error", tt.doc)
			}
		})
	}
}

func TestYAMLEqualsJSON(t *testing.T) {
	t.Parallel()
	js := mustParse(t, `{"name":"default","default_verdict":"require_approval","rules":[
	  {"id":"git-read","tool":"Bash","match":{"command_prefix":["git status","git diff"]},"verdict":"allow"},
	  {"id":"jira-field","tool":"mcp__jira__create_issue","match":{"input":{"/project":["OPS"]}},"verdict":"deny"}]}`)
	ym := mustParse(t, `
name: default
default_verdict: require_approval
rules:
  - id: git-read
    tool: Bash
    match:
      command_prefix: ["git status", "git diff"]
    verdict: allow
  - id: jira-field
    tool: mcp__jira__create_issue
    match:
      input:
        /project: [OPS]
    verdict: deny
`)
	if js.Digest() != ym.Digest() {
		t.Errorf("Digest(yaml) = %s, want %s (same as JSON)", ym.Digest(), js.Digest())
	}
	if diff := cmp.Diff(js.Document(), ym.Document()); diff != "" {
		t.Errorf("Document mismatch (-json +yaml):\n%s", diff)
	}
}

// TestStoredDocumentIsJSON: what the control API stores (the normalized
// document as JSON) is read by policy.Parse alone, to the same digest: the
// gate, which links no YAML parser, reads every stored policy.
func TestStoredDocumentIsJSON(t *testing.T) {
	t.Parallel()
	p := mustParse(t, "name: x\ndefault_verdict: deny\nrules:\n  - {id: a, tool: Read, verdict: allow, match: {path: ['src/**']}}\n")
	stored, err := jsonDocument(p)
	if err != nil {
		t.Fatal(err)
	}
	q, _, err := policy.Parse(stored)
	if err != nil {
		t.Fatalf("policy.Parse(stored %s): %v", stored, err)
	}
	if q.Digest() != p.Digest() {
		t.Errorf("stored digest = %s, want %s", q.Digest(), p.Digest())
	}
	if _, _, err := policy.Parse([]byte("name: x\ndefault_verdict: deny\n")); err == nil {
		t.Error("policy.Parse read YAML; it reads JSON only")
	}
}
