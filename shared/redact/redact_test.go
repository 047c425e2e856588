package redact_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/redact"
)

// TestEnvelopeIsSealed: an Envelope has no exported field, so code outside
// this package can only get one from New; the zero value is not valid; and
// it cannot be filled from JSON.
func TestEnvelopeIsSealed(t *testing.T) {
	typ := reflect.TypeOf(redact.Envelope{})
	for i := range typ.NumField() {
		if f := typ.Field(i); f.IsExported() {
			t.Errorf("Envelope.%s is exported", f.Name)
		}
	}
	if (redact.Envelope{}).Valid() {
		t.Error("the zero Envelope is valid")
	}
	var env redact.Envelope
	if err := json.Unmarshal([]byte(`{"typ":"tool.decision","data":"eyJ4IjoxfQ=="}`), &env); err == nil && env.Valid() {
		t.Error("an Envelope was filled from JSON")
	}
	if _, ok := any(&env).(json.Unmarshaler); ok {
		t.Error("Envelope implements json.Unmarshaler")
	}
}

// TestEventsHaveNoPayloadFields: no event type has a field that could carry
// a tool input or result, a prompt, a token or a credential.
func TestEventsHaveNoPayloadFields(t *testing.T) {
	events := []any{
		redact.SessionCreated{}, redact.SessionEnded{}, redact.ToolRequested{}, redact.ToolDecision{},
		redact.ApprovalRequested{}, redact.ApprovalDecided{}, redact.ToolBrokered{}, redact.BudgetReserved{},
		redact.BudgetReconciled{}, redact.GrantRevoked{},
	}
	banned := []string{"input", "result", "prompt", "token", "credential", "secret", "content", "command", "body"}
	for _, ev := range events {
		typ := reflect.TypeOf(ev)
		for i := range typ.NumField() {
			f := typ.Field(i)
			name := strings.ToLower(f.Name)
			if f.Type.Kind() != reflect.String || f.Type == reflect.TypeOf(redact.Digest{}) {
				continue // counts, flags and digests cannot carry content
			}
			for _, b := range banned {
				if strings.Contains(name, b) {
					t.Errorf("%s.%s looks like a payload field", typ.Name(), f.Name)
				}
			}
		}
	}
}

func TestNewDigestsNotContent(t *testing.T) {
	d, err := redact.DigestJSON(map[string]any{"command": "CANARY"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := redact.New(redact.ToolRequested{ToolCallID: "c", ToolName: "Bash", InputDigest: d})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env.Data()), "CANARY") || !env.Valid() || env.Type() != redact.TypeToolRequested {
		t.Fatalf("envelope = %s %s", env.Type(), env.Data())
	}
}

// TestDigestOnlyByHashing: a Digest has no exported field, so text cannot
// be converted into one; the only way in besides hashing is ParseDigest,
// which takes nothing but the shape hashing produces.
func TestDigestOnlyByHashing(t *testing.T) {
	typ := reflect.TypeOf(redact.Digest{})
	if typ.Kind() != reflect.Struct {
		t.Fatalf("Digest is a %s, want a struct (a string type converts from any text)", typ.Kind())
	}
	for i := range typ.NumField() {
		if typ.Field(i).IsExported() {
			t.Errorf("Digest.%s is exported", typ.Field(i).Name)
		}
	}
	d := redact.DigestBytes([]byte("x"))
	got, err := redact.ParseDigest(d.String())
	if err != nil || got != d {
		t.Errorf("ParseDigest(%s) = %v, %v", d, got, err)
	}
	b, err := json.Marshal(redact.ToolRequested{InputDigest: d})
	if err != nil || !strings.Contains(string(b), `"input_digest":"`+d.String()+`"`) {
		t.Errorf("marshal = %s, %v", b, err)
	}
	for _, bad := range []string{
		"", "sha256:", "Bearer sk-live-abc", "sha256:" + strings.Repeat("A", 64),
		"sha256:" + strings.Repeat("a", 63), "sha256:" + strings.Repeat("a", 65),
		"sha256:" + strings.Repeat("a", 60) + "sk-l", "md5:" + strings.Repeat("a", 64),
	} {
		if got, err := redact.ParseDigest(bad); err == nil || !got.IsZero() {
			t.Errorf("ParseDigest(%q) = %v, %v; want ErrNotDigest", bad, got, err)
		}
	}
}

// TestToolRequestedAgent: a subagent's call is recorded with the
// subagent's identity as Claude Code's hook input gives it; the main
// agent's calls carry neither field.
func TestToolRequestedAgent(t *testing.T) {
	d := redact.DigestBytes([]byte("x"))
	env, err := redact.New(redact.ToolRequested{ToolCallID: "c", ToolName: "Bash", InputDigest: d, AgentID: "a1b2", AgentType: "Explore"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(env.Data()); !strings.Contains(got, `"agent_id":"a1b2"`) || !strings.Contains(got, `"agent_type":"Explore"`) {
		t.Errorf("tool.requested of a subagent = %s, want agent_id and agent_type", got)
	}
	main, err := redact.New(redact.ToolRequested{ToolCallID: "c", ToolName: "Bash", InputDigest: d})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(main.Data()); strings.Contains(got, "agent_") {
		t.Errorf("tool.requested of the main agent = %s, want no agent fields", got)
	}
}
