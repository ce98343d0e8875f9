package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
)

// runBounded runs c and fails the test should it not end within d (it is
// then killed): a planted file must never hang a launch or its end.
func runBounded(t *testing.T, c *exec.Cmd, d time.Duration) result {
	t.Helper()
	var o, e bytes.Buffer
	c.Stdout, c.Stderr, c.Stdin = &o, &e, strings.NewReader("")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	err := waitBounded(t, c, d)
	r := result{stdout: o.String(), stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", c.Args, err)
	}
	return r
}

// waitBounded waits for the started c, and fails the test, having killed
// it, should it not end within d.
func waitBounded(t *testing.T, c *exec.Cmd, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		c.Process.Kill()
		<-done
		t.Fatalf("%v did not end within %v", c.Args, d)
		return nil
	}
}

// TestSignalEndsTheSession: SIGTERM or SIGHUP to the shadow ends the
// session within 5 seconds even when the agent ignores it: the jail is
// killed after the grace, no jailed process is left, and the status is the
// signal's.
func TestSignalEndsTheSession(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		w := newWorld(t, asNobody)
		tag := "st" + strconv.FormatInt(time.Now().UnixNano(), 36)
		c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "stubborn", "tag": tag}))
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		waitFile(t, w.ws+"/started-"+tag)
		start := time.Now()
		c.Process.Signal(sig)
		err := waitBounded(t, c, 10*time.Second)
		took := time.Since(start)
		if took > 5*time.Second {
			t.Errorf("%v: the session took %v to end, more than 5 seconds", sig, took)
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(sig) {
			t.Errorf("%v: exit %v, want %d\n%s", sig, err, 128+int(sig), out.String())
		}
		if !strings.Contains(out.String(), "the jail was killed") {
			t.Errorf("%v: the shadow did not say it killed the jail:\n%s", sig, out.String())
		}
		if left := processesWith(tag); len(left) != 0 {
			t.Errorf("%v: jailed processes outlived the session: %v", sig, left)
		}
	}
}

// TestPlantedFilesNeverHang: a FIFO or a link to /dev/zero at the files
// the shadow reads (~/.claude.json, ~/.claude/.claude.json, ~/.gitconfig,
// .git/config), before the session or made in it, never hangs or floods
// a launch or its end.
func TestPlantedFilesNeverHang(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	exit := params(map[string]any{"mode": "exit"})
	plant := func(t *testing.T, kind, p string) {
		t.Helper()
		os.Remove(p)
		var err error
		if kind == "fifo" {
			err = syscall.Mkfifo(p, 0o644)
		} else {
			err = os.Symlink("/dev/zero", p)
		}
		if err != nil {
			t.Fatal(err)
		}
		os.Lchown(p, asNobody.uid, asNobody.gid)
	}
	for _, kind := range []string{"fifo", "zero"} {
		t.Run(kind, func(t *testing.T) {
			// The state file carried over: refused with the fix.
			w := newWorld(t, asNobody)
			plant(t, kind, w.home+"/.claude.json")
			r := runBounded(t, w.cmd(root, "claude", w.ws, "probe", exit), 20*time.Second)
			if r.code != exitCannotRun || !strings.Contains(r.stderr, w.home+"/.claude.json") || !strings.Contains(r.stderr, "fix:") {
				t.Errorf("a planted ~/.claude.json: exit %d, want %d with the fix:\n%s", r.code, exitCannotRun, r.stderr)
			}
			// The watched state file, the identity, the repository's config:
			// the launch runs, and the unreadable state file is reported.
			os.Remove(w.home + "/.claude.json")
			plant(t, kind, w.home+"/.claude/.claude.json")
			plant(t, kind, w.home+"/.gitconfig")
			r = runBounded(t, w.cmd(root, "claude", w.ws, "probe", exit), 20*time.Second)
			if r.code != 0 || !strings.Contains(r.stderr, w.home+"/.claude/.claude.json: cannot be read") {
				t.Errorf("planted home files: exit %d, want 0 and the state file reported:\n%s", r.code, r.stderr)
			}
			// The repository's config: a FIFO is bound as it is (nothing
			// reads it); a link is refused with its fix.
			plant(t, kind, w.ws+"/.git/config")
			r = runBounded(t, w.cmd(root, "claude", w.ws, "probe", exit), 20*time.Second)
			if kind == "fifo" && r.code != 0 {
				t.Errorf("a FIFO .git/config: exit %d, want 0:\n%s", r.code, r.stderr)
			}
			if kind == "zero" && (r.code != exitCannotRun || !strings.Contains(r.stderr, "fix: rm "+w.ws+"/.git/config")) {
				t.Errorf("a .git/config linked to /dev/zero: exit %d, want %d with the fix:\n%s", r.code, exitCannotRun, r.stderr)
			}
		})
	}
	// Made in the session: new repositories whose config is a FIFO, a
	// link to /dev/zero, or includes a FIFO. The audit bounds its git runs.
	w := newWorld(t, asNobody)
	fresh := filepath.Join(w.base, "fresh")
	os.Mkdir(fresh, 0o755)
	os.Chown(fresh, w.u.uid, w.u.gid)
	r := runBounded(t, w.cmd(root, "codex", fresh, "probe", params(map[string]any{"mode": "plant"})), 20*time.Second)
	for _, want := range []string{fresh + "/fifo/.git/config: made in this session, and not a regular file",
		fresh + "/zero/.git/config: made a link to /dev/zero", fresh + "/incl/.git/config: a git config changed in this session that git could not list"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d: stderr lacks %q:\n%s", r.code, want, r.stderr)
		}
	}
}
