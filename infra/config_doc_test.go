package infra

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var envName = regexp.MustCompile(`"(FLUIDBOX_[A-Z0-9_]+)"`)

// TestReadmeConfiguration: every FLUIDBOX_ variable the product reads
// (non-test code outside shared/internal) is a row of the README's
// Configuration table, and every FLUIDBOX_ variable the table names is
// read somewhere.
func TestReadmeConfiguration(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no Configuration section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(FLUIDBOX_[A-Z0-9_]+)`").FindAllStringSubmatch(table, -1) {
		documented[m[1]] = true
	}
	read := map[string]string{}
	for _, root := range []string{"../shared", "../cmd", "../functions"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "internal" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range envName.FindAllStringSubmatch(string(b), -1) {
				read[m[1]] = path
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, path := range read {
		if !documented[name] {
			t.Errorf("%s (read in %s) is not in README.md's Configuration table", name, path)
		}
	}
	for name := range documented {
		if _, ok := read[name]; !ok {
			t.Errorf("README.md's Configuration table names %s, which no code reads", name)
		}
	}
}
