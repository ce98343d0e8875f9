package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
)

// child is the engine's child for these tests, built once.
var childBuild struct {
	once sync.Once
	path string
	err  error
}

func childBin(t *testing.T) string {
	t.Helper()
	childBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "cco-engine-child-")
		if err != nil {
			childBuild.err = err
			return
		}
		childBuild.path = filepath.Join(dir, "sandbox-helper")
		c := exec.Command(testenv.GoTool(), "build", "-o", childBuild.path, "./testdata/child")
		c.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := c.CombinedOutput(); err != nil {
			childBuild.err = fmt.Errorf("building the engine's child: %v\n%s", err, out)
		}
	})
	if childBuild.err != nil {
		t.Fatal(childBuild.err)
	}
	return childBuild.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if childBuild.path != "" {
		os.RemoveAll(filepath.Dir(childBuild.path))
	}
	os.Exit(code)
}

// jail runs script in a jail of the engine's whose operations are ops,
// with bind source src on descriptor 3 and o's options, and returns its
// status and output.
func jail(t *testing.T, src *os.File, ops []string, o Options, script string) (int, string) {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	args := append(append([]string{"--clearenv", "--setenv", "PATH", "/usr/bin:/bin"}, ops...), "--", "/bin/sh", "-c", script)
	pid, err := Start(childBin(t), args, &syscall.ProcAttr{Files: []uintptr{0, out.Fd(), out.Fd(), src.Fd()}}, o)
	if err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out.Name())
	return ws.ExitStatus(), string(b)
}

// TestLandlockHoldsAWidenedSpec: with the Landlock layer in force, a write
// outside the trees the spec makes writable fails even where a mount allows
// it. The spec is widened on purpose: a host directory bound read-write
// that the Landlock paths leave out. The same jail without the layer
// writes there, so the refusal is Landlock's. The verdict is taken on the
// host.
func TestLandlockHoldsAWidenedSpec(t *testing.T) {
	testenv.RequireRoot(t)
	if LandlockABI() == 0 {
		testenv.Missing(t, "this kernel has no Landlock")
	}
	base := testenv.WorkDir(t)
	ws, wide := filepath.Join(base, "ws"), filepath.Join(base, "wide")
	for _, d := range []string{ws, wide} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.OpenFile(ws, unix.O_PATH, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ops := []string{"--ro-bind", "/", "/", "--tmpfs", "/tmp", "--bind-fd", "3", ws, "--bind", wide, wide,
		"--dev", "/dev", "--proc", "/proc", "--chdir", ws}
	script := "echo a > " + ws + "/mine; echo b > " + wide + "/wide && echo wrote-wide; echo c > /tmp/t && echo wrote-tmp; echo d > /dev/null && echo wrote-null"
	code, out := jail(t, src, ops, Options{Writable: []string{ws, "/tmp"}}, script)
	if code != 0 || strings.Contains(out, "wrote-wide") || !strings.Contains(out, "Permission denied") ||
		!strings.Contains(out, "wrote-tmp") || !strings.Contains(out, "wrote-null") {
		t.Errorf("under Landlock: exit %d, output %q; want the wide write refused, the others done", code, out)
	}
	if _, err := os.Stat(filepath.Join(wide, "wide")); err == nil {
		t.Error("the write outside the writable trees reached the host")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "mine")); err != nil || string(b) != "a\n" {
		t.Errorf("the workspace write did not reach the host: %q %v", b, err)
	}
	// The control: the mount alone lets the write through.
	code, out = jail(t, src, ops, Options{}, script)
	if code != 0 || !strings.Contains(out, "wrote-wide") {
		t.Errorf("without Landlock: exit %d, output %q; want the wide write done", code, out)
	}
	if _, err := os.Stat(filepath.Join(wide, "wide")); err != nil {
		t.Errorf("without Landlock the write did not reach the host: %v", err)
	}
}

// TestChildIsNotDumpable: the engine's child, the jail's pid 1, can be
// neither read nor traced from the jail, and carries the jail's
// environment only.
func TestChildIsNotDumpable(t *testing.T) {
	testenv.RequireRoot(t)
	base := testenv.WorkDir(t)
	src, err := os.OpenFile(base, unix.O_PATH, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	t.Setenv("CCO_HOST_SENTINEL", "leak")
	ops := []string{"--ro-bind", "/", "/", "--bind-fd", "3", base, "--dev", "/dev", "--proc", "/proc", "--chdir", base}
	code, out := jail(t, src, ops, Options{}, "cat /proc/1/environ >/dev/null 2>&1 && echo read-environ; "+
		"tr '\\0' '\\n' < /proc/self/environ | grep -c SENTINEL; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status; "+
		"ls -l /proc/1/exe >/dev/null 2>&1 && echo read-exe; echo pid $$")
	if code != 0 || strings.Contains(out, "read-environ") || strings.Contains(out, "read-exe") || !strings.Contains(out, "\n0\n") && !strings.HasPrefix(out, "0\n") ||
		!strings.Contains(out, "CapEff:\t0000000000000000") || !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Errorf("exit %d, output %q", code, out)
	}
}

// TestCoverOfAnAbsentPath: a mask over a path that is not there in a
// read-only tree (a host path that went away while the jail was planned)
// is left out, and the path stays absent; a bind whose mount point cannot
// be made still refuses the jail.
func TestCoverOfAnAbsentPath(t *testing.T) {
	testenv.RequireRoot(t)
	base := testenv.WorkDir(t)
	src, err := os.OpenFile(base, unix.O_PATH, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	gone := filepath.Join(base, "gone")
	ops := []string{"--ro-bind", "/", "/", "--tmpfs", gone + "/dir", "--remount-ro", gone + "/dir", "--ro-bind", "/dev/null", gone + "/file",
		"--dev", "/dev", "--proc", "/proc"}
	code, out := jail(t, src, ops, Options{}, "ls "+gone+" 2>&1; echo done")
	if code != 0 || !strings.Contains(out, "No such file") || !strings.Contains(out, "done") {
		t.Errorf("exit %d, output %q; want the covers left out and the path absent", code, out)
	}
	if _, err := os.Lstat(gone); err == nil {
		t.Error("the jail made the absent path on the host")
	}
	code, out = jail(t, src, append(ops[:3:3], "--bind", base, gone+"/bound"), Options{}, "echo ran")
	if code == 0 || strings.Contains(out, "ran") || !strings.Contains(out, "read-only file system") {
		t.Errorf("a bind onto an absent path: exit %d, output %q; want the jail refused", code, out)
	}
}
