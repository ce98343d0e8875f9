// Package nodump keeps cco's own processes in a jail out of the agent's
// reach: a process that is not dumpable cannot be traced, nor its memory
// read (process_vm_readv, /proc/PID/mem), nor its descriptors taken
// (pidfd_getfd), nor its /proc/PID/environ read, by a process of the same
// user that lacks CAP_SYS_PTRACE, which no process in a jail has.
//
// Every jail engine calls Seal first thing in each process of cco's that
// runs where the agent can see it (the jail's pid 1, the helper). It holds
// until the process calls execve or changes its credentials: the agent,
// once exec'd, is dumpable again, which is its own affair.
package nodump

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Seal makes this process non-dumpable and checks that it is.
func Seal() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	if d, err := Dumpable(); err != nil || d {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0) did not hold (dumpable %v, %v)", d, err)
	}
	return nil
}

// Dumpable reports whether this process is dumpable (PR_GET_DUMPABLE).
func Dumpable() (bool, error) {
	r, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_DUMPABLE, 0, 0)
	if errno != 0 {
		return false, fmt.Errorf("prctl(PR_GET_DUMPABLE): %w", errno)
	}
	return r != 0, nil
}
