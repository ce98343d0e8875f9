// Package jailinit is the jail's pid 1: a process of cco's, not
// dumpable (package nodump), that starts the jail's one command and reaps
// every process the jail orphans, and whose end is the jail's. bwrap starts
// it with --as-pid-1, so that bwrap itself never runs in the jail (its own
// pid 1 would be dumpable, hold the launch's environment, and run outside
// the jail's seccomp filter: docs/adr/0110-jail-pid-1.md).
//
// It passes no signal on: the launcher signals the command itself (the
// jail's pid 1's first child, package supervise), as it did bwrap's.
//
// Where cco's own engine builds the jail, its child replaces itself with
// this init (the plain launch) or with the in-jail helper as pid 1, which
// reaps with Adopt and Start (reaper.go); either writes the status
// stream's exit-code line (Status).
package jailinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/sandbox/nodump"
	"github.com/cco-dev/cco/sandbox/supervise"
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

// Status is the launcher's status stream, where cco's engine made the jail
// and exec'd its pid 1 with the stream's descriptor: pid 1 writes the
// exit-code line bwrap writes otherwise. A nil Status writes nothing.
type Status struct{ f *os.File }

// TakeStatus takes a leading --status-fd N from args: the status stream,
// which only the jail's pid 1 is given; nil without one.
func TakeStatus(args []string) (*Status, []string, error) {
	if len(args) < 2 || args[0] != "--status-fd" {
		return nil, args, nil
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 3 {
		return nil, nil, fmt.Errorf("--status-fd %q is not a descriptor (cco's jail engine passes it)", args[1])
	}
	if os.Getpid() != 1 {
		return nil, nil, fmt.Errorf("--status-fd is for the jail's pid 1, not pid %d (cco's jail engine passes it)", os.Getpid())
	}
	s, err := openStatus(n)
	return s, args[2:], err
}

// openStatus takes descriptor fd as the status stream; no command pid 1
// starts inherits it.
func openStatus(fd int) (*Status, error) {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return nil, fmt.Errorf("the status descriptor %d: %w", fd, err)
	}
	unix.CloseOnExec(fd)
	return &Status{f: os.NewFile(uintptr(fd), "status")}, nil
}

// Exited says that the command ran and ended with code.
func (s *Status) Exited(code int) {
	if s == nil {
		return
	}
	s.f.WriteString(supervise.ExitCodeLine(code))
	s.f.Close()
}
