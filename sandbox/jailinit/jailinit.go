// Package jailinit is the jail's pid 1: a process of cco's, not
// dumpable (package nodump), that starts the jail's one command and reaps
// every process the jail orphans, and whose end is the jail's. bwrap starts
// it with --as-pid-1, so that bwrap itself never runs in the jail (its own
// pid 1 would be dumpable, hold the launch's environment, and run outside
// the jail's seccomp filter: docs/adr/0110-jail-pid-1.md).
//
// It passes no signal on: the launcher signals the command itself (the
// jail's pid 1's first child, package supervise), as it did bwrap's.
package jailinit

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/cco-dev/cco/sandbox/nodump"
)

// Exit statuses of a command that did not start, as a shell reports them.
const (
	exitCannotRun = 126
	exitNotFound  = 127
)

// Run seals this process, starts argv with env and this process's
// descriptors (every one without close-on-exec, at the same number), reaps
// every child until argv's process ends, and returns its status: its exit
// code, or 128+n when signal n ended it. The caller exits with it, and the
// kernel then ends whatever else still runs in the jail.
func Run(argv, env []string, stderr io.Writer) int {
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "cco jail init: no command to run")
		return exitCannotRun
	}
	if err := nodump.Seal(); err != nil {
		fmt.Fprintf(stderr, "cco jail init: not starting %s: %v\n", argv[0], err)
		return exitCannotRun
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		fmt.Fprintf(stderr, "cco jail init: starting %s: %v\n", argv[0], err)
		if errors.Is(err, syscall.ENOENT) {
			return exitNotFound
		}
		return exitCannotRun
	}
	return reap(pid)
}

// reap waits for every child (the jail's orphans are this process's) until
// pid ends, and returns its status.
func reap(pid int) int {
	for {
		var ws syscall.WaitStatus
		p, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			// ECHILD: pid was never ours to wait for.
			return exitCannotRun
		}
		if p != pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
