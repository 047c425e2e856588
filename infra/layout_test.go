package infra

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayout holds the README's Layout section to the tree: every
// top-level folder, every function and every benchmark is named there,
// and every folder it names at the start of a line exists.
func TestReadmeLayout(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	_, block, _ := strings.Cut(rest, "```\n")
	block, _, _ = strings.Cut(block, "```")

	listed := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.Contains(name, "/") {
			listed[strings.SplitN(name, "/", 2)[0]] = true
		}
	}
	top, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range top {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || !tracked(t, name) {
			continue
		}
		if !listed[name] {
			t.Errorf("README.md Layout does not name %s", name)
		}
		delete(listed, name)
	}
	for name := range listed {
		t.Errorf("README.md Layout names %s, which is not in the tree", name)
	}

	for dir, line := range map[string]string{"functions": "functions/", "bench": "bench/"} {
		section := lineBlock(block, line)
		entries, err := os.ReadDir(filepath.Join("..", dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !regexp.MustCompile(`\b`+regexp.QuoteMeta(e.Name())+`\b`).MatchString(section) {
				t.Errorf("README.md Layout's %s line does not name %s", line, e.Name())
			}
		}
	}
}

// tracked reports whether git knows anything under name (build output and
// local state are in the tree but not in the repository).
func tracked(t *testing.T, name string) bool {
	t.Helper()
	out, err := exec.Command("git", "-C", "..", "ls-files", "--", name).Output()
	if err != nil {
		t.Fatalf("git ls-files %s: %v", name, err)
	}
	return len(out) > 0
}

// lineBlock returns the line of block that starts with prefix and the
// indented lines that continue it.
func lineBlock(block, prefix string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, prefix):
			in = true
		case in && !strings.HasPrefix(line, " "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
