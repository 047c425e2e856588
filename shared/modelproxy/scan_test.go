package modelproxy

import (
	"bytes"
	"os"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// FuzzScan holds the one-pass reader to an independent one
// (go-json-experiment, strict by default: RFC 7493, so unique names and
// valid UTF-8): validate accepts exactly what it accepts, and the members
// and elements the inspector walks are the ones it decodes, value by value.
func FuzzScan(f *testing.F) {
	for _, name := range []string{"claude-code-2.1.332-websearch.json", "claude-code-2.1.332-tool-result.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"k":"\ud83d\ude00"}`, `{"k":"\ud83d"}`, `{"k":"\udc00\ud83d"}`,
		`["\"", "\\", "\\\"", "a\\\\"]`, `{"a":[1,-0,0.5e-3,1E+2],"b":{"c":null,"d":true,"e":false}}`,
		"{\"k\":\"\x01\"}", "{\"k\":\"\xff\"}", `01`, `1.`, `-`, `{"a" : 1 , "b":[ ] }`, ` {} `, `{}{}`, `"x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := validate(b)
		want := jsontext.Value(b).IsValid()
		if (err == nil) != want {
			t.Fatalf("validate(%q) = %v, go-json-experiment valid = %v", b, err, want)
		}
		if err != nil {
			return
		}
		root := span{skipWS(b, 0), len(bytes.TrimRight(b, " \t\r\n"))}
		switch kind(b, root) {
		case '{':
			var m map[string]jsontext.Value
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			ms := d.members(root)
			if len(ms) != len(m) {
				t.Fatalf("%d members, want %d", len(ms), len(m))
			}
			for _, x := range ms {
				if got := b[x.v.s:x.v.e]; !bytes.Equal(got, m[x.name]) {
					t.Fatalf("member %q = %q, want %q", x.name, got, m[x.name])
				}
			}
		case '[':
			var a []jsontext.Value
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatal(err)
			}
			es := d.elements(root)
			if len(es) != len(a) {
				t.Fatalf("%d elements, want %d", len(es), len(a))
			}
			for i, e := range es {
				if got := b[e.s:e.e]; !bytes.Equal(got, a[i]) {
					t.Fatalf("element %d = %q, want %q", i, got, a[i])
				}
			}
		case '"':
			var s string
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			if got, ok := str(b, root); !ok || got != s {
				t.Fatalf("str = %q, want %q", got, s)
			}
		}
	})
}
