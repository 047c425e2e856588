package rie

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// procStat is the part of /proc/<pid>/stat we need.
type procStat struct {
	pid, ppid, pgid int
	state           byte
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// Format: pid (comm) state ppid pgrp ...; comm may contain spaces and
	// parentheses, so split after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0]}, true
}

// descendants lists the live processes below pid.
func descendants(pid int) []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procStat{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(p); ok {
			children[st.ppid] = append(children[st.ppid], st)
		}
	}
	var out []procStat
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// descendantGroups returns the process groups of pid's descendants that
// differ from pid's own group. The emulator starts the runtime with
// Setpgid, so killing the emulator's group alone would orphan it.
func descendantGroups(pid int) []int {
	seen := map[int]bool{pid: true}
	var out []int
	for _, d := range descendants(pid) {
		if !seen[d.pgid] {
			seen[d.pgid] = true
			out = append(out, d.pgid)
		}
	}
	return out
}

// processGone reports whether pid no longer runs. A zombie counts as gone:
// it executes nothing, and an orphan's reaping is up to init.
func processGone(pid int) bool {
	st, ok := readStat(pid)
	return !ok || st.state == 'Z' || st.state == 'X'
}

// waitGroupGone waits, bounded, until the leader of group g is gone.
func waitGroupGone(g int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for !processGone(g) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}
