//go:build !linux

package main

import (
	"context"
	"errors"
)

const runnerEnv = ""

// runnerCmd: the runner drops to another user and enters Linux
// namespaces; it runs in its Linux sandbox (the runner image, the local
// launcher), nowhere else.
func runnerCmd(context.Context, []string, cmdEnv) error {
	return errors.New("fluidbox runner runs on Linux only (the runner image, or fluidbox dev --launcher local on Linux)")
}
