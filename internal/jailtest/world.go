package jailtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RunAs is who runs the shadow: root, or nobody with a home of its own.
type RunAs struct {
	Name     string
	UID, GID int
}

var (
	AsRoot   = RunAs{"root", 0, 0}
	AsNobody = RunAs{"nobody", 65534, 65534}
)

// WorldBase holds the tests' worlds. Not /tmp or /var/tmp: the shadow
// refuses workspaces in shared scratch trees, and the jail's /tmp is
// private.
const WorldBase = "/var/lib/cco-jail-test"

// World is a directory of its own for one test and one user: Base, with
// the user's home at Base/home. Its creator fills it.
type World struct {
	Base, Home string
	U          RunAs
}

// NewWorld makes an empty world (Base 0755, Home 0700, both the user's),
// removed when the test ends.
func NewWorld(t testing.TB, u RunAs) *World {
	t.Helper()
	if err := os.MkdirAll(WorldBase, 0o755); err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp(WorldBase, "w-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	w := &World{Base: base, Home: filepath.Join(base, "home"), U: u}
	if err := os.Mkdir(w.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	w.Own(t)
	return w
}

// Own gives everything in the world to its user.
func (w *World) Own(t testing.TB) {
	t.Helper()
	err := filepath.Walk(w.Base, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, w.U.UID, w.U.GID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Env is the host environment a launch or a host program gets: the user's
// home, and variables the jail must not pass on.
func (w *World) Env() []string {
	return []string{"HOME=" + w.Home, "USER=" + w.U.Name, "PATH=/usr/bin:/bin", "TERM=xterm", "LANG=C.UTF-8",
		"SENTINEL_VAR=leak", "SSH_AUTH_SOCK=/tmp/ssh-XXXX/agent.1", "GITHUB_TOKEN=ghp_leak", "XDG_RUNTIME_DIR=/run/user/4242"}
}

// Host is a host program run as the world's user in dir.
func (w *World) Host(dir, prog string, args ...string) *exec.Cmd {
	c := exec.Command(prog, args...)
	c.Dir = dir
	c.Env = w.Env()
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if w.U.UID != 0 {
		c.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(w.U.UID), Gid: uint32(w.U.GID)}
	}
	return c
}

// Cmd is the installed shadow under name, run in dir as the world's user.
func (w *World) Cmd(r *Root, name, dir string, args ...string) *exec.Cmd {
	return w.Host(dir, r.Shadow(name), args...)
}

// Result is how a command ended and what it printed; Report is stdout
// decoded when it is a JSON object.
type Result struct {
	Code           int
	Stdout, Stderr string
	TimedOut       bool
	Report         map[string]string
}

// Run runs c (stdin empty unless set), killing its process group after
// timeout: a hang is a result, not a stuck test.
func Run(t testing.TB, c *exec.Cmd, timeout time.Duration) Result {
	t.Helper()
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	if c.Stdin == nil {
		c.Stdin = strings.NewReader("")
	}
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Setpgid = true
	if err := c.Start(); err != nil {
		t.Fatalf("starting %v: %v", c.Args, err)
	}
	var r Result
	timer := time.AfterFunc(timeout, func() {
		r.TimedOut = true
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	})
	err := c.Wait()
	timer.Stop()
	r.Stdout, r.Stderr = o.String(), e.String()
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", c.Args, err)
	}
	if strings.HasPrefix(r.Stdout, "{") {
		json.Unmarshal([]byte(r.Stdout), &r.Report)
	}
	return r
}
