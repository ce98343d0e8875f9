package pty

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
)

// TestInsideBwrap runs the helper where it runs in production: in a
// bubblewrap jail whose only pty source is the private devpts of --dev /dev,
// with every capability dropped, in a pid namespace and a session of its
// own, holding nothing of the user's terminal.
func TestInsideBwrap(t *testing.T) {
	bwrap := testenv.RequireBwrap(t)
	t.Parallel()
	jail := func(reportDir string) []string {
		return []string{bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL",
			"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
			"--new-session", "--ro-bind", os.Args[0], os.Args[0], "--bind", reportDir, reportDir, "--"}
	}
	t.Run("size", func(t *testing.T) {
		t.Parallel()
		tm := startHelperIn(t, jail, "size", 30, 100)
		tm.waitFor(`SIZE 30 100`)
		tm.resize(45, 120)
		tm.waitFor(`SIZE 45 120`)
		tm.typeKeys("q\r")
		if r := tm.finish(); r.Code != 0 || !r.Restored || r.Err != "" {
			t.Errorf("Run = %d, %q, restored %v; want 0, no error, true", r.Code, r.Err, r.Restored)
		}
	})
	t.Run("ctrl-c", func(t *testing.T) {
		t.Parallel()
		tm := startHelperIn(t, jail, "sigint", 24, 80)
		tm.waitFor(`READY`)
		tm.typeKeys("\x03")
		if r := tm.finish(); r.Code != 128+int(unix.SIGINT) || !r.Restored {
			t.Errorf("Run = %d, restored %v; want %d, true", r.Code, r.Restored, 128+int(unix.SIGINT))
		}
	})
	t.Run("job-control", func(t *testing.T) {
		t.Parallel()
		tm := startHelperIn(t, jail, "jobctl", 24, 80)
		tm.waitFor(`FG READY`)
		tm.typeKeys("\x1a")
		tm.waitFor(`STOPPED \d+|NOT STOPPED`)
		if r := tm.finish(); r.Code != 0 || !r.Restored {
			t.Errorf("Run = %d, restored %v; want 0, true; terminal:\n%q", r.Code, r.Restored, tm.output())
		}
		if out := tm.output(); !containsAll(out, "SESSION ok", "STOPPED 20") {
			t.Errorf("job control in the jail: %q", out)
		}
	})
	t.Run("suspend", func(t *testing.T) {
		t.Parallel()
		tm := startHelperIn(t, jail, "suspend", 24, 80)
		tm.waitFor(`READY`)
		tm.typeKeys("\x1a")
		waitState(t, tm, "T")
		if err := unix.Kill(tm.cmd.Process.Pid, unix.SIGCONT); err != nil {
			t.Fatal(err)
		}
		tm.waitFor(`RESUMED`)
		tm.typeKeys("x\r")
		if r := tm.finish(); r.Code != 6 || !r.Restored {
			t.Errorf("Run = %d, restored %v; want 6, true; terminal:\n%q", r.Code, r.Restored, tm.output())
		}
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
