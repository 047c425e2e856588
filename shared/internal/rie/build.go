//go:build unix

package rie

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// RIEPackage is the emulator's main package, pinned by the `tool` line in
// go.mod.
const RIEPackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// BuildRIE builds the emulator pinned in go.mod for this host into
// outDir/aws-lambda-rie and returns its path (see goBuild for how builds
// are shared).
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

// goBuild runs `go build -o shared args...` with env on top of ours, where
// shared is a file in a directory of the module's .build/rie that only
// this exact build (directory, environment, arguments) writes, then copies
// it to out. Linking a function takes seconds and every test package that
// runs one builds it, so the builds share that file across packages and
// runs: `go build -o` leaves an output whose build ID is current alone,
// and relinks when anything it is built from changed. A lock on the
// directory keeps test packages running in parallel from writing the file
// at once, and each caller runs its own copy, so a later rebuild never
// changes a program that is running.
//
// "go" is the toolchain running the test: under `go test` the go command
// puts its own GOROOT/bin first on PATH. (`go tool -n` would name a binary
// inside the build cache, which `go clean -cache` or cache trimming may
// delete under a running test.)
func goBuild(ctx context.Context, out string, env []string, args ...string) error {
	dir, err := sharedDir(ctx, env, args)
	if err != nil {
		return err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	shared := filepath.Join(dir, filepath.Base(out))
	if err := runGo(ctx, env, append([]string{"build", "-o", shared}, args...)...); err != nil {
		return err
	}
	return copyExecutable(shared, out)
}

// sharedDir is the directory of one build: .build/rie/<digest> under the
// module root, the digest naming the working directory (args may name
// packages relative to it), env and args.
func sharedDir(ctx context.Context, env, args []string) (string, error) {
	var gomod bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "env", "GOMOD")
	cmd.Stdout = &gomod
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(gomod.String())
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range append(append([]string{wd}, env...), args...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	dir := filepath.Join(filepath.Dir(mod), ".build", "rie", hex.EncodeToString(h.Sum(nil))[:16])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// lockDir holds an exclusive lock on dir/.lock until the returned function
// is called. The kernel drops it if the process dies.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func copyExecutable(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

func runGo(ctx context.Context, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = mergeEnv(os.Environ(), env)
	var output bytes.Buffer
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", args[0], err, output.String())
	}
	return nil
}
