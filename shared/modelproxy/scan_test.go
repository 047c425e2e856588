package modelproxy

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// FuzzScan holds the one-pass reader to an independent one
// (go-json-experiment, strict by default: RFC 7493, so unique names and
// valid UTF-8): validate accepts exactly what it accepts, and the tape
// walks to the same values, at every level: each object's members (names
// unescaped, in order) and each array's elements are the ones its decoder
// reads, ending where they end, and each string reads as it decodes.
func FuzzScan(f *testing.F) {
	for _, name := range []string{"claude-code-2.1.332-websearch.json", "claude-code-2.1.332-tool-result.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"mod\u0065l":1,"\u00e9\n":{"\"":[]}}`, `{"k":"\ud83d\ude00"}`, `{"k":"\ud83d"}`, `{"k":"\udc00\ud83d"}`,
		`["\"", "\\", "\\\"", "a\\\\"]`, `{"a":[1,-0,0.5e-3,1E+2],"b":{"c":null,"d":true,"e":false}}`,
		"{\"k\":\"\x01\"}", "{\"k\":\"\xff\"}", `01`, `1.`, `-`, `{"a" : 1 , "b":[ ] }`, ` {} `, `{}{}`, `"x`,
	} {
		f.Add([]byte(s))
	}
	// The scanner's word-at-a-time paths: a byte that needs a look at every
	// offset of a 16-byte block, and past it; long strings with escapes.
	for n := 0; n < 40; n++ {
		pad := strings.Repeat("a", n)
		for _, c := range []string{`\"`, `\\`, `\n`, `\u00e9`, `\ud83d\ude00`, "\x1f", "\x7f", "é", "\xe9", "\xed\xa0\x80", `"`} {
			f.Add([]byte(`["` + pad + c + pad + `"]`))
		}
	}
	// Objects large enough for a set of names, with a duplicate late,
	// escaped, and nested.
	var big strings.Builder
	big.WriteString(`{`)
	for i := range 40 {
		fmt.Fprintf(&big, `"k%d":{"k%d":%d},`, i, i, i)
	}
	f.Add([]byte(big.String() + `"k39":0}`))
	f.Add([]byte(big.String() + `"\u006b7":0}`))
	f.Add([]byte(big.String() + `"k40":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := validate(b)
		want := jsontext.Value(b).IsValid()
		if errors.Is(err, errTooMany) {
			return
		}
		if (err == nil) != want {
			t.Fatalf("validate(%q) = %v, go-json-experiment valid = %v", b, err, want)
		}
		if err != nil {
			return
		}
		defer d.release()
		same(t, d, d.root(), jsontext.NewDecoder(bytes.NewReader(b)))
	})
}

// same reads the next value from dec, the reference, and checks that the
// tape's value v is it: the same kind, ending at the same byte, with the
// same members in the same order (names unescaped) or the same elements,
// each the same again, or the same string.
func same(t *testing.T, d *doc, v span, dec *jsontext.Decoder) {
	t.Helper()
	tok, err := dec.ReadToken()
	if err != nil {
		t.Fatal(err)
	}
	if k := byte(tok.Kind()); k != kind(d.b, v) {
		t.Fatalf("value at %d is %q, want %q", v.s, kind(d.b, v), k)
	}
	switch tok.Kind() {
	case '{':
		for _, m := range d.members(v) {
			name, err := dec.ReadToken()
			if err != nil || name.String() != m.name {
				t.Fatalf("member %q, want %q (%v)", m.name, name, err)
			}
			same(t, d, m.v, dec)
		}
		if end, err := dec.ReadToken(); err != nil || end.Kind() != '}' {
			t.Fatalf("object at %d ends early: %v %v", v.s, end, err)
		}
	case '[':
		for _, e := range d.elements(v) {
			same(t, d, e, dec)
		}
		if end, err := dec.ReadToken(); err != nil || end.Kind() != ']' {
			t.Fatalf("array at %d ends early: %v %v", v.s, end, err)
		}
	case '"':
		if got, ok := str(d.b, v); !ok || got != tok.String() {
			t.Fatalf("str = %q, want %q", got, tok.String())
		}
	}
	if end := int(dec.InputOffset()); end != v.e {
		t.Fatalf("value at %d ends at %d, want %d", v.s, v.e, end)
	}
}

// TestValidateBounds: a document may hold maxValues values and nest
// maxDepth levels, no more; the proxy answers a body over the first with
// 413, as it does a body over MaxBody.
func TestValidateBounds(t *testing.T) {
	values := func(n int) []byte { // an array and n-1 zeros
		return []byte("[" + strings.TrimSuffix(strings.Repeat("0,", n-1), ",") + "]")
	}
	if d, err := validate(values(maxValues)); err != nil {
		t.Fatalf("%d values: %v", maxValues, err)
	} else {
		d.release()
	}
	if _, err := validate(values(maxValues + 1)); !errors.Is(err, errTooMany) {
		t.Fatalf("%d values: %v, want %v", maxValues+1, err, errTooMany)
	}
	body := []byte(`{"model":"m","max_tokens":1,"messages":[],"stop_sequences":` + strings.Repeat(`"",`, maxValues) + `""]}`)
	body = bytes.Replace(body, []byte(`"stop_sequences":`), []byte(`"stop_sequences":[`), 1)
	if _, ref := Inspect(body, http.Header{}, ""); ref == nil || ref.Status != http.StatusRequestEntityTooLarge || ref.Reason != ReasonTooLarge {
		t.Fatalf("refusal %+v, want 413 %s", ref, ReasonTooLarge)
	}
	nest := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	if d, err := validate(nest(maxDepth)); err != nil {
		t.Fatalf("depth %d: %v", maxDepth, err)
	} else {
		d.release()
	}
	if _, err := validate(nest(maxDepth + 1)); !errors.Is(err, errSyntax) {
		t.Fatalf("depth %d: %v, want %v", maxDepth+1, err, errSyntax)
	}
}

// TestInspectConcurrent: documents come from a pool shared by concurrent
// requests; dozens of goroutines inspecting different bodies at once (some
// refused half-read, some with objects large enough for a name set, some
// with escaped names) each get exactly what a lone inspection gets.
func TestInspectConcurrent(t *testing.T) {
	t.Parallel()
	var bodies [][]byte
	for _, name := range []string{"claude-code-2.1.332-messages.json", "claude-code-2.1.332-tool-result.json", "claude-code-2.1.332-websearch.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	var wide strings.Builder
	for i := range 40 {
		fmt.Fprintf(&wide, `"k%d":%d,`, i, i)
	}
	for i := range 24 {
		ttl := []string{"5m", "1h", `1\u0068`}[i%3]
		bodies = append(bodies,
			[]byte(fmt.Sprintf(`{"m\u006fdel":"m%d","max_tokens":%d,"messages":[{"role":"user","content":[{"type":"text","text":"%s","cache_control":{"type":"ephemeral","ttl":"%s"}}]}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"},{"name":"t","input_schema":{%s"k":0}}]}`, i, i+1, strings.Repeat("x", i*7), ttl, wide.String())),
			[]byte(fmt.Sprintf(`{"model":"m%d","max_tokens":1,"messages":[],"tools":[{"name":"t","input_schema":{%s"k%d":0}}]}`, i, wide.String(), i+20)), // a duplicate for i < 20
			[]byte(fmt.Sprintf(`{"model":"m%d","max_tokens":1,"messages":[],"x\u0079":%d}`, i, i)))
	}
	type result struct {
		model         string
		maxTokens     int64
		cache1h       bool
		offered       string
		body, refusal string
	}
	inspect := func(b []byte) result {
		in, ref := Inspect(b, http.Header{}, "")
		if ref != nil {
			return result{refusal: ref.Message}
		}
		in.SetMaxTokens(in.MaxTokens) // an edit, so that Body rewrites
		out, err := in.Body(b)
		if err != nil {
			t.Error(err)
		}
		return result{in.Model, in.MaxTokens, in.Cache1h, strings.Join(in.Offered(), ","), string(out), ""}
	}
	want := make([]result, len(bodies))
	refused := 0
	for i, b := range bodies {
		want[i] = inspect(b)
		if want[i].refusal != "" {
			refused++
		}
	}
	if refused == 0 || refused == len(bodies) {
		t.Fatalf("%d of %d bodies refused; the test needs both", refused, len(bodies))
	}
	var wg sync.WaitGroup
	for g := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 40 {
				i := (g*7 + n*13) % len(bodies)
				if got := inspect(bodies[i]); got != want[i] {
					t.Errorf("body %d inspected concurrently: %+v, alone: %+v", i, got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestResetDropsHugeTables: a document read from a huge body does not keep
// its tables for the requests after it, whether the body had many values
// or one long escaped member name (a few values, megabytes unescaped).
func TestResetDropsHugeTables(t *testing.T) {
	t.Parallel()
	for name, b := range map[string][]byte{
		"values": []byte("[" + strings.Repeat("0,", keptValues) + "0]"),
		"name":   []byte(`{"` + strings.Repeat(`\n`, keptSide+1) + `":0}`),
	} {
		d, err := validate(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d.reset() // not given back: this test still looks at it
		if cap(d.tape) != 0 || cap(d.side) != 0 {
			t.Errorf("%s: a reset document keeps %d values and %d bytes of names", name, cap(d.tape), cap(d.side))
		}
	}
	d, err := validate([]byte(`{"\u0061":[{"b":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	d.reset()
	if cap(d.tape) == 0 {
		t.Error("a small document's tape is not kept")
	}
}
