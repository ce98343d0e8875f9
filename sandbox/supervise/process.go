// Package supervise is the host side of a running jail: bwrap's pidfd, its
// --json-status-fd stream, the signals passed on to the agent, and the
// exit status (with the diagnosis of a jail that failed to build). It knows
// nothing of how the jail was planned, so the launcher's protocol stays in
// package sandbox.
package supervise

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Process is a child waited for and signalled through a pidfd where the
// kernel has them: waiting then goes through the runtime's poller, so the
// launcher's thread is not held in a blocking system call for the whole
// session (the runtime would start another to stand in for it), and a
// signal cannot reach a process that reused the pid.
type Process struct {
	Pid int
	fd  *os.File // the pidfd, or nil
}

// Open takes pid's pidfd (the kernel may have none: then the pid is used).
func Open(pid int) *Process {
	p := &Process{Pid: pid}
	if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
		p.fd = os.NewFile(uintptr(fd), "pidfd")
	}
	return p
}

// Close releases the pidfd.
func (p *Process) Close() {
	if p.fd != nil {
		p.fd.Close()
	}
}

// Signal sends s to the process, if it is still there to get it (once the
// pidfd is closed, the process was reaped: nothing is sent).
func (p *Process) Signal(s syscall.Signal) {
	if p.fd == nil {
		syscall.Kill(p.Pid, s)
		return
	}
	if rc, err := p.fd.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.PidfdSendSignal(int(fd), s, nil, 0) })
	}
}

// Wait reaps the process.
func (p *Process) Wait() (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	if p.fd != nil {
		reaped, werr := false, error(nil)
		if rc, err := p.fd.SyscallConn(); err == nil {
			err = rc.Read(func(uintptr) bool {
				for {
					n, err := syscall.Wait4(p.Pid, &ws, syscall.WNOHANG, nil)
					if err == syscall.EINTR {
						continue
					}
					if n == 0 && err == nil {
						return false // still running: the poller says when it ends
					}
					reaped, werr = true, err
					return true
				}
			})
			if err == nil && reaped {
				return ws, werr
			}
		}
	}
	return Reap(p.Pid)
}

// Reap waits for pid, blocking.
func Reap(pid int) (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return ws, err
		}
	}
}
