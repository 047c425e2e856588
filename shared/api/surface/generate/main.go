// Command generate writes docs/openapi.yaml's paths, template.yaml's Api
// events and docs/api.md's route index from the route rows
// (shared/api.Surface). `go generate ./shared/api` runs it; with -check it
// writes nothing and exits 1 when a file is not current.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/api/surface"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "write nothing; exit 1 when a generated file is not current")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(root, name)) }
	out, err := surface.Generate(api.Surface(), read)
	if err != nil {
		return err
	}
	var stale []string
	for _, name := range slices.Sorted(maps.Keys(out)) {
		cur, err := read(name)
		if err != nil {
			return err
		}
		if bytes.Equal(cur, out[name]) {
			continue
		}
		stale = append(stale, name)
		if !check {
			if err := os.WriteFile(filepath.Join(root, name), out[name], 0o644); err != nil {
				return err
			}
		}
	}
	if check && len(stale) > 0 {
		return fmt.Errorf("not current: %v (run go generate ./shared/api)", stale)
	}
	return nil
}
