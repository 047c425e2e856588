package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunnerLayoutStep runs the runner image's build step (runner/Dockerfile:
// `fluidbox runner --layout`) on a scratch tree: the agent's workspace and
// home are its own, 0700; the managed settings' directory is root's, 0755.
// The agent's user may not be root.
func TestRunnerLayoutStep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the layout hands directories to another user")
	}
	t.Parallel()
	dir := t.TempDir()
	args := []string{"runner", "--layout", "--user", "nobody", "--workdir", filepath.Join(dir, "workspace"),
		"--home", filepath.Join(dir, "home", "agent"), "--managed-settings", filepath.Join(dir, "etc", "claude-code", "managed-settings.json")}
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("runner --layout = %d: %s", code, errb.String())
	}
	for path, want := range map[string]struct {
		mode os.FileMode
		uid  uint32
	}{
		"workspace":       {0o700, 65534},
		"home/agent":      {0o700, 65534},
		"etc/claude-code": {0o755, 0},
	} {
		fi, err := os.Stat(filepath.Join(dir, path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want.mode || fi.Sys().(*syscall.Stat_t).Uid != want.uid {
			t.Errorf("%s: mode %v, uid %d; want %v, %d", path, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, want.mode, want.uid)
		}
	}
	if code := run(context.Background(), []string{"runner", "--layout", "--user", "root", "--workdir", filepath.Join(dir, "w2")},
		func(string) string { return "" }, strings.NewReader(""), &out, &errb); code == 0 {
		t.Error("runner --layout --user root succeeded")
	}
}
