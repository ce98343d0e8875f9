package rootview

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
)

func TestTakes(t *testing.T) {
	for _, c := range []struct{ file, line, want string }{
		{"/etc/passwd", "alice:x:93376:100::/home/alice:/bin/sh", "alice"},
		{"/etc/passwd", "bob:x:1000:1000::/home/bob:/bin/sh", ""},
		{"/etc/passwd", "# alice:x:93376:100", ""},
		{"/etc/group", "jail:x:93376:", "jail"},
		{"/etc/subuid", "carol:90000:65536", "carol's range 90000:65536"},
		{"/etc/subuid", "carol:100000:65536", ""},
		{"/etc/subgid", "dave:93376:1", "dave's range 93376:1"},
		{"/etc/subgid", "dave:93375:1", ""},
		{"/etc/subuid", "garbage", ""},
	} {
		if got := takes(c.file, c.line); got != c.want {
			t.Errorf("takes(%s, %q) = %q, want %q", c.file, c.line, got, c.want)
		}
	}
}

func TestFreeRefusesATakenID(t *testing.T) {
	d := t.TempDir()
	passwd := filepath.Join(d, "passwd")
	os.WriteFile(passwd, []byte("root:x:0:0::/root:/bin/sh\nalice:x:93376:100::/home/alice:/bin/sh\n"), 0o644)
	defer func(f []string) { idFiles = f }(idFiles)
	idFiles = []string{passwd, filepath.Join(d, "missing")}
	err := free()
	if err == nil || !strings.Contains(err.Error(), passwd) || !strings.Contains(err.Error(), "alice") || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("free() = %v, want a refusal naming %s, alice and the fix", err, passwd)
	}
	idFiles = []string{filepath.Join(d, "missing")}
	if err := free(); err != nil {
		t.Fatalf("free() with no files = %v", err)
	}
}

func TestTrees(t *testing.T) {
	d := t.TempDir()
	for _, p := range []string{"home/.claude", "ws", "extra", "run"} {
		os.MkdirAll(filepath.Join(d, p), 0o755)
	}
	s := &sandbox.Spec{
		Home: d + "/home", Workspace: d + "/ws",
		HomeBinds: []sandbox.Bind{{Src: d + "/home/.claude", Dst: d + "/home/.claude"}},
		Writable: []sandbox.Bind{{Src: d + "/extra", Dst: d + "/extra", Try: true}, {Src: d + "/missing", Dst: d + "/missing", Try: true},
			{Src: d + "/ws", Dst: d + "/ws"}},
		EgressSocket: d + "/run/s.sock",
	}
	got := strings.Join(Trees(s), " ")
	want := strings.Join([]string{d + "/home", d + "/ws", d + "/extra", d + "/run"}, " ")
	if got != want {
		t.Errorf("Trees = %s\nwant %s", got, want)
	}
}

// A mask below a directory that others may not enter is dropped (the jail
// cannot reach it); one below a tree, or below open directories, stays; a
// tree below a closed directory refuses the launch.
func TestPrepare(t *testing.T) {
	d := openDir(t)
	for _, p := range []string{"closed/sock", "open/sock", "home/.claude", "ws"} {
		os.MkdirAll(filepath.Join(d, p), 0o755)
	}
	os.Chmod(d+"/closed", 0o700)
	os.Chmod(d+"/home", 0o700)
	defer func(f []string) { idFiles = f }(idFiles)
	idFiles = nil
	s := &sandbox.Spec{Home: d + "/home", Workspace: d + "/ws", Masks: []sandbox.Mask{
		{Path: d + "/closed/sock"}, {Path: d + "/open/sock"}, {Path: d + "/home/.claude/x"}}}
	trees, err := Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(trees) != 2 || len(s.Masks) != 2 || s.Masks[0].Path != d+"/open/sock" || s.Masks[1].Path != d+"/home/.claude/x" {
		t.Errorf("trees %v masks %v", trees, s.Masks)
	}
	s = &sandbox.Spec{Home: d + "/home", Workspace: d + "/closed/sock"}
	if _, err := Prepare(s); err == nil || !strings.Contains(err.Error(), "cannot enter "+d+"/closed") || !strings.Contains(err.Error(), "fix: chmod o+x "+d+"/closed") {
		t.Errorf("a workspace below a closed directory: %v", err)
	}
}

// run starts prog through Start with trees mapped, and returns its output
// and exit status.
func run(t *testing.T, dir string, trees []string, script string) (string, int, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pid, err := Start("/bin/sh", []string{"sh", "-c", script}, &syscall.ProcAttr{Dir: dir, Files: []uintptr{0, w.Fd(), w.Fd()}}, trees)
	w.Close()
	if err != nil {
		return "", 0, err
	}
	out, _ := io.ReadAll(r)
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, 0, nil)
	return string(out), ws.ExitStatus(), nil
}

func sameMountNS(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, _ := os.Readlink("/proc/thread-self/ns/mnt")
	proc, _ := os.Readlink("/proc/self/ns/mnt")
	if self != proc {
		t.Errorf("the thread stayed in %s, the process is in %s", self, proc)
	}
}

// openDir is a temporary directory that ID may enter.
func openDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	os.Chmod(filepath.Dir(d), 0o755)
	os.Chmod(d, 0o755)
	return d
}

// usePin points Pin at a directory of the test's, and removes what the
// test pinned there.
func usePin(t *testing.T) {
	t.Helper()
	old := Pin
	Pin = filepath.Join(t.TempDir(), "pin", "userns")
	t.Cleanup(func() {
		unix.Unmount(Pin, unix.MNT_DETACH)
		Pin = old
	})
}

// The mechanism itself: a root-owned 0600 file in a tree is the process's
// (ID's), one outside is not, and what it creates in the tree is root's; the
// user namespace is pinned, and the pin serves the next start.
func TestStart(t *testing.T) {
	testenv.RequireRoot(t)
	usePin(t)
	d := openDir(t)
	tree := d + "/tree"
	os.Mkdir(tree, 0o700)
	os.WriteFile(tree+"/own", []byte("mine"), 0o600)
	os.WriteFile(d+"/secret", []byte("secret"), 0o600)
	id := strconv.Itoa(ID)
	for i := 0; i < 2; i++ {
		out, code, err := run(t, d, []string{tree}, `cat tree/own; echo; cat secret; id -u; stat -c %u tree/own; touch tree/new`)
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 || !strings.HasPrefix(out, "mine\n") || !strings.Contains(out, "Permission denied") || !strings.Contains(out, "\n"+id+"\n"+id+"\n") {
			t.Errorf("exit %d, output %q: want the tree's file, a refusal of the other, uid %s and owner %s", code, out, id, id)
		}
		fi, err := os.Stat(tree + "/new")
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
			t.Errorf("the file made in the tree is %d:%d on the host, want 0:0", st.Uid, st.Gid)
		}
		os.Remove(tree + "/new")
		sameMountNS(t)
		fd, err := unix.Open(Pin, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil || !pinned(fd) {
			t.Fatalf("start %d: %s is not a pinned user namespace (%v)", i, Pin, err)
		}
		unix.Close(fd)
	}
}

// A tree that cannot be idmapped refuses, names the tree and the fix, and
// the program never runs.
func TestStartFailsClosed(t *testing.T) {
	testenv.RequireRoot(t)
	usePin(t)
	d := openDir(t)
	defer func(f func(int, *unix.MountAttr) error) { steps.setattr = f }(steps.setattr)
	steps.setattr = func(int, *unix.MountAttr) error { return unix.EINVAL }
	_, _, err := run(t, d, []string{d}, "touch ran")
	if err == nil || !strings.Contains(err.Error(), "root's view of "+d) || !strings.Contains(err.Error(), "cannot be idmapped") ||
		!strings.Contains(err.Error(), "fix:") || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("Start = %v, want a refusal naming %s and the fix", err, d)
	}
	if _, err := os.Stat(d + "/ran"); err == nil {
		t.Error("the program ran although the view failed")
	}
	sameMountNS(t)
}
