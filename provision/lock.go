package provision

import (
	"context"
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
// run to finish; a waiter's error names the holder's pid. The lock dies with
// the process (flock), so a killed run never leaves a stale lock behind.
//
// Once it holds the lock it reloads run's receipt: a receipt read before the
// lock is stale if another run saved while this one waited, and saving it
// would lose that run's entries. A dry run takes no lock and creates nothing.
func AcquireLock(run *Run, timeout time.Duration) (*Lock, error) {
	if run.DryRun {
		return &Lock{}, nil
	}
	// Recorded at the next save rather than now: the receipt is reloaded
	// below, and callers may reload it again.
	created, err := run.Root.MkdirAll(StateDir, 0o755, SystemUID(), SystemGID())
	run.lockDirs = append(run.lockDirs, created...)
	if err != nil {
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
		holder := holderPID(int(f.Fd()))
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another cco-install (pid %s) holds %s: waited %s; wait for it to finish, or raise --lock-timeout", holder, run.Root.HostPath(LockPath), timeout)
		}
		if !announced {
			run.Logf("waiting for another cco-install (pid %s) to finish (up to %s)", holder, timeout)
			announced = true
		}
		if err := sleepCtx(run.Ctx, 50*time.Millisecond); err != nil {
			f.Close()
			return nil, fmt.Errorf("stopped while waiting for another cco-install (pid %s) to release %s: %w", holder, run.Root.HostPath(LockPath), err)
		}
	}
	if err := run.Reload(); err != nil {
		f.Close()
		return nil, err
	}
	return &Lock{f: f}, nil
}

// sleepCtx waits d, or until ctx ends (a signal): its error then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		time.Sleep(d)
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// holderPID finds the process holding the flock on fd's file in /proc/locks.
// Nothing is written into the lock file, so a no-op run leaves the tree
// byte-identical.
func holderPID(fd int) string {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return "unknown"
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return "unknown"
	}
	// "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
	want := ":" + strconv.FormatUint(st.Ino, 10)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && strings.HasSuffix(f[5], want) {
			return f[4]
		}
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
