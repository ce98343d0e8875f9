package pty

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const waitLimit = 15 * time.Second

// terminal is a test's stand-in for the user's terminal: a pty whose slave
// is the controlling terminal of a helper (the outer role) calling Run.
type terminal struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	report string

	mu      sync.Mutex
	out     bytes.Buffer
	changed chan struct{}
	eof     chan struct{} // closed when the terminal has nothing more to show
}

// startHelper starts the outer role on a new terminal of rows x cols, with
// the inner program in mode.
func startHelper(t *testing.T, mode string, rows, cols uint16, env ...string) *terminal {
	t.Helper()
	return startHelperIn(t, nil, mode, rows, cols, env...)
}

// startHelperIn is startHelper with the helper's command line made by
// wrap (nil: the test binary itself) from the report's directory.
func startHelperIn(t *testing.T, wrap func(reportDir string) []string, mode string, rows, cols uint16, env ...string) *terminal {
	t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		t.Fatal(err)
	}
	reportDir := t.TempDir()
	tm := &terminal{t: t, master: master, changed: make(chan struct{}, 1), eof: make(chan struct{}),
		report: filepath.Join(reportDir, "report.json")}
	tm.resize(rows, cols)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envRole+"=outer", envMode+"="+mode, envReport+"="+tm.report)
	if wrap != nil {
		cmd.Env = append(cmd.Env, envWrap+"="+strings.Join(wrap(reportDir), "\x1f"))
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	tm.cmd = cmd
	go func() {
		defer close(tm.eof)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			tm.mu.Lock()
			tm.out.Write(buf[:n])
			tm.mu.Unlock()
			select {
			case tm.changed <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		master.Close()
	})
	return tm
}

func (tm *terminal) resize(rows, cols uint16) {
	tm.t.Helper()
	fd, err := fdOf(tm.master)
	if err != nil {
		tm.t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		tm.t.Fatal(err)
	}
}

func (tm *terminal) output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()
}

// waitFor waits until the terminal has shown a match of re.
func (tm *terminal) waitFor(re string) {
	tm.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(waitLimit)
	for !rx.MatchString(tm.output()) {
		select {
		case <-tm.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			tm.t.Fatalf("the terminal never showed %q; it showed:\n%q", re, tm.output())
		}
	}
}

func (tm *terminal) typeKeys(s string) {
	tm.t.Helper()
	if _, err := tm.master.Write([]byte(s)); err != nil {
		tm.t.Fatal(err)
	}
}

// finish waits for the helper to exit and returns its report, checking
// that the helper exited (not killed) with the status Run returned.
func (tm *terminal) finish() report {
	tm.t.Helper()
	done := make(chan error, 1)
	go func() { done <- tm.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(waitLimit):
		tm.t.Fatalf("the helper did not exit; the terminal showed:\n%q", tm.output())
	}
	select {
	case <-tm.eof:
	case <-time.After(waitLimit):
		tm.t.Fatalf("the terminal was not closed after the helper exited")
	}
	return readReport(tm.t, tm.report, tm.cmd.ProcessState, tm.output())
}

func readReport(t *testing.T, path string, ps *os.ProcessState, shown string) report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the helper left no report (%v, %v); output:\n%q", err, ps, shown)
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if ws := ps.Sys().(syscall.WaitStatus); !ws.Exited() || ws.ExitStatus() != r.Code {
		t.Errorf("the helper ended with %v, want exit %d (Run's status)", ps, r.Code)
	}
	return r
}

func TestExitStatusRelayed(t *testing.T) {
	t.Parallel()
	tm := startHelper(t, "exit7", 24, 80)
	r := tm.finish()
	if r.Code != 7 || r.Err != "" {
		t.Errorf("Run = %d, %q; want 7, no error", r.Code, r.Err)
	}
	// Printed right before the exit: proves the pty is drained.
	if !strings.Contains(tm.output(), "BYE") {
		t.Errorf("the agent's last output was lost: %q", tm.output())
	}
	if !r.Restored || !r.StdinTTY {
		t.Errorf("terminal path %v, restored %v; want both", r.StdinTTY, r.Restored)
	}
}

func TestKilledBySignalIs128PlusN(t *testing.T) {
	t.Parallel()
	tm := startHelper(t, "kill", 24, 80)
	r := tm.finish()
	if r.Code != 128+int(unix.SIGKILL) || r.Err != "" {
		t.Errorf("Run = %d, %q; want %d", r.Code, r.Err, 128+int(unix.SIGKILL))
	}
	if !r.Restored {
		t.Error("the terminal was not restored")
	}
}

func TestWindowSizeRelayed(t *testing.T) {
	t.Parallel()
	tm := startHelper(t, "size", 30, 100)
	tm.waitFor(`SIZE 30 100`)
	tm.resize(50, 132)
	tm.waitFor(`SIZE 50 132`)
	tm.resize(12, 40)
	tm.waitFor(`SIZE 12 40`)
	tm.typeKeys("q\r")
	if r := tm.finish(); r.Code != 0 || !r.Restored {
		t.Errorf("Run = %d, restored %v; want 0, true", r.Code, r.Restored)
	}
}

func TestCtrlCReachesAgentAsSIGINT(t *testing.T) {
	t.Parallel()
	tm := startHelper(t, "sigint", 24, 80)
	tm.waitFor(`READY`)
	tm.typeKeys("\x03")
	r := tm.finish()
	if r.Code != 128+int(unix.SIGINT) {
		t.Errorf("Run = %d, want %d (the agent killed by SIGINT)", r.Code, 128+int(unix.SIGINT))
	}
	if !r.Restored {
		t.Error("the terminal was not restored")
	}
}

func TestOuterTerminalIsRaw(t *testing.T) {
	t.Parallel()
	tm := startHelper(t, "raw", 24, 80)
	tm.waitFor(`READY`)
	tm.typeKeys("\r")
	tm.waitFor(`GOT [0-9a-f]{2}`)
	if !strings.Contains(tm.output(), "GOT 0d") {
		t.Errorf("the agent got %q, want the untranslated 0d of a raw terminal", tm.output())
	}
	if r := tm.finish(); r.Code != 0 || !r.Restored {
		t.Errorf("Run = %d, restored %v; want 0, true", r.Code, r.Restored)
	}
}

func TestJobControl(t *testing.T) {
	t.Parallel()
	tm := startHelper(t, "jobctl", 24, 80)
	tm.waitFor(`SESSION \w+`)
	if !strings.Contains(tm.output(), "SESSION ok") {
		t.Fatalf("the agent is not the session leader and foreground group of its terminal: %q", tm.output())
	}
	tm.waitFor(`FG READY`)
	tm.typeKeys("\x1a")
	tm.waitFor(`STOPPED \d+|NOT STOPPED`)
	if !strings.Contains(tm.output(), "STOPPED 20") || strings.Contains(tm.output(), "NOT STOPPED") {
		t.Errorf("^Z did not stop the foreground job with SIGTSTP: %q", tm.output())
	}
	if r := tm.finish(); r.Code != 0 || !r.Restored {
		t.Errorf("Run = %d, restored %v; want 0, true", r.Code, r.Restored)
	}
}

// TestSuspendAndResume: ^Z that stops the agent gives the shell its
// terminal back, as the shell sees it (the launcher stops, the terminal
// is as it was before); continuing the launcher (fg) makes the terminal
// raw again and continues the agent.
func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	tm := startHelper(t, "suspend", 24, 80)
	mfd, err := fdOf(tm.master)
	if err != nil {
		t.Fatal(err)
	}
	cooked, err := unix.IoctlGetTermios(mfd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tm.waitFor(`READY`)
	tm.typeKeys("\x1a")
	pid := tm.cmd.Process.Pid
	waitState(t, tm, "T")
	now, err := unix.IoctlGetTermios(mfd, unix.TCGETS)
	if err != nil || now.Lflag != cooked.Lflag || now.Iflag != cooked.Iflag {
		t.Errorf("while stopped the terminal is not as the shell left it: lflag %#x iflag %#x, want %#x %#x", now.Lflag, now.Iflag, cooked.Lflag, cooked.Iflag)
	}
	if strings.Contains(tm.output(), "RESUMED") {
		t.Fatal("the agent ran on while stopped")
	}
	// fg: the shell continues the job.
	if err := unix.Kill(pid, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	tm.waitFor(`RESUMED`)
	raw, err := unix.IoctlGetTermios(mfd, unix.TCGETS)
	if err != nil || raw.Lflag&unix.ICANON != 0 {
		t.Errorf("after fg the terminal is not raw again: lflag %#x", raw.Lflag)
	}
	tm.typeKeys("back\r")
	tm.waitFor(`ECHO back`)
	if r := tm.finish(); r.Code != 6 || !r.Restored {
		t.Errorf("Run = %d, restored %v; want 6, true", r.Code, r.Restored)
	}
}

// waitState waits until the launcher's state is want ("T": stopped).
func waitState(t *testing.T, tm *terminal, want string) {
	t.Helper()
	pid := tm.cmd.Process.Pid
	deadline := time.Now().Add(waitLimit)
	for procState(pid) != want {
		if time.Now().After(deadline) {
			t.Fatalf("the launcher's state is %s, want %s; the terminal showed:\n%q", procState(pid), want, tm.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procState is the state letter of /proc/<pid>/stat.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "?"
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return string(b[i+2])
	}
	return "?"
}

func TestSignalsForwarded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sig  syscall.Signal
		want int
	}{{unix.SIGTERM, 3}, {unix.SIGHUP, 4}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			t.Parallel()
			tm := startHelper(t, "term", 24, 80)
			tm.waitFor(`READY`)
			if err := tm.cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			r := tm.finish()
			if r.Code != c.want || !r.Restored {
				t.Errorf("Run = %d, restored %v; want %d (the agent got %v), true", r.Code, r.Restored, c.want, c.sig)
			}
		})
	}
}

func TestStartFailureOnTerminal(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-agent")
	tm := startHelper(t, "exit7", 24, 80, envInner+"="+missing)
	r := tm.finish()
	if r.Code != 127 || !strings.Contains(r.Err, missing) {
		t.Errorf("Run = %d, %q; want 127 and an error naming %s", r.Code, r.Err, missing)
	}
	if !r.Restored {
		t.Error("the terminal was not restored after a failed start")
	}
}

// runPlainHelper runs the outer role with pipes for stdio: Run's
// non-terminal path.
func runPlainHelper(t *testing.T, mode, input string, env ...string) (report, string) {
	t.Helper()
	rep := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envRole+"=outer", envMode+"="+mode, envReport+"="+rep)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(input)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	return readReport(t, rep, cmd.ProcessState, out.String()), out.String()
}

func TestNotATerminal(t *testing.T) {
	t.Parallel()
	r, out := runPlainHelper(t, "plain", "hello\n")
	if r.StdinTTY {
		t.Fatal("the helper's stdin is a pipe, yet IsTerminal said it is a terminal")
	}
	if r.Code != 5 || r.Err != "" {
		t.Errorf("Run = %d, %q; want 5", r.Code, r.Err)
	}
	// The agent ran on the inherited pipes, not on a pty.
	if !strings.Contains(out, "TTY=false") || !strings.Contains(out, "ECHO hello") {
		t.Errorf("the agent did not run on the inherited stdio: %q", out)
	}
}

func TestStartFailureNotATerminal(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-agent")
	r, _ := runPlainHelper(t, "plain", "", envInner+"="+missing)
	if r.Code != 127 || !strings.Contains(r.Err, missing) {
		t.Errorf("Run = %d, %q; want 127 and an error naming %s", r.Code, r.Err, missing)
	}
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ = runPlainHelper(t, "plain", "", envInner+"="+notExec)
	if r.Code != 126 || !strings.Contains(r.Err, notExec) {
		t.Errorf("Run = %d, %q; want 126 and an error naming %s", r.Code, r.Err, notExec)
	}
}

func TestIsTerminal(t *testing.T) {
	master, slave, err := openPTY()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	f, err := os.CreateTemp(t.TempDir(), "file")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !IsTerminal(slave) || IsTerminal(f) {
		t.Errorf("IsTerminal(pty slave) = %v, IsTerminal(file) = %v; want true, false", IsTerminal(slave), IsTerminal(f))
	}
}

// TestSignalsNotATerminal: without a terminal SIGTERM still reaches the
// agent, and a SIGINT (which a terminal would have sent to the agent's
// process group itself) does not kill the helper from under the agent.
func TestSignalsNotATerminal(t *testing.T) {
	t.Parallel()
	rep := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envRole+"=outer", envMode+"=term", envReport+"="+rep)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "READY\n" {
		t.Fatalf("the agent did not start: %q, %v", line, err)
	}
	_ = cmd.Process.Signal(unix.SIGINT)
	time.Sleep(50 * time.Millisecond)
	_ = cmd.Process.Signal(unix.SIGTERM)
	rest, _ := io.ReadAll(out)
	_ = cmd.Wait()
	r := readReport(t, rep, cmd.ProcessState, string(rest))
	if r.Code != 3 || !strings.Contains(string(rest), "GOT terminated") {
		t.Errorf("Run = %d, agent said %q; want 3 after the agent got SIGTERM", r.Code, rest)
	}
}

// TestRedirectedStreams: a redirected stdout means no pty (the file gets
// the agent's plain output), a redirected stderr stays the agent's stderr.
func TestRedirectedStreams(t *testing.T) {
	t.Parallel()
	t.Run("stdout", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "out")
		tm := startHelper(t, "streams", 24, 80, envStdout+"="+file)
		r := tm.finish()
		b, _ := os.ReadFile(file)
		if r.Code != 0 || !strings.Contains(string(b), "OUT in=true out=false\n") || strings.Contains(string(b), "\r") {
			t.Errorf("Run = %d; stdout file %q, want the agent on the inherited stdio (no pty, no CR)", r.Code, b)
		}
	})
	t.Run("stderr", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "err")
		tm := startHelper(t, "streams", 24, 80, envStderr+"="+file)
		r := tm.finish()
		b, _ := os.ReadFile(file)
		if r.Code != 0 || string(b) != "ERR err=false\n" {
			t.Errorf("Run = %d; stderr file %q, want the agent's stderr there", r.Code, b)
		}
		if !strings.Contains(tm.output(), "OUT in=true out=true") || strings.Contains(tm.output(), "ERR") {
			t.Errorf("the terminal showed %q, want only the agent's stdout, from a pty", tm.output())
		}
	})
}
