// Package testenv holds the test helpers that decide whether a test can run
// here, and a few that several packages' tests share. In CI (CI=true or CCO_REQUIRE_BWRAP=1) a missing prerequisite fails the
// test instead of skipping it: a skipped sandbox test must never count as
// passing.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Strict reports whether missing prerequisites fail rather than skip.
func Strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv("CCO_REQUIRE_BWRAP") == "1"
}

// RequireBwrap returns bwrap's path, or skips the test (fails it in CI).
func RequireBwrap(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		Missing(t, "bwrap is not installed (apt-get install bubblewrap)")
	}
	return p
}

// RequireRoot skips the test unless it runs as root (fails it in CI, which runs as root).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "the test needs root")
	}
}

// GoTool is the path of the go command that runs the tests. go test puts its
// own GOROOT/bin first on PATH, so that go is the first one there.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// Missing skips, or in CI fails, for the reason given.
func Missing(t testing.TB, why string) {
	t.Helper()
	if Strict() {
		t.Fatalf("required in CI: %s", why)
	}
	t.Skip(why)
}

// WorkDir is a fresh directory for a test's homes and workspaces, outside
// the shared scratch trees (/tmp, /var/tmp, /run, ...) that the jail refuses
// as workspaces: under /var/lib/cco-test as root, else under the user's
// cache directory. It is removed when the test ends.
func WorkDir(t testing.TB) string {
	t.Helper()
	base := "/var/lib/cco-test"
	if os.Geteuid() != 0 {
		c, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("no directory for test workspaces: %v (fix: set HOME)", err)
		}
		base = filepath.Join(c, "cco-test")
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatalf("creating %s: %v", base, err)
	}
	d, err := os.MkdirTemp(base, "w-")
	if err != nil {
		t.Fatalf("creating a test directory under %s: %v", base, err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// socketLock is the lock file that serialises, across the test binaries
// that go test runs side by side, the tests that bind host sockets the
// jail can see with the shadow's launches: a launch masks every host socket
// it sees, and one removed while bwrap builds the jail fails that launch
// (bwrap cannot make its mount point).
const socketLock = "/var/lock/cco-test-sockets.lock"

// HostSockets holds the lock exclusively until the test ends: call it
// before binding host sockets outside /tmp and /run. The test's own
// launches meanwhile need no lock.
func HostSockets(t testing.TB) {
	t.Helper()
	held.Lock()
	defer held.Unlock()
	if held.n == 0 {
		held.release = lockSockets(t, syscall.LOCK_EX)
	}
	held.n++
	exclusive.Store(int32(held.n))
	t.Cleanup(func() {
		held.Lock()
		defer held.Unlock()
		if held.n--; held.n == 0 {
			held.release()
		}
		exclusive.Store(int32(held.n))
	})
}

// held is this process's exclusive hold: one lock, however many tests and
// sockets share it (flock would block on a second description of its own).
var held struct {
	sync.Mutex
	n       int
	release func()
}

// Launching holds the lock shared while a test launches the shadow; it
// returns the release.
func Launching(t testing.TB) func() {
	if exclusive.Load() > 0 {
		return func() {}
	}
	return lockSockets(t, syscall.LOCK_SH)
}

// exclusive counts this process's HostSockets holders.
var exclusive atomic.Int32

func lockSockets(t testing.TB, how int) func() {
	t.Helper()
	f, err := os.OpenFile(socketLock, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o666)
	if err != nil {
		// Not root and no such directory: nothing else can bind host
		// sockets there either.
		return func() {}
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		t.Fatalf("locking %s: %v", socketLock, err)
	}
	return func() { f.Close() }
}

// Git runs the host's git in dir, with no configuration but the test's.
func Git(t testing.TB, dir string, args ...string) {
	t.Helper()
	c := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main"}, args...)...)
	c.Dir = dir
	c.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e"}
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
}

// Mkdirs makes each directory with its parents, or fails the test.
func Mkdirs(t testing.TB, ds ...string) {
	t.Helper()
	for _, d := range ds {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// Within5s fails the test when fn does not return in 5 seconds: a read a
// planted FIFO or device could hang.
func Within5s(t testing.TB, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5 seconds", what)
	}
}

// Must fails the test on an error.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WriteFile writes p, mode 0755 (a hook must be executable), with its
// directories, or fails the test.
func WriteFile(t testing.TB, p, s string) {
	t.Helper()
	Must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	Must(t, os.WriteFile(p, []byte(s), 0o755))
}
