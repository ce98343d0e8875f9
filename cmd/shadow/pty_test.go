package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	// No process the jail can see holds the user's terminal, and the jail
	// has no controlling terminal of the user's to open.
	host := "=" + strconv.FormatUint(st.Dev, 10)
	for _, f := range strings.Fields(rep["tty_fds"]) {
		if strings.HasSuffix(f, host) {
			t.Errorf("LEAK: %s in the jail is the user's terminal (a host devpts device)", f)
		}
	}
	if !strings.Contains(rep["tty_fds"], "/fd/0=") {
		t.Errorf("the scan saw no terminal at all (%q): it proves nothing", rep["tty_fds"])
	}
	if "="+rep["dev_tty"] == host {
		t.Error("LEAK: the agent's /dev/tty is the user's terminal")
	}
}

// TestSuspendThroughTheShadow: ^Z on the agent's terminal stops the agent
// and gives the shell its terminal back (the shadow stops, the terminal is
// as the shell left it); the shell's fg (SIGCONT) makes it raw again and
// continues the agent. As root and as a user.
func TestSuspendThroughTheShadow(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, u := range []runAs{asRoot, asNobody} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			m, s := openPty(t)
			os.Chown(s.Name(), u.uid, u.gid)
			cooked, err := unix.IoctlGetTermios(int(m.Fd()), unix.TCGETS)
			if err != nil {
				t.Fatal(err)
			}
			c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "suspend"}))
			c.Stdin, c.Stdout, c.Stderr = s, s, s
			if c.SysProcAttr == nil {
				c.SysProcAttr = &syscall.SysProcAttr{}
			}
			c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, true, 0
			out := &syncBuf{}
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := m.Read(buf)
					out.write(buf[:n])
					if err != nil {
						return
					}
				}
			}()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			defer c.Process.Kill()
			waitOut(t, out, "READY")
			m.Write([]byte{0x1a})
			waitProcState(t, c.Process.Pid, "T", out)
			now, err := unix.IoctlGetTermios(int(m.Fd()), unix.TCGETS)
			if err != nil || now.Lflag != cooked.Lflag || now.Iflag != cooked.Iflag {
				t.Errorf("while stopped the terminal is not as the shell left it: lflag %#x, want %#x", now.Lflag, cooked.Lflag)
			}
			if strings.Contains(out.String(), "RESUMED") {
				t.Fatal("the agent ran on while the shadow was stopped")
			}
			syscall.Kill(c.Process.Pid, syscall.SIGCONT)
			waitOut(t, out, "RESUMED")
			raw, _ := unix.IoctlGetTermios(int(m.Fd()), unix.TCGETS)
			if raw.Lflag&unix.ICANON != 0 {
				t.Errorf("after fg the terminal is not raw again: lflag %#x", raw.Lflag)
			}
			m.Write([]byte("back\r"))
			waitOut(t, out, "ECHO back")
			err = c.Wait()
			if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() != 6 {
				t.Errorf("exit %v, want the agent's 6; output %q", err, out.String())
			}
		})
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) write(p []byte) { s.mu.Lock(); s.b.Write(p); s.mu.Unlock() }
func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func waitOut(t *testing.T, out *syncBuf, want string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q; it showed %q", want, out.String())
		}
	}
}

func waitProcState(t *testing.T, pid int, want string, out *syncBuf) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && string(b[i+2]) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow's state never became %s (%q); the terminal showed %q", want, b, out.String())
		}
	}
}

// TestNoTerminalInTheJail: without the agent's own terminal (stdin is not
// one) the user's terminal still stays outside: the agent's output to it
// is relayed, and nothing in the jail can open it as /dev/tty.
func TestNoTerminalInTheJail(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asNobody)
	m, s := openPty(t)
	os.Chown(s.Name(), 65534, 65534)
	c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "tty"}))
	c.Stdout, c.Stderr = s, s
	c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, true, 1
	out := &syncBuf{}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			out.write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	if err := c.Run(); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	waitOut(t, out, "}")
	text := out.String()
	i, j := strings.Index(text, "{"), strings.LastIndex(text, "}")
	var rep map[string]string
	if err := json.Unmarshal([]byte(strings.ReplaceAll(text[i:j+1], "\r", "")), &rep); err != nil {
		t.Fatalf("report %q: %v", text, err)
	}
	var st unix.Stat_t
	unix.Stat(s.Name(), &st)
	host := "=" + strconv.FormatUint(st.Dev, 10)
	if strings.Contains(rep["tty_fds"]+" ", host+" ") {
		t.Errorf("LEAK: a process in the jail holds the user's terminal: %q", rep["tty_fds"])
	}
	if rep["dev_tty"] != "ENXIO" {
		t.Errorf("/dev/tty in the jail: %q, want ENXIO (no controlling terminal)", rep["dev_tty"])
	}
}
