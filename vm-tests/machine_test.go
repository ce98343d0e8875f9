package vmtests

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
)

// requireVM gates the scenarios: they run when CCO_VM_TESTS=1 (the test
// command's last block sets it after building the image); then a missing
// prerequisite fails in CI rather than skipping.
func requireVM(t *testing.T) string {
	t.Helper()
	if os.Getenv("CCO_VM_TESTS") != "1" {
		t.Skip("the vm-tests run with CCO_VM_TESTS=1; scripts/test.sh runs them at its end, after go run ./vm-tests/cmd/mkroot")
	}
	testenv.RequireRoot(t)
	im := DefaultImage()
	if !im.Cached() {
		testenv.Missing(t, "no Debian root image at "+im.Path()+"; build it: go run ./vm-tests/cmd/mkroot")
	}
	return im.Path()
}

func boot(t *testing.T) *Machine {
	t.Helper()
	image := requireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := Start(ctx, image, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// must runs a command and fails the test unless it exits 0.
func must(t *testing.T, m *Machine, u User, dir string, env []string, argv ...string) Result {
	t.Helper()
	r := m.Exec(ctxT(t), u, dir, env, argv...)
	if r.Code != 0 {
		t.Fatalf("%s: %v: exit %d\nstdout:\n%s\nstderr:\n%s", u.Name, argv, r.Code, r.Stdout, r.Stderr)
	}
	return r
}

// The machine is isolated: its own hostname, pid 1, only loopback, and a
// root that is not a chroot (so bwrap can run inside).
func TestMachineIsIsolated(t *testing.T) {
	m := boot(t)
	if got := must(t, m, Root, "/", nil, "cat", "/proc/sys/kernel/hostname").Stdout; got != "cco-vm\n" {
		t.Errorf("hostname %q", got)
	}
	if got := must(t, m, Root, "/", nil, "cat", "/proc/1/comm").Stdout; got != "sleep\n" {
		t.Errorf("pid 1 is %q, want the machine's own init", got)
	}
	links := must(t, m, Root, "/", nil, "ls", "/sys/class/net").Stdout
	if strings.TrimSpace(links) != "lo" {
		t.Errorf("network devices %q, want only lo", links)
	}
	if got := must(t, m, Root, "/", nil, "cat", "/etc/debian_version").Stdout; got == "" {
		t.Error("no /etc/debian_version: not the Debian root")
	}
	u, err := m.AddUser(ctxT(t), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if got := must(t, m, u, u.Home, nil, "sh", "-c", "id -un; pwd").Stdout; got != "dev\n/home/dev\n" {
		t.Errorf("as the user: %q", got)
	}
	// bwrap as the normal user: a user namespace must be possible in here.
	r := m.Exec(ctxT(t), u, u.Home, nil, "bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-all", "true")
	if r.Code != 0 {
		t.Errorf("bwrap as a normal user inside the machine: exit %d: %s", r.Code, r.Stderr)
	}
}
