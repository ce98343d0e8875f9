package jailinit

import (
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Where cco's own engine made the jail, the in-jail helper is the jail's
// pid 1 itself (docs/adr/0147-one-program-in-the-jail.md): it runs the
// agent with os/exec (on a pty, beside the egress bridge, as codex's
// app-server) and must reap the jail's orphans meanwhile, without ever
// taking the exit status of a process it waits for itself. Adopt starts
// that reaper; Start starts a command the caller waits for.
//
// The reaper looks at each ended child without reaping it (waitid
// WNOWAIT): one started through Start is left to its owner, whose release
// lets the reaper go on; any other is reaped at once. Start holds the lock
// the reaper takes before it decides, so a command that ends the moment it
// starts is still its owner's.

var reaper struct {
	sync.Mutex
	on    bool
	owned map[int]chan struct{}
	wake  chan struct{}
}

// Adopt makes this process the reaper of every child it did not start
// through Start. Call it once, as pid 1, before anything starts.
func Adopt() {
	reaper.Lock()
	defer reaper.Unlock()
	if reaper.on {
		return
	}
	reaper.on = true
	reaper.owned = map[int]chan struct{}{}
	reaper.wake = make(chan struct{}, 1)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	go reapOrphans(chld)
}

// Start starts cmd; release must be called once its owner has waited for
// it (cmd.Wait, or a wait4 of its pid that saw it end).
func Start(cmd *exec.Cmd) (release func(), err error) {
	reaper.Lock()
	defer reaper.Unlock()
	if err := cmd.Start(); err != nil {
		return func() {}, err
	}
	if !reaper.on {
		return func() {}, nil
	}
	pid, done := cmd.Process.Pid, make(chan struct{})
	reaper.owned[pid] = done
	var once sync.Once
	return func() {
		once.Do(func() {
			reaper.Lock()
			delete(reaper.owned, pid)
			reaper.Unlock()
			close(done)
		})
	}, nil
}

// reapOrphans reaps every ended child that is not owned, at each SIGCHLD and
// whenever an owned child it stopped at was released.
func reapOrphans(chld <-chan os.Signal) {
	for {
		for {
			pid := ended()
			if pid <= 0 {
				break
			}
			reaper.Lock()
			done, owned := reaper.owned[pid]
			if !owned {
				var ws unix.WaitStatus
				unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			}
			reaper.Unlock()
			if owned {
				// waitid shows this child first until its owner has
				// reaped it; the others wait behind it.
				<-done
			}
		}
		<-chld
	}
}

// childInfo is the start of the kernel's siginfo_t for SIGCHLD on a 64-bit
// Linux, as waitid fills it; x/sys's Siginfo leaves the union opaque.
type childInfo struct {
	signo, errno, code int32
	_                  int32
	pid                int32
	uid                uint32
	status             int32
	_                  [100]byte
}

// ended is a child that has ended, left unreaped, or 0 if none has.
func ended() int {
	var info childInfo
	for {
		err := unix.Waitid(unix.P_ALL, 0, (*unix.Siginfo)(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0
		}
		return int(info.pid)
	}
}
