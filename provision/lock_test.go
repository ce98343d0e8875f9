package provision

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

// lockHolder is the re-executed test binary: it takes the lock on root,
// says so on stdout, and holds it until it is killed.
func lockHolder(dir string) int {
	r, err := OpenRoot(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	run, err := NewRun(context.Background(), r)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := AcquireLock(run, time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	time.Sleep(time.Hour) // until the test kills it
	return 0
}

// startHolder runs a lock holder in another process and waits until it
// holds the lock.
func startHolder(t *testing.T, r *Root) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=lockholder", "CCO_TEST_ROOT="+r.Dir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("holder said %q, %v", line, err)
	}
	return cmd
}

func TestLockWaitsThenNamesHolder(t *testing.T) {
	r := newRoot(t)
	holder := startHolder(t, r)

	const timeout = 300 * time.Millisecond
	var log strings.Builder
	run := newRun(t, r)
	run.Log = &log
	start := time.Now()
	_, err := AcquireLock(run, timeout)
	waited := time.Since(start)
	if err == nil {
		t.Fatal("a second AcquireLock succeeded while another process held the lock")
	}
	pid := fmt.Sprintf("pid %d", holder.Process.Pid)
	if !strings.Contains(err.Error(), pid) || !strings.Contains(err.Error(), r.HostPath(LockPath)) || !strings.Contains(err.Error(), "--lock-timeout") {
		t.Fatalf("error %q does not name the holder (%s), the lock and the fix", err, pid)
	}
	if waited < timeout {
		t.Fatalf("gave up after %v, before the %v timeout", waited, timeout)
	}
	if !strings.Contains(log.String(), pid) {
		t.Fatalf("the wait was not announced with the holder's pid: %q", log.String())
	}

	// The lock dies with its holder: no stale lock after a SIGKILL.
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	start = time.Now()
	l, err := AcquireLock(newRun(t, r), 5*time.Second)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	defer l.Release()
	if time.Since(start) > time.Second {
		t.Fatalf("took %v to take a lock whose holder is dead", time.Since(start))
	}
}

func TestLockWaitsForRelease(t *testing.T) {
	r := newRoot(t)
	first, err := AcquireLock(newRun(t, r), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const hold = 200 * time.Millisecond
	go func() { time.Sleep(hold); first.Release() }()
	start := time.Now()
	second, err := AcquireLock(newRun(t, r), 5*time.Second)
	if err != nil {
		t.Fatalf("waiting for a release: %v", err)
	}
	second.Release()
	if time.Since(start) < hold {
		t.Fatalf("took the lock after %v while it was held for %v", time.Since(start), hold)
	}
}

func TestLockDryRunCreatesNothing(t *testing.T) {
	r := newRoot(t)
	run := newRun(t, r)
	run.DryRun = true
	l, err := AcquireLock(run, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if names := treehash.List(r.Dir()); len(names) != 0 {
		t.Fatalf("a dry run's lock created %v", names)
	}
}

func TestLockRefusesSymlink(t *testing.T) {
	r := newRoot(t)
	outside := t.TempDir() + "/planted"
	os.MkdirAll(r.HostPath(StateDir), 0o755)
	os.Symlink(outside, r.HostPath(LockPath))
	if _, err := AcquireLock(newRun(t, r), time.Second); err == nil || !strings.Contains(err.Error(), r.HostPath(LockPath)) {
		t.Fatalf("AcquireLock through a symlink: %v, want an error naming the lock", err)
	}
	if _, err := os.Lstat(outside); err == nil {
		t.Fatal("the lock followed a symlink and created a file outside the root")
	}
}

// Two runs at once, each installing a different file: both wait their turn
// and the receipt keeps both entries (each run reloads it once it holds the
// lock, so the second does not save over the first's entries).
func TestLockNoLostUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reload bool // also call Run.Reload, as cco-install does
	}{{"AcquireLock alone", false}, {"AcquireLock then Reload", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var loaded, wg sync.WaitGroup
			loaded.Add(2)
			errs := make(chan error, 2)
			for i, name := range []string{"one", "two"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- func() error {
						r, err := OpenRoot(dir)
						if err != nil {
							return err
						}
						defer r.Close()
						run, err := NewRun(context.Background(), r)
						loaded.Done()
						if err != nil {
							return err
						}
						loaded.Wait() // both read the (empty) receipt before either locks
						time.Sleep(time.Duration(i) * 20 * time.Millisecond)
						l, err := AcquireLock(run, 10*time.Second)
						if err != nil {
							return err
						}
						defer l.Release()
						if tc.reload {
							if err := run.Reload(); err != nil {
								return err
							}
						}
						f := toolStep()
						f.StepID, f.Path = "test."+name, "/usr/local/bin/"+name
						rep := Execute(run, []Step{f})
						if rep.ExitCode() != ExitOK || rep.Changed != 1 {
							return fmt.Errorf("%s: %+v", name, rep.Steps)
						}
						time.Sleep(50 * time.Millisecond) // overlap: the other run waits
						return nil
					}()
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			r, _ := OpenRoot(dir)
			defer r.Close()
			rc := loadReceipt(t, r)
			for _, p := range []string{"/usr/local/bin/one", "/usr/local/bin/two"} {
				if rc.Paths[p] == nil {
					t.Errorf("the receipt lost %s: %v", p, rc.Paths)
				}
			}
			if rc.Dirs[StateDir].Step == "" {
				t.Errorf("the receipt does not record %s, which the lock created: %v", StateDir, rc.Dirs)
			}
		})
	}
}
