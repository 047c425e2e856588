//go:build e2e

package connection_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestInteropLoopbackPreload: under the preload the e2e suites start their
// Node servers with, every form of listen that opens a TCP port binds
// 127.0.0.1, including those that name no port or host at all (which Node
// binds on every interface).
func TestInteropLoopbackPreload(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	preload, err := filepath.Abs("testdata/loopback.cjs")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", "-r", preload, "testdata/listen-forms.js").Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var bound map[string]string
	if err := json.Unmarshal(out, &bound); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	if len(bound) < 11 {
		t.Fatalf("only %d forms reported: %v", len(bound), bound)
	}
	for form, addr := range bound {
		if addr != "127.0.0.1" {
			t.Errorf("%s bound %s, not 127.0.0.1", form, addr)
		}
	}
}
