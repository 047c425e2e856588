//go:build unix

package rie

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// RIEPackage is the emulator's main package, pinned by the `tool` line in
// go.mod.
const RIEPackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// BuildRIE builds the emulator pinned in go.mod for this host into
// outDir/aws-lambda-rie and returns its path. It is a plain `go build`
// (CGO_ENABLED=0) run from the current directory, which must be inside the
// module; the Go build cache makes repeated calls cheap. (`go tool -n` would
// name a binary inside the build cache, which `go clean -cache` or cache
// trimming may delete under a running test; a file in outDir is ours.)
func BuildRIE(ctx context.Context, outDir string) (string, error) {
	out := filepath.Join(outDir, "aws-lambda-rie")
	err := goBuild(ctx, out, []string{
		"CGO_ENABLED=0", "GOOS=" + runtime.GOOS, "GOARCH=" + runtime.GOARCH,
	}, "-trimpath", RIEPackage)
	if err != nil {
		return "", fmt.Errorf("rie: build emulator: %w", err)
	}
	return out, nil
}

// BuildFunction builds the Lambda main package pkg (an import path, or a
// path relative to the current directory such as ./functions/gate) into
// outDir/bootstrap the way it is deployed: static, linux, -tags
// lambda.norpc, -trimpath, stripped. GOARCH is the host's so the emulator
// can run it here; the deployed arm64 build differs only in GOARCH.
func BuildFunction(ctx context.Context, pkg, outDir string) (string, error) {
	out := filepath.Join(outDir, "bootstrap")
	err := goBuild(ctx, out, []string{
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH,
	}, "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", pkg)
	if err != nil {
		return "", fmt.Errorf("rie: build function %s: %w", pkg, err)
	}
	return out, nil
}

// goBuild runs `go build -o out args...` with env on top of ours. Under
// `go test` the go command puts its own GOROOT/bin first on PATH, so "go"
// is the toolchain running the test.
func goBuild(ctx context.Context, out string, env []string, args ...string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", out}, args...)...)
	cmd.Env = mergeEnv(os.Environ(), env)
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, output.String())
	}
	return nil
}
