package supervise

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// The jail's process tree, as the launcher reads it on the host: the jail's
// pid 1 (bwrap's child, whose host pid bwrap reports) is cco's init, its
// first child the command bwrap was given (the helper, or the agent
// itself), and on a terminal the helper's first child is the agent. A
// process the jail orphans becomes another child of pid 1, started after
// these (it descends from them).

// firstChild is pid's earliest started child on the host, or 0. Each
// thread has children of its own (/proc/PID/task/TID/children), and a Go
// program forks from any of its threads: all are read.
func firstChild(pid int) int {
	if pid <= 0 {
		return 0
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	first, firstStart := 0, uint64(0)
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			st, ok := startTime(n)
			if ok && (first == 0 || st < firstStart || st == firstStart && n < first) {
				first, firstStart = n, st
			}
		}
	}
	return first
}

// startTime is pid's start time (field 22 of /proc/PID/stat), in clock
// ticks since boot.
func startTime(pid int) (uint64, bool) {
	f := statFields(pid)
	if len(f) < 20 {
		return 0, false
	}
	// f[0] is the state, field 3; the start time is field 22.
	n, err := strconv.ParseUint(f[19], 10, 64)
	return n, err == nil
}

// statFields are /proc/PID/stat's fields after the command (which may
// hold spaces and parentheses): the state first.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// TerminalAgentStopped reports whether the agent a terminal launch runs
// has stopped: the leader of its terminal's foreground process group
// (foreground, a host pid) is the agent and is stopped. The helper starts
// the agent as the leader of that group. Where bwrap built the jail, the
// helper is pid 1's first child and the agent the helper's child: none of
// the session's processes is the helper's child. Where cco's engine built
// it (helperIsPID1), the helper is pid 1 and the agent its first child: a
// process the session orphans is a later child of pid 1, and cannot pass
// for it.
func TerminalAgentStopped(pid1, foreground int, helperIsPID1 bool) bool {
	if foreground <= 0 {
		return false
	}
	helper := pid1
	if helperIsPID1 {
		if firstChild(pid1) != foreground {
			return false
		}
	} else if helper = firstChild(pid1); helper == 0 {
		return false
	}
	f := statFields(foreground)
	// f[1] is the parent (field 4), f[2] the process group (field 5).
	return len(f) > 2 && f[0] == "T" && f[1] == strconv.Itoa(helper) && f[2] == strconv.Itoa(foreground)
}

// Exited reports whether pid has ended and waits to be reaped (state Z in
// its host /proc/PID/stat).
func Exited(pid int) bool {
	if pid <= 0 {
		return false
	}
	f := statFields(pid)
	return len(f) > 0 && f[0] == "Z"
}

// Stopped reports whether pid is stopped by a signal (state T in its
// host /proc/PID/stat): a process stopped under a tracer (t) or running
// is not.
func Stopped(pid int) bool {
	if pid <= 0 {
		return false
	}
	f := statFields(pid)
	return len(f) > 0 && f[0] == "T"
}
