package provision

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

// escapeRoot is a root whose /etc is a symlink to a directory outside it,
// planted the way a hostile image or user would: absolute, or climbing out
// with "..". Every operation must stay inside the root.
func escapeRoot(t *testing.T, link func(outside string) string) (r *Root, outside string) {
	t.Helper()
	outside = t.TempDir()
	writeHost(t, filepath.Join(outside, "passwd"), []byte("outside:x:0:0::/:/bin/sh\n"), 0o644)
	r = newRoot(t)
	if err := os.Symlink(link(outside), r.HostPath("/etc")); err != nil {
		t.Fatal(err)
	}
	return r, outside
}

var escapes = []struct {
	name string
	link func(outside string) string
}{
	{"absolute", func(o string) string { return o }},
	{"dotdot", func(o string) string { return "../../../../../../../../../.." + o }},
}

func TestRootSymlinksStayInside(t *testing.T) {
	ops := []struct {
		name string
		op   func(r *Root) error
	}{
		{"WriteFile", func(r *Root) error {
			return r.WriteFile("/etc/passwd", strings.NewReader("written\n"), 0o644, -1, -1)
		}},
		{"WriteFile new", func(r *Root) error { return r.WriteFile("/etc/new", strings.NewReader("x"), 0o644, -1, -1) }},
		{"MkdirAll", func(r *Root) error { _, err := r.MkdirAll("/etc/cco/sub", 0o755, -1, -1); return err }},
		{"Symlink", func(r *Root) error { return r.Symlink("/x", "/etc/link") }},
		{"Remove", func(r *Root) error { return r.Remove("/etc/passwd") }},
		{"RemoveAll", func(r *Root) error { return r.RemoveAll("/etc/passwd") }},
		{"Rename into", func(r *Root) error {
			os.WriteFile(r.HostPath("/moved"), []byte("m"), 0o644)
			return r.Rename("/moved", "/etc/moved")
		}},
		{"Rename out of", func(r *Root) error { return r.Rename("/etc/passwd", "/stolen") }},
	}
	for _, esc := range escapes {
		for _, op := range ops {
			t.Run(esc.name+"/"+op.name, func(t *testing.T) {
				r, outside := escapeRoot(t, esc.link)
				before := treehash.Hash(t, outside)
				op.op(r) // an error is fine; touching outside is not
				if treehash.Hash(t, outside) != before {
					t.Fatalf("%s changed the directory outside the root: %v", op.name, treehash.List(outside))
				}
				if _, err := os.Lstat(r.HostPath("/stolen")); err == nil {
					t.Fatal("a file from outside the root was moved into it")
				}
			})
		}
		t.Run(esc.name+"/reads", func(t *testing.T) {
			r, _ := escapeRoot(t, esc.link)
			if b, err := r.ReadFile("/etc/passwd"); err == nil {
				t.Fatalf("ReadFile read %q through a link out of the root", b)
			}
			if _, err := r.Lstat("/etc/passwd"); err == nil {
				t.Fatal("Lstat found the file outside the root")
			}
			if u, err := LookupUser(r, "outside"); err == nil {
				t.Fatalf("LookupUser read the passwd outside the root: %+v", u)
			}
			if _, err := HashFile(r, "/etc/passwd"); err == nil {
				t.Fatal("HashFile read outside the root")
			}
		})
		// The same link resolves to the root's own copy of the directory when
		// there is one: the root is "/" for the link, as it will be in a chroot.
		t.Run(esc.name+"/resolves in root", func(t *testing.T) {
			r, outside := escapeRoot(t, esc.link)
			writeHost(t, r.HostPath(outside+"/passwd"), []byte("inside:x:5:5::/home/inside:/bin/sh\n"), 0o644)
			u, err := LookupUser(r, "inside")
			if err != nil || u.UID != 5 {
				t.Fatalf("LookupUser through the link = %+v, %v; want the root's own file", u, err)
			}
			if err := r.WriteFile("/etc/passwd", strings.NewReader("new\n"), 0o644, -1, -1); err != nil {
				t.Fatal(err)
			}
			if got := readHost(t, r.HostPath(outside+"/passwd")); string(got) != "new\n" {
				t.Fatalf("the write through the link went elsewhere: %q", got)
			}
		})
	}
}

func TestRootFinalSymlinkNotFollowed(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	writeHost(t, victim, []byte("victim\n"), 0o644)
	r := newRoot(t)
	os.MkdirAll(r.HostPath("/bin"), 0o755)
	link := r.HostPath("/bin/tool")
	os.Symlink(victim, link)

	if fi, err := r.Lstat("/bin/tool"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("Lstat = %v, %v; want the link itself", fi, err)
	}
	if l, err := r.Readlink("/bin/tool"); err != nil || l != victim {
		t.Fatalf("Readlink = %q, %v", l, err)
	}
	if _, err := r.MkdirAll("/bin/tool/sub", 0o755, -1, -1); err == nil {
		t.Fatal("MkdirAll went through a link that leads out of the root")
	}
	// WriteFile replaces the link itself.
	if err := r.WriteFile("/bin/tool", strings.NewReader("mine\n"), 0o755, -1, -1); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); !fi.Mode().IsRegular() {
		t.Fatalf("after WriteFile the path is %v, want a regular file", fi.Mode())
	}
	if got := readHost(t, victim); string(got) != "victim\n" {
		t.Fatalf("WriteFile wrote through the link: %q", got)
	}
}

func TestOpenNoFollow(t *testing.T) {
	r := newRoot(t)
	writeHost(t, r.HostPath("/home/u/.claude/settings.json"), []byte("{}"), 0o644)
	os.Symlink("settings.json", r.HostPath("/home/u/.claude/final"))
	os.Symlink(".claude", r.HostPath("/home/u/dirlink"))
	os.Symlink("/home/u", r.HostPath("/home/abs"))

	f, err := r.OpenNoFollow("/home/u/.claude/settings.json")
	if err != nil {
		t.Fatalf("a plain path: %v", err)
	}
	f.Close()
	for _, p := range []string{"/home/u/.claude/final", "/home/u/dirlink/settings.json", "/home/abs/.claude/settings.json"} {
		f, err := r.OpenNoFollow(p)
		if err == nil {
			f.Close()
			t.Errorf("OpenNoFollow(%s) followed a symlink", p)
			continue
		}
		if !errors.Is(err, syscall.ELOOP) || !strings.Contains(err.Error(), r.HostPath(p)) {
			t.Errorf("OpenNoFollow(%s) = %v, want ELOOP naming the path", p, err)
		}
		// Open, by contrast, follows links that stay inside the root.
		if f, err := r.Open(p); err != nil {
			t.Errorf("Open(%s): %v", p, err)
		} else {
			f.Close()
		}
	}
}

func TestMkdirAll(t *testing.T) {
	uid, gid := owner()
	r := newRoot(t)
	os.MkdirAll(r.HostPath("/usr/local"), 0o755)
	old := syscall.Umask(0o077) // the mode must not depend on the umask
	defer syscall.Umask(old)

	created, err := r.MkdirAll("/usr/local/lib/cco/x", 0o751, uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/usr/local/lib", "/usr/local/lib/cco", "/usr/local/lib/cco/x"}; fmt.Sprint(created) != fmt.Sprint(want) {
		t.Fatalf("created = %v, want %v", created, want)
	}
	for _, d := range created {
		fi, _ := os.Stat(r.HostPath(d))
		st := lstatT(t, r.HostPath(d))
		if fi.Mode().Perm() != 0o751 || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s: %v %d:%d, want 0751 %d:%d", d, fi.Mode(), st.Uid, st.Gid, uid, gid)
		}
	}
	if fi, _ := os.Stat(r.HostPath("/usr/local")); fi.Mode().Perm() != 0o755 {
		t.Errorf("an existing parent's mode changed: %v", fi.Mode())
	}
	if created, err := r.MkdirAll("/usr/local/lib/cco/x", 0o751, uid, gid); err != nil || len(created) != 0 {
		t.Fatalf("again: %v, %v; want nothing created", created, err)
	}
	if created, err := r.MkdirAll("/", 0o755, -1, -1); err != nil || len(created) != 0 {
		t.Fatalf("the root: %v, %v", created, err)
	}

	// A link to a directory inside the root is a directory.
	os.Symlink("/usr/local/lib", r.HostPath("/lib"))
	if created, err := r.MkdirAll("/lib/cco", 0o755, -1, -1); err != nil || len(created) != 0 {
		t.Fatalf("through an in-root link: %v, %v", created, err)
	}
	if created, err := r.MkdirAll("/lib/new", 0o755, -1, -1); err != nil || fmt.Sprint(created) != "[/lib/new]" {
		t.Fatalf("below an in-root link: %v, %v", created, err)
	}
	if _, err := os.Stat(r.HostPath("/usr/local/lib/new")); err != nil {
		t.Fatal("the directory below the link was not made where it points")
	}

	// A file in the way is an error that names it and says what to do.
	writeHost(t, r.HostPath("/opt"), []byte("x"), 0o644)
	_, err = r.MkdirAll("/opt/cco", 0o755, -1, -1)
	if err == nil || !strings.Contains(err.Error(), r.HostPath("/opt")) || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("a file in the way: %v", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	uid, gid := owner()
	r := newRoot(t)
	os.MkdirAll(r.HostPath("/etc"), 0o755)
	host := r.HostPath("/etc/conf")

	if err := r.WriteFile("/etc/conf", strings.NewReader("one\n"), 0o640, uid, gid); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(host)
	st := lstatT(t, host)
	if fi.Mode() != 0o640 || int(st.Uid) != uid || int(st.Gid) != gid || string(readHost(t, host)) != "one\n" {
		t.Fatalf("after WriteFile: %v %d:%d %q", fi.Mode(), st.Uid, st.Gid, readHost(t, host))
	}
	if names := treehash.List(r.HostPath("/etc")); fmt.Sprint(names) != "[conf]" {
		t.Fatalf("left behind: %v", names)
	}
	ino := st.Ino

	// A reader that fails midway leaves the old file as it was and no temp.
	err := r.WriteFile("/etc/conf", &failingReader{n: 100000}, 0o600, uid, gid)
	if err == nil || !strings.Contains(err.Error(), host) {
		t.Fatalf("a failing reader: %v, want an error naming %s", err, host)
	}
	if got := readHost(t, host); string(got) != "one\n" || lstatT(t, host).Ino != ino {
		t.Fatalf("the old file did not survive a failed write: %q", got)
	}
	if names := treehash.List(r.HostPath("/etc")); fmt.Sprint(names) != "[conf]" {
		t.Fatalf("a failed write left behind: %v", names)
	}

	// A missing parent is an error, not a write somewhere else.
	if err := r.WriteFile("/nowhere/conf", strings.NewReader("x"), 0o644, -1, -1); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing parent: %v", err)
	}
	// The new bytes replace the old under a new inode (a rename, not a rewrite
	// in place: a running reader keeps the old file).
	if err := r.WriteFile("/etc/conf", strings.NewReader("two\n"), 0o644, uid, gid); err != nil {
		t.Fatal(err)
	}
	if lstatT(t, host).Ino == ino || string(readHost(t, host)) != "two\n" {
		t.Fatal("the file was not replaced by a rename")
	}
	if err := r.WriteFile("/", strings.NewReader("x"), 0o644, -1, -1); err == nil {
		t.Fatal("writing the root itself succeeded")
	}
	// Set-id bits survive the chown (which clears them if it comes second).
	if err := r.WriteFile("/etc/suid", strings.NewReader("x"), 0o755|fs.ModeSetuid|fs.ModeSetgid, uid, gid); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(r.HostPath("/etc/suid")); fi.Mode() != 0o755|fs.ModeSetuid|fs.ModeSetgid {
		t.Fatalf("mode = %v, want ugrwxr-xr-x", fi.Mode())
	}
}

// sampleTree is a small tree with every kind copyTree must keep.
func sampleTree(t *testing.T, dir string) {
	t.Helper()
	uid, gid := owner()
	writeHost(t, filepath.Join(dir, "bin/claude"), []byte("shadow bytes"), 0o755)
	writeHost(t, filepath.Join(dir, "share/doc"), []byte("doc"), 0o640)
	os.Chmod(filepath.Join(dir, "share"), 0o750)
	os.Chmod(filepath.Join(dir, "bin/claude"), 0o755|fs.ModeSetuid)
	os.Symlink("../bin/claude", filepath.Join(dir, "share/link"))
	os.Lchown(filepath.Join(dir, "share/doc"), uid, gid)
	os.Lchown(filepath.Join(dir, "share/link"), uid, gid)
}

func sameDevice(t *testing.T, a, b string) bool {
	return lstatT(t, a).Dev == lstatT(t, b).Dev
}

// copyTree is Rename's fallback across filesystems. /dev/shm is a tmpfs,
// so copying there from t.TempDir() crosses devices as the fallback does.
func TestCopyTree(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	sampleTree(t, src)
	dstDir, err := os.MkdirTemp("/dev/shm", "cco-copytree-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dstDir) })
	if sameDevice(t, src, dstDir) {
		t.Logf("/dev/shm is on the same filesystem as %s here; copying anyway", src)
	}
	for _, name := range []string{"", "bin/claude", "share/link"} {
		from := filepath.Join(src, name)
		to := filepath.Join(dstDir, "copy-"+strings.ReplaceAll(name, "/", "-"))
		if err := copyTreeAt(from, to); err != nil {
			t.Fatalf("copyTree(%s): %v", name, err)
		}
		if got, want := treehash.Shape(t, to), treehash.Shape(t, from); got != want {
			t.Fatalf("copy of %q:\n%s\nwant\n%s", name, got, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dstDir, "copy-.cco-copy")); err == nil {
		t.Fatal("the staging name was left behind")
	}

	// A special file stops the copy and leaves nothing half-made.
	syscall.Mkfifo(filepath.Join(src, "share/fifo"), 0o644)
	to := filepath.Join(dstDir, "bad")
	if err := copyTreeAt(src, to); err == nil || !strings.Contains(err.Error(), "fifo") {
		t.Fatalf("copying a fifo: %v", err)
	}
	if _, err := os.Lstat(to); err == nil {
		t.Fatal("a failed copy left the destination")
	}
	if _, err := os.Lstat(to + ".cco-copy"); err == nil {
		t.Fatal("a failed copy left its staging directory")
	}
}

// exdevChild runs in a mount namespace of its own, where the root's /mnt is
// a tmpfs: a rename from the root's disk into /mnt crosses devices, as a
// rename out of an overlayfs lower layer does in an image build.
func exdevChild(dir string) int {
	fail := func(f string, a ...any) int { fmt.Fprintf(os.Stderr, f+"\n", a...); return 1 }
	if err := syscall.Mount("tmpfs", filepath.Join(dir, "mnt"), "tmpfs", 0, ""); err != nil {
		return fail("mount: %v", err)
	}
	err := os.Rename(filepath.Join(dir, "var/tree/bin/claude"), filepath.Join(dir, "mnt/probe"))
	if !errors.Is(err, syscall.EXDEV) {
		return fail("a plain rename across the mount gave %v, not EXDEV: the test proves nothing", err)
	}
	r, err := OpenRoot(dir)
	if err != nil {
		return fail("%v", err)
	}
	for _, m := range [][2]string{{"/var/tree", "/mnt/tree"}, {"/var/file", "/mnt/file"}} {
		if err := r.Rename(m[0], m[1]); err != nil {
			return fail("Rename(%s, %s): %v", m[0], m[1], err)
		}
	}
	tree, err := treehash.Describe(filepath.Join(dir, "mnt/tree"), false)
	if err != nil {
		return fail("%v", err)
	}
	file, err := treehash.Describe(filepath.Join(dir, "mnt/file"), false)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Print(tree, "\n--\n", file)
	return 0
}

func TestRenameAcrossDevices(t *testing.T) {
	testenv.RequireRoot(t)
	r := newRoot(t)
	os.MkdirAll(r.HostPath("/mnt"), 0o755)
	sampleTree(t, r.HostPath("/var/tree"))
	writeHost(t, r.HostPath("/var/file"), []byte("a file"), 0o600)
	want := treehash.Shape(t, r.HostPath("/var/tree")) + "\n--\n" + treehash.Shape(t, r.HostPath("/var/file"))

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=exdev", "CCO_TEST_ROOT="+r.Dir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if strings.Contains(stderr.String(), "mount:") || errors.Is(err, syscall.EPERM) {
			testenv.Missing(t, "cannot mount a tmpfs in a new mount namespace: "+stderr.String()+err.Error())
		}
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	if string(out) != want {
		t.Fatalf("copied across devices:\n%s\nwant\n%s", out, want)
	}
	for _, p := range []string{"/var/tree", "/var/file"} {
		if _, err := os.Lstat(r.HostPath(p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there after the move: %v", p, err)
		}
	}
}

func TestSymlinkAndRemove(t *testing.T) {
	outside := t.TempDir()
	writeHost(t, filepath.Join(outside, "keep"), []byte("keep"), 0o644)
	r := newRoot(t)
	os.MkdirAll(r.HostPath("/usr/bin"), 0o755)

	if err := r.Symlink("/opt/a", "/usr/bin/tool"); err != nil {
		t.Fatal(err)
	}
	ino := lstatT(t, r.HostPath("/usr/bin/tool")).Ino
	// Replacing a link is a rename over it: the name is never missing.
	if err := r.Symlink("/opt/b", "/usr/bin/tool"); err != nil {
		t.Fatal(err)
	}
	if l, _ := r.Readlink("/usr/bin/tool"); l != "/opt/b" || lstatT(t, r.HostPath("/usr/bin/tool")).Ino == ino {
		t.Fatalf("link = %q, want /opt/b under a new inode", l)
	}
	if names := treehash.List(r.HostPath("/usr/bin")); fmt.Sprint(names) != "[tool]" {
		t.Fatalf("left behind: %v", names)
	}
	run := newRun(t, r)
	if err := run.Record("/usr/bin/tool", KindLink, "", "test.link"); err != nil {
		t.Fatal(err)
	}
	if e := run.Receipt.Paths["/usr/bin/tool"]; e.Kind != KindLink || e.Target != "/opt/b" {
		t.Fatalf("recorded link = %+v", e)
	}

	// RemoveAll of a link to a directory outside removes the link only.
	os.Symlink(outside, r.HostPath("/usr/bin/out"))
	if err := r.RemoveAll("/usr/bin/out"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Fatal("RemoveAll followed a link out of the root")
	}
	if err := r.Remove("/usr/bin/tool"); err != nil {
		t.Fatal(err)
	}
	if names := treehash.List(r.HostPath("/usr/bin")); len(names) != 0 {
		t.Fatalf("after removing: %v", names)
	}
	if err := r.Remove("/usr/bin/tool"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), r.HostPath("/usr/bin/tool")) {
		t.Fatalf("removing a missing file: %v, want ErrNotExist naming the path", err)
	}
	if err := r.RemoveAll("/"); err == nil {
		t.Fatal("RemoveAll of the root itself succeeded")
	}
}

func TestOpenRoot(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere")
	if _, err := OpenRoot(missing); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "create it first") {
		t.Fatalf("a missing root: %v, want an error naming it and the fix", err)
	}
	r := newRoot(t)
	if r.IsHost() || r.HostPath("usr/../etc//x") != filepath.Join(r.Dir(), "etc/x") {
		t.Fatalf("IsHost %v, HostPath %q", r.IsHost(), r.HostPath("usr/../etc//x"))
	}
	if r.HostPath("/../../x") != filepath.Join(r.Dir(), "x") {
		t.Fatalf("HostPath climbed out: %q", r.HostPath("/../../x"))
	}
}
