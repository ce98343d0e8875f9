// Package keyring starts the jail in a session keyring of its own.
//
// A process inherits its session keyring across fork and exec, and
// possesses every key in it: a login's session keyring holds cifs and AFS
// tokens, ecryptfs keys and Kerberos KEYRING: caches. The launcher forks
// bwrap from a thread that has joined a new, empty session keyring, so no
// process of the jail holds the login's. Joining changes the credentials
// of the calling thread alone: the launcher's other threads, and the shell
// that started it, keep theirs. See docs/adr/0029-what-the-jail-may-ask-of-the-kernel.md.
package keyring

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Fresh runs start on an OS thread of its own whose session keyring is new
// and empty. A process start forks from the calling thread, so whatever
// start forks holds that keyring, and nothing else does. The thread lives
// until end is called, then ends: bwrap's --die-with-parent is the death of
// the thread that forked it, and a thread that ends takes its keyring with
// it, where a thread given back to the runtime would run other goroutines
// in it.
func Fresh(start func() error) (end func(), err error) {
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		// Never unlocked: the goroutine's end is the thread's.
		runtime.LockOSThread()
		if err := join(); err != nil {
			started <- err
			return
		}
		started <- start()
		<-done
	}()
	var once sync.Once
	end = func() { once.Do(func() { close(done) }) }
	if err := <-started; err != nil {
		end()
		return nil, err
	}
	return end, nil
}

// join makes a new anonymous session keyring the calling thread's. A
// kernel without keys (ENOSYS) has nothing the jail could hold.
func join() error {
	_, _, e := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	switch {
	case e == 0 || e == unix.ENOSYS:
		return nil
	case errors.Is(e, unix.EDQUOT):
		return fmt.Errorf("a session keyring of the jail's own: %w (fix: this user holds too many keys: see /proc/key-users, or raise kernel.keys.maxkeys and kernel.keys.maxbytes)", e)
	}
	return fmt.Errorf("a session keyring of the jail's own: keyctl(KEYCTL_JOIN_SESSION_KEYRING): %w (fix: allow keyctl to the launcher: in a container, --security-opt seccomp=unconfined)", e)
}
