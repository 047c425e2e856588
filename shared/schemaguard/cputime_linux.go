//go:build linux

package schemaguard

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used; the
// caller has locked its goroutine to the thread.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
