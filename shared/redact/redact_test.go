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
			if f.Type.Kind() != reflect.String || f.Type == reflect.TypeOf(redact.Digest("")) {
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
