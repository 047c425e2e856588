package infra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// aslState is the part of an ASL state these checks read.
type aslState struct {
	Type          string         `json:"Type"`
	Next          string         `json:"Next"`
	Default       string         `json:"Default"`
	End           bool           `json:"End"`
	Resource      string         `json:"Resource"`
	TimestampPath string         `json:"TimestampPath"`
	Parameters    map[string]any `json:"Parameters"`
	Retry         []struct {
		ErrorEquals []string `json:"ErrorEquals"`
		MaxAttempts *int     `json:"MaxAttempts"`
		BackoffRate float64  `json:"BackoffRate"`
	} `json:"Retry"`
	Catch []struct {
		ErrorEquals []string `json:"ErrorEquals"`
		Next        string   `json:"Next"`
	} `json:"Catch"`
	Choices []struct {
		Next string `json:"Next"`
	} `json:"Choices"`
}

func loadASL(t *testing.T, f string) (string, map[string]aslState) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var sm struct {
		StartAt string              `json:"StartAt"`
		States  map[string]aslState `json:"States"`
	}
	if err := json.Unmarshal(b, &sm); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return sm.StartAt, sm.States
}

// TestStateMachineWiring: every Catch and Choice goes to a state, every state is
// reachable from StartAt, every Task retries with backoff and catches, and
// every path ends (End, Succeed or Fail).
func TestStateMachineWiring(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("*.asl.json")
	for _, f := range files {
		start, states := loadASL(t, f)
		reached := map[string]bool{}
		var walk func(string)
		walk = func(name string) {
			st, ok := states[name]
			if !ok || reached[name] {
				return
			}
			reached[name] = true
			for _, c := range st.Catch {
				if _, ok := states[c.Next]; !ok {
					t.Errorf("%s: %s catches to unknown state %q", f, name, c.Next)
				}
				walk(c.Next)
			}
			for _, c := range st.Choices {
				if _, ok := states[c.Next]; !ok {
					t.Errorf("%s: %s chooses unknown state %q", f, name, c.Next)
				}
				walk(c.Next)
			}
			walk(st.Next)
			walk(st.Default)
		}
		walk(start)
		for name, st := range states {
			if !reached[name] {
				t.Errorf("%s: state %s is unreachable from StartAt", f, name)
			}
			terminal := st.Type == "Succeed" || st.Type == "Fail" || st.Type == "Choice"
			if !terminal && !st.End && st.Next == "" {
				t.Errorf("%s: state %s neither ends nor has Next", f, name)
			}
			if st.Type != "Task" {
				continue
			}
			if !strings.HasPrefix(st.Resource, "arn:aws:states:::") {
				t.Errorf("%s: task %s resource %q, want a service integration arn:aws:states:::...", f, name, st.Resource)
			}
			if len(st.Retry) == 0 || len(st.Catch) == 0 {
				t.Errorf("%s: task %s needs Retry and Catch", f, name)
			}
			for i, r := range st.Retry {
				if r.MaxAttempts == nil || *r.MaxAttempts < 2 || r.BackoffRate <= 1 {
					t.Errorf("%s: task %s Retry[%d]: want MaxAttempts >= 2 and BackoffRate > 1", f, name, i)
				}
			}
		}
	}
}

// TestApprovalExpiryDefinition pins what shared/expiry relies on: wait on
// the input's expires_at, then invoke the expire function with
// {approval_id}, retrying, and fail visibly when every attempt failed.
func TestApprovalExpiryDefinition(t *testing.T) {
	t.Parallel()
	start, states := loadASL(t, "approval-expiry.asl.json")
	wait := states[start]
	if wait.Type != "Wait" || wait.TimestampPath != "$.expires_at" {
		t.Fatalf("StartAt %s = %+v, want a Wait on TimestampPath $.expires_at", start, wait)
	}
	task := states[wait.Next]
	if task.Type != "Task" || task.Resource != "arn:aws:states:::lambda:invoke" || !task.End {
		t.Fatalf("after the wait: %+v, want the final lambda:invoke Task", task)
	}
	if task.Parameters["FunctionName"] != "${ExpireFunctionArn}" {
		t.Errorf("FunctionName = %v, want ${ExpireFunctionArn}", task.Parameters["FunctionName"])
	}
	payload, _ := task.Parameters["Payload"].(map[string]any)
	if len(payload) != 1 || payload["approval_id.$"] != "$.approval_id" {
		t.Errorf("Payload = %v, want exactly {approval_id.$: $.approval_id}", payload)
	}
	var retriesAll bool
	for _, r := range task.Retry {
		retriesAll = retriesAll || slices.Contains(r.ErrorEquals, "States.ALL")
	}
	if !retriesAll {
		t.Error("the expire task does not retry its own errors (States.ALL): ErrNotDue relies on it")
	}
	if len(task.Catch) != 1 || states[task.Catch[0].Next].Type != "Fail" || !slices.Equal(task.Catch[0].ErrorEquals, []string{"States.ALL"}) {
		t.Errorf("Catch = %+v, want States.ALL to a Fail state", task.Catch)
	}
}
