package infra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestStateMachineDefinitionsParse checks every infra/*.asl.json: valid JSON
// with StartAt naming a state and every Next/Default naming a state. Full ASL
// validation is asl-validator's job (npm, offline); this catches the typo that
// would otherwise surface only at deploy.
func TestStateMachineDefinitionsParse(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.asl.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Log("no infra/*.asl.json yet")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sm struct {
			StartAt string                     `json:"StartAt"`
			States  map[string]json.RawMessage `json:"States"`
		}
		if err := json.Unmarshal(b, &sm); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, ok := sm.States[sm.StartAt]; !ok {
			t.Errorf("%s: StartAt %q is not a state", f, sm.StartAt)
		}
		for name, raw := range sm.States {
			var st struct {
				Next    string `json:"Next"`
				Default string `json:"Default"`
			}
			if err := json.Unmarshal(raw, &st); err != nil {
				t.Errorf("%s: state %s: %v", f, name, err)
				continue
			}
			for _, target := range []string{st.Next, st.Default} {
				if _, ok := sm.States[target]; target != "" && !ok {
					t.Errorf("%s: state %s goes to unknown state %q", f, name, target)
				}
			}
		}
	}
}
