package provision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// helperEnv selects a helper mode when the test binary re-executes itself
// (a lock holder that can be SIGKILLed, a child in its own mount namespace).
const helperEnv = "CCO_PROVISION_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "lockholder":
		os.Exit(lockHolder(os.Getenv("CCO_TEST_ROOT")))
	case "exdev":
		os.Exit(exdevChild(os.Getenv("CCO_TEST_ROOT")))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// fixedNow is the clock of test runs, so backup directories have known names.
var fixedNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const fixedStamp = "20260102T030405Z"

// newRoot is an empty target system in a fresh temporary directory.
func newRoot(t testing.TB) *Root {
	t.Helper()
	r, err := OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// newRun is a run on root with the fixed clock and the receipt on disk.
func newRun(t testing.TB, r *Root) *Run {
	t.Helper()
	run, err := NewRun(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	run.Now = func() time.Time { return fixedNow }
	return run
}

// execute runs steps in a fresh run with the given options.
func execute(t testing.TB, r *Root, opt func(*Run), steps ...Step) *Report {
	t.Helper()
	run := newRun(t, r)
	if opt != nil {
		opt(run)
	}
	return Execute(run, steps)
}

func dryRun(run *Run) { run.DryRun = true }
func force(run *Run)  { run.Force = true }

// statuses is the status of every step, in order.
func statuses(rep *Report) []string {
	var s []string
	for _, sr := range rep.Steps {
		s = append(s, sr.Status)
	}
	return s
}

func wantStatuses(t testing.TB, rep *Report, want ...string) {
	t.Helper()
	got := statuses(rep)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		for _, sr := range rep.Steps {
			t.Logf("%s: %s: %s", sr.ID, sr.Status, sr.Detail)
		}
		t.Fatalf("statuses = %v, want %v", got, want)
	}
}

// owner is a uid/gid that differs from the test's own when it runs as root
// (so a missing chown would show), and its own otherwise.
func owner() (int, int) {
	if os.Geteuid() == 0 {
		return 1234, 5678
	}
	return os.Geteuid(), os.Getegid()
}

func writeHost(t testing.TB, p string, b []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
}

func readHost(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lstatT(t testing.TB, p string) *syscall.Stat_t {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// accessWatch observes opens and reads of files through inotify: it sees
// what the code under test really does to a file, with no seam in it.
type accessWatch struct {
	fd    int
	names map[int]string
}

func watchAccess(t testing.TB, paths ...string) *accessWatch {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	w := &accessWatch{fd: fd, names: map[int]string{}}
	t.Cleanup(func() { unix.Close(fd) })
	for _, p := range paths {
		wd, err := unix.InotifyAddWatch(fd, p, unix.IN_OPEN|unix.IN_ACCESS)
		if err != nil {
			t.Fatalf("inotify watch %s: %v", p, err)
		}
		w.names[wd] = filepath.Base(p)
	}
	return w
}

// events drains what happened since the last call ("claude: open", ...).
// inotify queues an event during the syscall that causes it, so everything
// the code did before this call is already there.
func (w *accessWatch) events(t testing.TB) []string {
	t.Helper()
	var out []string
	buf := make([]byte, 64*1024)
	for {
		n, err := unix.Read(w.fd, buf)
		if err == unix.EAGAIN {
			return out
		}
		if err != nil {
			t.Fatalf("reading inotify: %v", err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			what := "open"
			if ev.Mask&unix.IN_ACCESS != 0 {
				what = "read"
			}
			out = append(out, w.names[int(ev.Wd)]+": "+what)
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// failingReader yields some bytes and then an error, as a source that
// breaks midway (a disk error, a truncated download) does.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, fmt.Errorf("injected read error")
	}
	k := min(len(p), f.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	f.n -= k
	return k, nil
}

var _ io.Reader = (*failingReader)(nil)
