//go:build !linux

package schemaguard

import "time"

// threadCPU is unavailable here: pattern time is then wall time.
func threadCPU() (time.Duration, bool) { return 0, false }
