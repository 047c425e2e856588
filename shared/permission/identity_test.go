package permission

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy/tree"
	"github.com/fluidbox/fluidbox/shared/redact"
)

// TestIdentityCoversEveryField: setting any field of Request changes the
// identity, so a field added to the request (and so possibly read by the
// decision) is covered without anyone remembering to add it. A field of a
// kind this test cannot fill fails it: decide how to cover it, then teach
// the test.
func TestIdentityCoversEveryField(t *testing.T) {
	t.Parallel()
	base := Request{ToolCallID: "c1", ToolName: "Read", Input: json.RawMessage(`{"file_path":"a"}`)}
	id := func(r Request) string {
		t.Helper()
		cr, err := checkRequest(r)
		if err != nil {
			t.Fatalf("checkRequest(%+v): %v", r, err)
		}
		return cr.identity.String()
	}
	want := id(base)
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		r := base
		v := reflect.ValueOf(&r).Elem().Field(i)
		switch {
		case f.Type == reflect.TypeOf(json.RawMessage(nil)):
			v.Set(reflect.ValueOf(json.RawMessage(`{"file_path":"b"}`)))
		case f.Type.Kind() == reflect.String:
			v.SetString("/other")
		case f.Name == "PathKinds":
			v.Set(reflect.ValueOf(map[string]string{"file_path": "dir"}))
		case f.Type == reflect.TypeOf(map[string]string(nil)):
			v.Set(reflect.ValueOf(map[string]string{"file_path": "/other"}))
		case f.Name == "SearchReport":
			v.Set(reflect.ValueOf(&tree.Report{Entries: []string{".env"}, Complete: true}))
		default:
			t.Fatalf("Request.%s is a %s: teach this test to set it, and make sure identityOf covers it", f.Name, f.Type)
		}
		if got := id(r); got == want {
			t.Errorf("identity with Request.%s set = identity without it (%s): the field is not covered", f.Name, got)
		}
	}
}

// TestIdentityIgnoresSpelling: the same request spelt differently (key
// order, white space) is the same call; a retry must not conflict with
// itself.
func TestIdentityIgnoresSpelling(t *testing.T) {
	t.Parallel()
	a, err := checkRequest(Request{ToolCallID: "c", ToolName: "Write", Input: json.RawMessage(`{"file_path":"a","content":"x","n":1.50}`),
		Cwd: "/ws", ResolvedPaths: map[string]string{"file_path": "/ws/a", "x": "/ws/x"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkRequest(Request{ToolCallID: "c", ToolName: "Write", Input: json.RawMessage("{ \"n\": 1.50,\n\"content\":\"x\", \"file_path\" : \"a\" }"),
		Cwd: "/ws", ResolvedPaths: map[string]string{"x": "/ws/x", "file_path": "/ws/a"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.identity != b.identity || a.digest != b.digest {
		t.Errorf("identity %s / %s, digest %s / %s: the same request spelt two ways differs", a.identity, b.identity, a.digest, b.digest)
	}
	if a.identity == a.digest {
		t.Errorf("identity = input digest %s: the identity must cover more than the input", a.digest)
	}
}

// TestRequestHoldsNoCredential: a tool call id, tool name or subagent
// field that carries a fluidbox credential is refused before anything is
// recorded, in any case: the sandbox cannot write a token into its ledger.
func TestRequestHoldsNoCredential(t *testing.T) {
	t.Parallel()
	for _, r := range []Request{
		{ToolCallID: "toolu_fbx_sess_abc", ToolName: "Read"},
		{ToolCallID: "c1", ToolName: "FBX_RUN_abc"},
		{ToolCallID: "c1", ToolName: "Read", AgentID: "x-fbx_trg_abc"},
		{ToolCallID: "c1", ToolName: "Read", AgentType: "fbx_lch_abc"},
	} {
		r.Input = json.RawMessage(`{"file_path":"a"}`)
		if _, err := checkRequest(r); err == nil {
			t.Errorf("checkRequest(%+v) = nil, want refused", r)
		}
	}
	if _, err := checkRequest(Request{ToolCallID: "toolu_01ABC", ToolName: "Read", Input: json.RawMessage(`{"file_path":"a"}`)}); err != nil {
		t.Errorf("an ordinary request: %v", err)
	}
}

// FuzzIdentityUnchanged: the identity checkRequest computes is the one
// computed before the input's canonical JSON was shared with its digest
// (the whole request decoded, the decoded input set in, all encoded once
// more), so a retry of a call recorded before that change is still the
// same call; and the input digest is the digest of the decoded input.
func FuzzIdentityUnchanged(f *testing.F) {
	for _, in := range []string{
		`{"file_path":"a"}`,
		`{"command":"echo <b> & 'c' \u2028 \u00e9","n":1.50,"e":-0.0e+10,"big":123456789012345678901234567890}`,
		`{"nested":{"z":[1,{"y":null,"x":true}],"a":"\ud83d\ude00"},"":""}`,
		`{"html":"</script><script>","ctl":"\u0000\u001f\t"}`,
		`{}`,
	} {
		f.Add(in, "/ws", "/ws/a")
	}
	f.Fuzz(func(t *testing.T, input, cwd, resolved string) {
		req := Request{ToolCallID: "c", ToolName: "Write", Input: json.RawMessage(input), Cwd: cwd, ResolvedPaths: map[string]string{"file_path": resolved}}
		cr, err := checkRequest(req)
		if err != nil {
			return
		}
		raw := []byte(input)
		if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
			raw = []byte("{}") // as checkRequest reads an absent input
		}
		decoded, err := decodeJSON(raw)
		if err != nil {
			t.Fatalf("checkRequest took an input decodeJSON refuses: %v", err)
		}
		req.Input = nil
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		body, err := decodeJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		m = body.(map[string]any)
		m["input"] = decoded
		want, err := redact.DigestJSON(m)
		if err != nil {
			t.Fatal(err)
		}
		if cr.identity != want {
			t.Errorf("identity of %q = %s, want %s as computed from the decoded input", input, cr.identity, want)
		}
		if wantDigest, _ := redact.DigestJSON(decoded); cr.digest != wantDigest {
			t.Errorf("digest of %q = %s, want %s", input, cr.digest, wantDigest)
		}
	})
}
