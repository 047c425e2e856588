package modelproxy

import (
	"bytes"
	stdjson "encoding/json"
	"math"
	"net/http"
	"strconv"
	"testing"

	"github.com/fluidbox/fluidbox/shared/redact"
)

// gateDigest is the gate's digest of a tool input as the runner sends it
// (permission's checkRequest, written out here so that a change to either
// side fails this test).
func gateDigest(t *testing.T, raw string) string {
	t.Helper()
	dec := stdjson.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	d, err := redact.DigestJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// TestInputDigests: the tool_use input in the history matches the input
// the gate was asked about whatever its key order, string escapes or
// number spelling, as long as both denote the same JSON value exactly; an
// integer a float64 would round, or another value, never matches.
func TestInputDigests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		asked, history string
		match          bool
	}{
		{`{"a":1,"b":"x"}`, `{"b":"x","a":1}`, true},
		{`{"p":"é/<>&"}`, `{"p":"\u00e9\/\u003c>\u0026"}`, true},
		{`{"n":100}`, `{"n":1e2}`, true},
		{`{"n":100}`, `{"n":100.0}`, true},
		{`{"n":1}`, `{"n":1.000}`, true},
		{`{"n":0.1}`, `{"n":0.10}`, true},
		{`{"n":0}`, `{"n":-0}`, true},
		{`{"n":1e+21}`, `{"n":1000000000000000000000}`, true},
		{`{"n":1e-7}`, `{"n":0.0000001}`, true},
		{`{"n":[1,{"m":2}]}`, `{"n":[1.0,{"m":20e-1}]}`, true},
		{`{"n":1.5}`, `{"n":1.5}`, true},
		// Spelled the same, matched as spelled however a float64 reads it.
		{`{"n":9007199254740993}`, `{"n":9007199254740993}`, true},
		// JSON.stringify rounds this to ...992: that is another integer.
		{`{"n":9007199254740992}`, `{"n":9007199254740993}`, false},
		{`{"n":1}`, `{"n":2}`, false},
		{`{"n":1}`, `{"n":"1"}`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`{"s":"ls"}`, `{"s":"ls "}`, false},
		{`{"n":1e400}`, `{"n":1e401}`, false},
	}
	for _, c := range cases {
		want := gateDigest(t, c.asked)
		got, alt, err := inputDigests([]byte(c.history))
		if err != nil {
			t.Fatalf("inputDigests(%s): %v", c.history, err)
		}
		if match := got == want || (alt != "" && alt == want); match != c.match {
			t.Errorf("asked %s, history %s: match = %v, want %v", c.asked, c.history, match, c.match)
		}
	}
}

// TestStringifiedBounded: a number spelled at length, or beyond a
// float64's range, is never read exactly (it keeps its spelling), so a
// hostile input cannot make the check compute with huge rationals.
func TestStringifiedBounded(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"1e999999999", "-1e-999999999", "0." + string(bytes.Repeat([]byte("0"), 100)) + "1"} {
		if s, ok := stringified(n); ok {
			t.Errorf("stringified(%.20s...) = %q, want it left as spelled", n, s)
		}
	}
	if s, ok := stringified("1e2"); !ok || s != "100" {
		t.Errorf(`stringified("1e2") = %q, %v`, s, ok)
	}
}

// FuzzInputDigests: for any tool input the inspector admits, its digest is
// the gate's, and the input as a JavaScript runner re-serializes it
// (parsed to float64s, stringified) matches the original through the
// stringified spelling whenever the re-serialization kept every number's
// value exactly.
func FuzzInputDigests(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1.0,"b":[1e2,-0,0.5]}`, `{"x":"\u00e9","y":{"z":1E-7}}`, `{"n":9007199254740993}`, `{"n":123456789012345678901234567890}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		body := append(append([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":`), raw...), `}]}]}`...)
		in, ref := Inspect(body, http.Header{}, "")
		if ref != nil || len(in.uses) != 1 {
			return
		}
		input := in.uses[0].input
		got, alt, err := inputDigests(input)
		if err != nil {
			t.Fatalf("admitted input %q cannot be digested: %v", input, err)
		}
		if want := gateDigest(t, string(input)); got != want {
			t.Fatalf("digest of %q = %s, gate's %s", input, got, want)
		}
		// The JavaScript runner's copy: float64 numbers, ES6 spelling.
		var js any
		if err := stdjson.Unmarshal(input, &js); err != nil {
			return
		}
		again, err := stdjson.Marshal(js)
		if err != nil {
			return // a number past float64's range: JSON.stringify would write null
		}
		if !exactCopy(t, input, again) {
			return
		}
		if want := gateDigest(t, string(again)); got != want && alt != want {
			t.Fatalf("input %q and its exact re-serialization %q do not match (%s / %s vs %s)", input, again, got, alt, want)
		}
	})
}

// exactCopy reports whether b holds every number of a with the same
// decimal value (so the two denote one JSON value).
func exactCopy(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	for _, p := range []struct {
		raw []byte
		v   *any
	}{{a, &va}, {b, &vb}} {
		dec := stdjson.NewDecoder(bytes.NewReader(p.raw))
		dec.UseNumber()
		if err := dec.Decode(p.v); err != nil {
			t.Fatal(err)
		}
	}
	return sameValue(va, vb)
}

func sameValue(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !sameValue(v, y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case stdjson.Number:
		y, ok := b.(stdjson.Number)
		if !ok {
			return false
		}
		if len(x) > maxNumberLen {
			return string(x) == string(y)
		}
		fx, err1 := strconv.ParseFloat(string(x), 64)
		fy, err2 := strconv.ParseFloat(string(y), 64)
		if err1 != nil || err2 != nil || math.IsInf(fx, 0) {
			return false
		}
		s, ok := stringified(string(x))
		return ok && fx == fy && s == string(y)
	}
	return a == b
}

// TestPairsBound: a request answering more tool calls than the proxy
// checks at once is refused before any read (Check reads nothing: its
// verifier has no store here, so a read would panic the test).
func TestPairsBound(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	b.WriteString(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[`)
	for i := range maxFresh + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"tool_use","id":"t` + strconv.Itoa(i) + `","name":"x","input":{}}`)
	}
	b.WriteString(`]},{"role":"user","content":[`)
	for i := range maxFresh + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"tool_result","tool_use_id":"t` + strconv.Itoa(i) + `","content":"r"}`)
	}
	b.WriteString(`]}]}`)
	in, ref := Inspect(b.Bytes(), http.Header{}, "")
	if ref != nil {
		t.Fatal(ref.Message)
	}
	v := &Verifier{seen: newChecked(maxChecked)}
	if ref := v.Check(t.Context(), "ses_x", in); ref == nil || ref.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("Check of %d fresh results = %+v, want a 413", maxFresh+1, ref)
	}
}

// FuzzPairs: for any request the inspector admits, each pair the check
// reads joins a tool_result to the tool_use of the same id in an
// assistant message before the result's user message, with only
// assistant (or system) messages between them, and no id is paired twice.
func FuzzPairs(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Bash","input":{}}]},{"role":"system","content":"s"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"r"}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"x","input":{}},{"type":"tool_use","id":"b","name":"x","input":{"n":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"b","is_error":true},{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"t"}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, ref := Inspect(body, http.Header{}, "")
		if ref != nil {
			return
		}
		pairs, ref := in.pairs()
		if ref != nil {
			if ref.Status != http.StatusBadRequest {
				t.Fatalf("pairs refused with %d", ref.Status)
			}
			return
		}
		if len(pairs) != len(in.results) {
			t.Fatalf("%d pairs for %d results", len(pairs), len(in.results))
		}
		seen := map[string]bool{}
		for _, p := range pairs {
			if p.use.id != p.res.id || seen[p.res.id] || !validToolID(p.res.id) {
				t.Fatalf("pair %+v (seen %v)", p, seen[p.res.id])
			}
			seen[p.res.id] = true
			if in.roles[p.use.msg] != "assistant" || in.roles[p.res.msg] != "user" || p.use.msg >= p.res.msg {
				t.Fatalf("pair of messages %d (%s) and %d (%s)", p.use.msg, in.roles[p.use.msg], p.res.msg, in.roles[p.res.msg])
			}
			// Between them, only the rest of the assistant turn, then the
			// start of the user turn (system messages belong to neither).
			user := false
			for m := p.use.msg + 1; m < p.res.msg; m++ {
				switch in.roles[m] {
				case "user":
					user = true
				case "assistant":
					if user {
						t.Fatalf("result of message %d answers message %d across another turn", p.res.msg, p.use.msg)
					}
				}
			}
		}
	})
}

// TestWithDefaults: a tool_use input that leaves out properties the frozen
// schema gives a default is compared as the runner ran it, those defaults
// filled in (Claude Code fills ToolSearch's max_results before its hook
// asks the gate, and the model's own tool_use in the history keeps only
// what the model wrote); nothing else is added, and a present value is
// never replaced.
func TestWithDefaults(t *testing.T) {
	t.Parallel()
	const toolSearch = `{"type":"object","properties":{"query":{"type":"string"},"max_results":{"default":5,"type":"number"}},"required":["query"],"additionalProperties":false}`
	cases := []struct {
		schema, history, asked string
		ok, match              bool
	}{
		{toolSearch, `{"query":"select:WebSearch"}`, `{"query":"select:WebSearch","max_results":5}`, true, true},
		{toolSearch, `{"query":"x","max_results":3}`, `{"query":"x","max_results":5}`, false, false},
		{toolSearch, `{"query":"x"}`, `{"query":"x","max_results":6}`, true, false},
		{toolSearch, `{"query":"x"}`, `{"query":"x","max_results":5,"other":1}`, true, false},
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{}`, `{"a":""}`, false, false},
		{`{"type":"object","properties":{"o":{"type":"object","properties":{"n":{"default":1}}}}}`, `{"o":{}}`, `{"o":{"n":1}}`, false, false},
		{toolSearch, `[1]`, `[1]`, false, false},
		{`not json`, `{"query":"x"}`, `{"query":"x","max_results":5}`, false, false},
	}
	for _, c := range cases {
		filled, ok := withDefaults([]byte(c.history), c.schema)
		if ok != c.ok {
			t.Errorf("withDefaults(%s, %s) ok = %v, want %v", c.history, c.schema, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		got, alt, err := inputDigests(filled)
		if err != nil {
			t.Fatalf("withDefaults(%s) = %s, not JSON: %v", c.history, filled, err)
		}
		want := gateDigest(t, c.asked)
		if match := got == want || (alt != "" && alt == want); match != c.match {
			t.Errorf("withDefaults(%s) = %s against asked %s: match = %v, want %v", c.history, filled, c.asked, match, c.match)
		}
	}
}

// TestToolIDHoldsNoCredential: a tool_use id carrying a fluidbox
// credential is refused like any id outside the API's alphabet, so
// run.halted can never record one.
func TestToolIDHoldsNoCredential(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"toolu_fbx_sess_abc", "FBX_RUN_x", "a-fbx_lch_b"} {
		if validToolID(id) {
			t.Errorf("validToolID(%q) = true, want false", id)
		}
	}
	if !validToolID("toolu_01ABCdef-2") {
		t.Error("an ordinary tool_use id is refused")
	}
}
