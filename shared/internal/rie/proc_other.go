//go:build unix && !linux

package rie

import (
	"errors"
	"syscall"
	"time"
)

// Without /proc, descendants cannot be listed: only the emulator's own
// process group is signalled.
func descendantGroups(int) []int { return nil }

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func waitGroupGone(g int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for !processGone(g) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}
