package seal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/seal"
)

const canary = "CANARY-s3cr3t-7f9a"

func canaryCredentials() []seal.Credential {
	return []seal.Credential{
		{Type: seal.TypeBearer, Token: canary},
		{Type: seal.TypeHeader, Name: "X-Api-Key", Value: canary},
		// Invalid ones must redact too.
		{Type: "weird", Token: canary, Name: canary, Value: canary},
		{Type: canary, Token: canary},
		{Type: seal.TypeHeader, Name: canary + " x", Value: canary},
	}
}

func TestCredentialRedactsInFmt(t *testing.T) {
	t.Parallel()
	type holder struct {
		Cred  seal.Credential
		Ptr   *seal.Credential
		Slice []seal.Credential
		Map   map[string]seal.Credential
	}
	for _, c := range canaryCredentials() {
		h := holder{Cred: c, Ptr: &c, Slice: []seal.Credential{c}, Map: map[string]seal.Credential{"k": c}}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%t", "%10.3v", "%T"} {
			for _, arg := range []any{c, &c, h, &h} {
				if out := fmt.Sprintf(verb, arg); strings.Contains(out, canary) || strings.Contains(out, fmt.Sprintf("%x", canary)) {
					t.Errorf("Sprintf(%q, %T) = %q leaks the secret", verb, arg, out)
				}
			}
		}
		if out := fmt.Sprint(c, &c); strings.Contains(out, canary) {
			t.Errorf("Sprint leaks the secret: %q", out)
		}
	}
	if got, want := (seal.Credential{Type: seal.TypeBearer, Token: canary}).String(), "credential(bearer, redacted)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := fmt.Sprint(seal.Credential{Type: seal.TypeHeader, Name: "x-api-key", Value: canary}), "credential(header X-Api-Key, redacted)"; got != want {
		t.Errorf("Sprint(header) = %q, want %q", got, want)
	}
}

func TestCredentialRedactsInSlog(t *testing.T) {
	t.Parallel()
	for _, c := range canaryCredentials() {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		log.Info("msg", "cred", c, "ptr", &c, slog.Any("any", c), slog.Group("g", "c", c))
		var text bytes.Buffer
		slog.New(slog.NewTextHandler(&text, nil)).Info("msg", "cred", c, "ptr", &c)
		for _, out := range []string{buf.String(), text.String()} {
			if strings.Contains(out, canary) {
				t.Errorf("slog output leaks the secret: %s", out)
			}
		}
		if !json.Valid(bytes.TrimSpace(buf.Bytes())) {
			t.Errorf("slog JSON output is not valid JSON: %s", buf.String())
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("m", "cred", seal.Credential{Type: seal.TypeBearer, Token: canary})
	var rec struct {
		Cred map[string]string `json:"cred"`
	}
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"type": "bearer", "secret": "redacted"}, rec.Cred); diff != "" {
		t.Errorf("slog cred attribute (-want +got):\n%s", diff)
	}
}

func TestCredentialRedactsInJSON(t *testing.T) {
	t.Parallel()
	for _, c := range canaryCredentials() {
		for _, v := range []any{c, &c, []seal.Credential{c}, map[string]any{"credential": c}, struct{ C seal.Credential }{c}} {
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("json.Marshal(%T): %v", v, err)
			}
			if strings.Contains(string(out), canary) {
				t.Errorf("json.Marshal(%T) = %s leaks the secret", v, out)
			}
		}
	}
	out, _ := json.Marshal(seal.Credential{Type: seal.TypeHeader, Name: "X-Api-Key", Value: canary})
	if got, want := string(out), `{"type":"header","name":"X-Api-Key","redacted":true}`; got != want {
		t.Errorf("json.Marshal(header) = %s, want %s", got, want)
	}
	// A redacted credential does not decode back into a usable one.
	var c seal.Credential
	if err := json.Unmarshal(out, &c); err == nil {
		t.Errorf("Unmarshal(redacted form) succeeded: %v", c)
	}
}

func TestCredentialUnmarshal(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want seal.Credential
	}{
		{`{"type":"bearer","token":"` + canary + `"}`, seal.Credential{Type: "bearer", Token: canary}},
		{`{"type":"header","name":"X-Api-Key","value":"` + canary + `"}`, seal.Credential{Type: "header", Name: "X-Api-Key", Value: canary}},
		{` {"token":"t","type":"bearer"} `, seal.Credential{Type: "bearer", Token: "t"}},
		{`{"type":"header","name":"Authorization","value":"Basic abc"}`, seal.Credential{Type: "header", Name: "Authorization", Value: "Basic abc"}},
	}
	for _, tc := range good {
		var got seal.Credential
		if err := json.Unmarshal([]byte(tc.in), &got); err != nil {
			t.Errorf("Unmarshal(%s) = %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Unmarshal(%s) mismatch", tc.in) // values are secret even in tests' habits
		}
	}

	bad := []string{
		`{"type":"bearer","token":"` + canary + `","extra":1}`,
		`{"type":"bearer","token":"` + canary + `","` + canary + `":1}`,
		`{"type":"bearer","token":"` + canary + `","value":"v"}`,
		`{"type":"header","name":"X-Api-Key","value":"` + canary + `","token":"t"}`,
		`{"type":"header","name":"` + canary + ` bad","value":"` + canary + `"}`,
		`{"type":"header","name":"X-Api-Key","value":"` + canary + `\r\nX-Evil: 1"}`,
		`{"type":"header","name":"Host","value":"` + canary + `"}`,
		`{"type":"header","name":"content-length","value":"` + canary + `"}`,
		`{"type":"header","name":"Mcp-Session-Id","value":"` + canary + `"}`,
		`{"type":"header","name":"X-Api-Key","value":""}`,
		`{"type":"header","name":"","value":"` + canary + `"}`,
		`{"type":"bearer","token":""}`,
		`{"type":"bearer","token":"` + canary + ` with space"}`,
		`{"type":"bearer"}`,
		`{"token":"` + canary + `"}`,
		`{"type":"` + canary + `","token":"` + canary + `"}`,
		`{"type":"bearer","token":` + canary + `}`,
		`{"type":"bearer","token":"` + canary + `"`,
		`{"type":"bearer","token":"` + canary + `"} {}`,
		`{"type":"bearer","token":["` + canary + `"]}`,
		`{"type":"bearer","token":12345}`,
		`"` + canary + `"`,
		`[` + canary + `]`,
		canary,
		`null`,
		``,
	}
	for _, in := range bad {
		var c seal.Credential
		err := c.UnmarshalJSON([]byte(in))
		if err == nil {
			t.Errorf("UnmarshalJSON(%q) succeeded, want error", in)
			continue
		}
		if !errors.Is(err, seal.ErrInvalidCredential) {
			t.Errorf("UnmarshalJSON(%q) = %v, want ErrInvalidCredential", in, err)
		}
		if strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "CANARY") {
			t.Errorf("UnmarshalJSON error leaks the secret: %v", err)
		}
		if c != (seal.Credential{}) {
			t.Errorf("UnmarshalJSON(%q) failed but modified the credential", in)
		}
		// Through encoding/json too (it may wrap our error).
		var wrapped struct{ Credential seal.Credential }
		if err := json.Unmarshal([]byte(`{"Credential":`+in+`}`), &wrapped); err != nil && strings.Contains(err.Error(), canary) {
			t.Errorf("json.Unmarshal error leaks the secret: %v", err)
		}
	}
}

func TestCredentialValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		c    seal.Credential
		want bool
	}{
		{seal.Credential{Type: "bearer", Token: canary}, true},
		{seal.Credential{Type: "header", Name: "X-Api-Key", Value: canary}, true},
		{seal.Credential{Type: "header", Name: "X-Api-Key", Value: canary + "\tok"}, true},
		{seal.Credential{}, false},
		{seal.Credential{Type: "bearer"}, false},
		{seal.Credential{Type: "bearer", Token: canary, Value: canary}, false},
		{seal.Credential{Type: "bearer", Token: canary + "\n"}, false},
		{seal.Credential{Type: "bearer", Token: strings.Repeat("a", 4000)}, false},
		{seal.Credential{Type: "header", Name: "X-Api-Key"}, false},
		{seal.Credential{Type: "header", Name: "X-Api-Key", Value: canary, Token: canary}, false},
		{seal.Credential{Type: "header", Name: "X Api", Value: canary}, false},
		{seal.Credential{Type: "header", Name: canary + ":", Value: canary}, false},
		{seal.Credential{Type: "header", Name: "X-Api-Key", Value: canary + "\x00"}, false},
		{seal.Credential{Type: "header", Name: "X-Api-Key", Value: canary + "\x7f"}, false},
		{seal.Credential{Type: "header", Name: "Transfer-Encoding", Value: canary}, false},
		{seal.Credential{Type: "header", Name: "mcp-protocol-version", Value: canary}, false},
		{seal.Credential{Type: "header", Name: "Proxy-Authorization", Value: canary}, false},
		{seal.Credential{Type: canary, Token: canary}, false},
	}
	for i, tc := range cases {
		err := tc.c.Validate()
		if (err == nil) != tc.want {
			t.Errorf("case %d: Validate(%v) = %v, want ok=%v", i, tc.c, err, tc.want)
		}
		if err != nil {
			if !errors.Is(err, seal.ErrInvalidCredential) {
				t.Errorf("case %d: Validate = %v, want ErrInvalidCredential", i, err)
			}
			if strings.Contains(err.Error(), "CANARY") {
				t.Errorf("case %d: Validate error leaks the secret: %v", i, err)
			}
		}
	}
}

func TestCredentialApply(t *testing.T) {
	t.Parallel()
	cases := []struct {
		c    seal.Credential
		want http.Header
	}{
		{seal.Credential{Type: "bearer", Token: "tok"}, http.Header{"Authorization": {"Bearer tok"}}},
		{seal.Credential{Type: "header", Name: "x-api-key", Value: "v"}, http.Header{"X-Api-Key": {"v"}}},
		{seal.Credential{Type: "header", Name: "Host", Value: "evil"}, http.Header{}},
		{seal.Credential{Type: "bearer"}, http.Header{}},
		{seal.Credential{}, http.Header{}},
	}
	for _, tc := range cases {
		h := http.Header{}
		tc.c.Apply(h)
		if diff := cmp.Diff(tc.want, h); diff != "" {
			t.Errorf("Apply(%v) headers (-want +got):\n%s", tc.c, diff)
		}
	}
	seal.Credential{Type: "bearer", Token: "tok"}.Apply(nil) // must not panic
}

func FuzzCredentialUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"type":"bearer","token":"` + canary + `"}`,
		`{"type":"header","name":"X-Api-Key","value":"` + canary + `"}`,
		`{"type":"bearer","token":"` + canary + `","x":1}`,
		`{"type":"header","name":"Host","value":"` + canary + `"}`,
		`{"type":"bearer","token":` + canary + `}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var c seal.Credential
		err := c.UnmarshalJSON([]byte(in))
		if err != nil {
			if strings.Contains(err.Error(), canary) {
				t.Fatalf("error leaks the secret: %v", err)
			}
			return
		}
		if verr := c.Validate(); verr != nil {
			t.Fatalf("UnmarshalJSON accepted an invalid credential: %v", verr)
		}
		// Every printed form must not depend on the secret at all.
		other := c
		if other.Token != "" {
			other.Token = "other-token"
		}
		if other.Value != "" {
			other.Value = "other value"
		}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d"} {
			if a, b := fmt.Sprintf(verb, c), fmt.Sprintf(verb, other); a != b {
				t.Fatalf("Sprintf(%q) depends on the secret: %q vs %q", verb, a, b)
			}
		}
		a, _ := json.Marshal(c)
		b, _ := json.Marshal(other)
		if !bytes.Equal(a, b) {
			t.Fatalf("MarshalJSON depends on the secret: %s vs %s", a, b)
		}
	})
}
