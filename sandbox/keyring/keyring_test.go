package keyring

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/keytest"
)

// childEnv makes the test binary report, as a child, the keyring it holds.
const childEnv = "CCO_KEYRING_TEST_CHILD"

func TestMain(m *testing.M) {
	if serial := os.Getenv(childEnv); serial != "" {
		child(serial)
		return
	}
	os.Exit(m.Run())
}

// child prints its session keyring, that keyring's contents, and what a
// read of the key serial gave.
func child(serial string) {
	ses, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	n, _ := strconv.Atoi(serial)
	buf := make([]byte, 256)
	_, rerr := unix.KeyctlBuffer(unix.KEYCTL_READ, n, buf, 0)
	fmt.Printf("session=%d err=%v members=%v read=%v\n", ses, err, keytest.Members(ses), rerr)
}

// TestFresh: what Fresh's start forks holds a new, empty session keyring,
// not the caller's, and cannot read the caller's key; the caller's thread
// keeps its keyring and key, unchanged.
func TestFresh(t *testing.T) {
	k := keytest.Session(t, 0)
	var inside int
	var out bytes.Buffer
	end, err := Fresh(func() error {
		var err error
		if inside, err = unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false); err != nil {
			return err
		}
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(k.Serial))
		c.Stdout, c.Stderr = &out, &out
		return c.Run()
	})
	if err != nil {
		t.Fatal(err)
	}
	end()
	if inside == k.Ring {
		t.Fatalf("start ran in the caller's session keyring %d", k.Ring)
	}
	want := fmt.Sprintf("session=%d err=<nil> members=[] read=%v", inside, unix.EACCES)
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("the child reports %q, want %q", got, want)
	}
	k.Unchanged(t)
	// Another thread of this process never held the new keyring either.
	var other int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		other, _ = unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	}()
	wg.Wait()
	if other == inside {
		t.Errorf("another thread holds the jail's keyring %d", inside)
	}
}

// TestFreshThreadLivesUntilEnd: a child started with a parent-death signal
// (as bwrap's --die-with-parent is) lives until end, and dies after it:
// the thread that forked it lasted exactly that long.
func TestFreshThreadLivesUntilEnd(t *testing.T) {
	var c *exec.Cmd
	end, err := Fresh(func() error {
		c = exec.Command("sleep", "30")
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return c.Start()
	})
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	runtime.GC()
	select {
	case err := <-exited:
		t.Fatalf("the child died before end: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	end()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the child ended with %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		c.Process.Kill()
		t.Fatal("the child outlived end: the forking thread did not end")
	}
}

// TestFreshStartFails: start's error is Fresh's, and the thread ends.
func TestFreshStartFails(t *testing.T) {
	boom := errors.New("boom")
	if _, err := Fresh(func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
}

// BenchmarkFresh is what the keyring costs a launch: a thread of its own
// that joins a new keyring, runs start and ends, against running start on
// the caller's thread (direct).
func BenchmarkFresh(b *testing.B) {
	start := func() error { return nil }
	b.Run("fresh", func(b *testing.B) {
		for range b.N {
			end, err := Fresh(start)
			if err != nil {
				b.Fatal(err)
			}
			end()
		}
	})
	b.Run("direct", func(b *testing.B) {
		for range b.N {
			if err := start(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
