package policyyaml

import (
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy"
)

// FuzzParse: Parse never panics, its errors never name a Go type, and a
// document it compiles is stored as JSON that policy.Parse reads to the
// same digest.
func FuzzParse(f *testing.F) {
	f.Add([]byte("name: x\ndefault_verdict: deny\nrules:\n  - {id: a, tool: 'mcp__*', verdict: allow, match: {input: {/a/0: ['x*']}}}\n"))
	f.Add([]byte("name: x\nname: y\n"))
	f.Add([]byte("? [a, b]\n: c\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte(`{"name":"x","default_verdict":"deny"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, warns, err := Parse(data)
		if err != nil {
			if p != nil || warns != nil {
				t.Fatalf("Parse(%q) returned a policy or warnings with error %v", data, err)
			}
			for _, goWord := range []string{"struct {", "*float64", "[]string", "map[", "int64", "json:", "policy.", "interface {", "<nil>"} {
				if strings.Contains(err.Error(), goWord) {
					t.Fatalf("Parse(%q) error %q names a Go type", data, err)
				}
			}
			return
		}
		stored, err := jsonDocument(p)
		if err != nil {
			t.Fatal(err)
		}
		q, _, err := policy.Parse(stored)
		if err != nil || q.Digest() != p.Digest() {
			t.Fatalf("stored document of %q does not read back: %v", data, err)
		}
	})
}
