package provision

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockPath is the installer's lock on the target system.
const LockPath = StateDir + "/lock"

// Lock is a held flock on the target's lock file.
type Lock struct{ f *os.File }

// AcquireLock takes the installer's lock, waiting up to timeout for another
// run to finish. The holder writes its pid into the file so that a waiter's
// error can name it. The lock dies with the process (flock), so a killed run
// never leaves a stale lock behind.
func AcquireLock(run *Run, timeout time.Duration) (*Lock, error) {
	if err := run.MkdirAll(StateDir, 0o755, "state"); err != nil {
		return nil, err
	}
	p, done, err := run.Root.at(LockPath)
	if err != nil {
		return nil, err
	}
	defer done()
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock %s: %w", run.Root.HostPath(LockPath), unwrapPath(err))
	}
	deadline := time.Now().Add(timeout)
	announced := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", run.Root.HostPath(LockPath), err)
		}
		holder := readHolder(p)
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another cco-install (pid %s) holds %s: waited %s; wait for it to finish, or raise --lock-timeout", holder, run.Root.HostPath(LockPath), timeout)
		}
		if !announced {
			run.Logf("waiting for another cco-install (pid %s) to finish (up to %s)", holder, timeout)
			announced = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

func readHolder(p string) string {
	b, err := os.ReadFile(p)
	if s := strings.TrimSpace(string(b)); err == nil && s != "" {
		return s
	}
	return "unknown"
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Release drops the lock.
func (l *Lock) Release() {
	if l != nil && l.f != nil {
		l.f.Close()
	}
}
