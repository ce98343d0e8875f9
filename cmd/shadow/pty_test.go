package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
)

// openPty returns a pty pair of the host's devpts.
func openPty(t testing.TB) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// On a terminal the agent runs on a fresh pty of the jail's own devpts:
// the window size is relayed, TIOCSTI on its terminal is refused, and its
// exit status is the shadow's.
func TestAgentGetsAFreshPty(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asNobody)
	m, s := openPty(t)
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 33, Col: 101}); err != nil {
		t.Fatal(err)
	}
	os.Chown(s.Name(), 65534, 65534)
	c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "tty", "code": 5}))
	c.Stdin, c.Stdout, c.Stderr = s, s, s
	c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, true, 0
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				close(done)
				return
			}
		}
	}()
	errc := make(chan error, 1)
	go func() { errc <- c.Wait() }()
	var err error
	select {
	case err = <-errc:
	case <-time.After(20 * time.Second):
		c.Process.Kill()
		t.Fatalf("timed out; output %q", out.String())
	}
	s.Close()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 5 {
		t.Errorf("exit %v, want the agent's 5; output %q", err, out.String())
	}
	text := out.String()
	i, j := strings.Index(text, "{"), strings.LastIndex(text, "}")
	if i < 0 || j < i {
		t.Fatalf("no report in %q", text)
	}
	var rep map[string]string
	if err := json.Unmarshal([]byte(strings.ReplaceAll(text[i:j+1], "\r", "")), &rep); err != nil {
		t.Fatalf("report %q: %v", text[i:j+1], err)
	}
	var st unix.Stat_t
	unix.Stat(s.Name(), &st)
	if !strings.HasPrefix(rep["stdin"], "/dev/pts/") || rep["stdin_dev"] == "" || rep["stdin_dev"] == strconv.FormatUint(st.Dev, 10) {
		t.Errorf("agent's stdin %q on devpts %s: want a pty of the jail's own devpts, not the host's (%d)", rep["stdin"], rep["stdin_dev"], st.Dev)
	}
	if rep["winsize"] != "33x101" {
		t.Errorf("window size %q, want 33x101", rep["winsize"])
	}
	if rep["tiocsti_stdin"] != "EPERM" {
		t.Errorf("TIOCSTI on the agent's terminal: %q", rep["tiocsti_stdin"])
	}
}
