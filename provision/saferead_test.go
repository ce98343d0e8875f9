package provision

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Nothing a user plants in a home holds or floods a read: a FIFO (which
// would block the open until someone writes), a 64 GB sparse file (which
// would be read whole), a socket and a link to /dev/zero are each refused
// at once, by name; a regular file under the cap is read.
func TestReadCappedRefusesPlants(t *testing.T) {
	r := newRoot(t)
	u := &User{Name: "alice", UID: os.Getuid(), GID: os.Getgid(), Home: "/home/alice"}
	writeHost(t, r.HostPath("/home/alice/.bashrc"), []byte("export X=1\n"), 0o644)
	if err := syscall.Mkfifo(r.HostPath("/home/alice/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(r.HostPath("/home/alice/.zshenv"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(64 << 30); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	l, err := net.Listen("unix", r.HostPath("/home/alice/sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Symlink("/dev/zero", r.HostPath("/home/alice/zero"))

	h, err := r.OpenHome(u)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if b, err := h.ReadFile(".bashrc"); err != nil || string(b) != "export X=1\n" {
		t.Fatalf("a plain file: %q, %v", b, err)
	}
	for _, tc := range []struct{ rel, want string }{
		{"fifo", "is a named pipe (FIFO), not a regular file: cco-install does not read it"},
		{".zshenv", "is 64 GiB, more than the 4 MiB it may be"},
		{"sock", "no such device or address"}, // open(2) refuses a socket itself
		{"zero", "a symlink is on the way"},
	} {
		start := time.Now()
		done := make(chan error, 1)
		go func() { _, err := h.ReadFile(tc.rel); done <- err }()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("reading ~/%s did not return", tc.rel)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), r.HostPath("/home/alice/"+tc.rel)) {
			t.Errorf("~/%s: %v, want %q naming the file", tc.rel, err, tc.want)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("~/%s took %v to refuse", tc.rel, el)
		}
		var re *RefusedError
		if (tc.rel == "fifo" || tc.rel == ".zshenv") && !errors.As(err, &re) {
			t.Errorf("~/%s: %T is not a RefusedError", tc.rel, err)
		}
	}
	// The same through the root, as the guard's check of a home reads it.
	if _, err := ReadCapped(r, "/home/alice/fifo"); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("ReadCapped through the root: %v", err)
	}
}

// A run without root skips, silently, what only root may read; anything
// else is a warning that names the file.
func TestHomeProblem(t *testing.T) {
	perm := &os.PathError{Op: "open", Path: "/root/.bashrc", Err: syscall.EACCES}
	if got := HomeProblem("/root/.bashrc", perm); IsRoot() && got == "" || !IsRoot() && got != "" {
		t.Errorf("permission denied as uid %d: %q", os.Geteuid(), got)
	}
	re := &RefusedError{Path: "/home/a/.zshenv", Why: "is 64 GiB"}
	if got := HomeProblem("/home/a/.zshenv", re); got != re.Error() {
		t.Errorf("a refused file: %q, want its own message", got)
	}
	other := errors.New("input/output error")
	if got := HomeProblem("/home/a/.zshrc", other); got != "/home/a/.zshrc: input/output error" {
		t.Errorf("another error: %q", got)
	}
}

// The refusal names the file through the one printer: a name a user chose
// cannot write to the operator's terminal.
func TestRefusedNameIsEscaped(t *testing.T) {
	r := newRoot(t)
	name := "fifo\x1b]52;c;aGk=\x07"
	os.MkdirAll(r.HostPath("/home/alice"), 0o755)
	if err := syscall.Mkfifo(r.HostPath("/home/alice/"+name), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadCapped(r, "/home/alice/"+name)
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\x07") || !strings.Contains(err.Error(), `fifo\x1b]52;c;aGk=\a`) {
		t.Errorf("err = %q, want the name escaped", err)
	}
}
