package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSampleEvents posts every sample event in events/ through the real
// emulator and the built bootstrap, and checks the status each one is for.
func TestSampleEvents(t *testing.T) {
	if err := os.Chdir("../../.."); err != nil { // the repository root
		t.Fatal(err)
	}
	want := map[string]int{
		"events/control/healthz.json":                       200,
		"events/control/create-policy.json":                 201,
		"events/control/create-session.json":                201,
		"events/control/list-capabilities.json":             200,
		"events/control/create-session-unknown-policy.json": 400,
	}
	files, _ := filepath.Glob("events/control/*.json")
	if len(files) != len(want) {
		t.Fatalf("events/control has %d files, the test knows %d: add the new ones here", len(files), len(want))
	}
	for _, f := range files {
		var out, errs bytes.Buffer
		if err := run(context.Background(), []string{"-fn", "control", "-event", f}, &out, &errs); err != nil {
			t.Fatalf("invoke %s: %v\n%s", f, err, errs.String())
		}
		var resp struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
			t.Fatalf("invoke %s printed %q: %v", f, out.String(), err)
		}
		if resp.StatusCode != want[f] {
			t.Errorf("invoke %s = %d %s, want %d", f, resp.StatusCode, resp.Body, want[f])
		}
	}
}
