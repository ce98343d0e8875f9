package jailinit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// run runs Run in a child of the test binary that is a child subreaper, as
// the jail's pid 1 is every orphan's reaper: it reports Run's status and
// the zombies it had left at the end.
func run(t *testing.T, script string) (code int, out string) {
	t.Helper()
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), "CCO_JAILINIT_CHILD="+script)
	var o bytes.Buffer
	c.Stdout, c.Stderr = &o, &o
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, o.String()
}

// TestMain is, in run's child, pid 1's stand-in.
func TestMain(m *testing.M) {
	script := os.Getenv("CCO_JAILINIT_CHILD")
	if script == "" {
		os.Exit(m.Run())
	}
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	var code int
	if os.Getenv("CCO_JAILINIT_ADOPT") == "1" {
		code = adopted(script)
	} else {
		code = Run([]string{"/bin/sh", "-c", script}, os.Environ(), os.Stderr)
	}
	// Every orphan was reaped as it ended: none is left a zombie.
	time.Sleep(100 * time.Millisecond)
	var children []string
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		children = append(children, strings.Fields(string(b))...)
	}
	os.Stdout.WriteString("children: " + strings.Join(children, " ") + "\n")
	os.Exit(code)
}

// adopted runs script as the helper does when it is the jail's pid 1:
// Adopt, then os/exec through Start, many times over, each command's
// status taken by its own Wait while the reaper reaps the orphans.
func adopted(script string) int {
	Adopt()
	code := 0
	for i := 0; i < 20; i++ {
		c := exec.Command("/bin/sh", "-c", script)
		c.Stderr = os.Stderr
		release, err := Start(c)
		if err != nil {
			os.Stdout.WriteString("start: " + err.Error() + "\n")
			return 126
		}
		if i%2 == 1 {
			// The command ends, and the reaper sees it, before its
			// owner waits.
			time.Sleep(30 * time.Millisecond)
		}
		err = c.Wait()
		release()
		if c.ProcessState == nil {
			os.Stdout.WriteString("wait: " + err.Error() + "\n")
			return 126
		}
		code = c.ProcessState.ExitCode()
	}
	return code
}

// With the helper as pid 1 (Adopt): every command started through Start
// keeps its own status (the reaper never takes it, even from one that ends
// at once), and the orphans are reaped.
func TestAdoptedReaperLeavesOwnedCommands(t *testing.T) {
	t.Setenv("CCO_JAILINIT_ADOPT", "1")
	for _, script := range []string{"exit 9", "for i in 1 2 3; do (sleep 0.01 &) ; done; sleep 0.05; exit 9"} {
		code, out := run(t, script)
		if code != 9 || strings.Contains(out, "wait:") {
			t.Fatalf("%q: status %d, want the command's 9; output %q", script, code, out)
		}
		noZombies(t, out)
	}
}

func noZombies(t *testing.T, out string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "children: "); ok {
			for _, p := range strings.Fields(rest) {
				b, _ := os.ReadFile("/proc/" + p + "/stat")
				if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
					t.Errorf("orphan %s left a zombie", p)
				}
			}
			return
		}
	}
	t.Fatalf("no report of the children in %q", out)
}

func TestStatusIsTheCommands(t *testing.T) {
	if code, out := run(t, "exit 7"); code != 7 {
		t.Errorf("status %d, want the command's 7; output %q", code, out)
	}
	if code, out := run(t, "kill -TERM $$"); code != 128+int(syscall.SIGTERM) {
		t.Errorf("status %d, want 128+SIGTERM; output %q", code, out)
	}
}

// The orphans the command leaves are reaped while it runs: none is a
// zombie when it ends.
func TestOrphansAreReaped(t *testing.T) {
	code, out := run(t, "for i in 1 2 3 4 5; do (sleep 0.01 &) ; done; sleep 0.3; exit 3")
	if code != 3 {
		t.Fatalf("status %d, want 3; output %q", code, out)
	}
	noZombies(t, out)
}

func TestMissingCommand(t *testing.T) {
	var e bytes.Buffer
	if code := Run([]string{"/nonexistent/agent"}, nil, &e); code != exitNotFound || !strings.Contains(e.String(), "/nonexistent/agent") {
		t.Errorf("status %d (%q), want %d naming the program", code, e.String(), exitNotFound)
	}
	if code := Run(nil, nil, &e); code != exitCannotRun {
		t.Errorf("no command: status %d, want %d", code, exitCannotRun)
	}
}
