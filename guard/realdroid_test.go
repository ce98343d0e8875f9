package guard_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/managed"
)

// The real Droid's interactive TUI, unwrapped, with cco's
// /etc/factory/settings.json: does it run the guard's UserPromptSubmit gate?
// The TUI checks its API key with Factory's API before it starts, so the test
// serves a stand-in API (this test binary, CCO_GUARD_TEST_FAKE_FACTORY) on
// the loopback of the namespace it runs in (FACTORY_API_BASE_URL; the
// namespace has no other device: nothing leaves the machine), drives the TUI
// on a pty that answers its terminal queries, types a prompt and sends it.
// The gate blocks it, and the TUI shows the guard's reason; the stand-in API
// sees no model call.

// ptyPair opens a pty: the master for the test, the slave for the agent.
func ptyPair(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("/dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120})
	return m, s
}

// droidRun is a namespace with cco's Droid settings at /etc/factory and the
// stand-in API on its loopback.
type droidRun struct {
	droid, self, dir, home, ws, policy, apiLog, touched string
}

func newDroidRun(t *testing.T) *droidRun {
	t.Helper()
	realagents.Require(t)
	droid := filepath.Join(realagents.Dir(t, realagents.Droid), realagents.DroidBinary)
	if _, err := os.Stat(droid); err != nil {
		t.Fatalf("%s: %v (fix: remove %s, and the next run unpacks it again)", droid, err, realagents.CacheDir)
	}
	if os.Geteuid() != 0 {
		t.Fatal("the real-agent guard tests mount a private /etc in a namespace of their own: run them as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Missing(t, "ip (package iproute2) brings the namespace's loopback up")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := testenv.WorkDir(t)
	policy, home, ws := filepath.Join(dir, "policy"), filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	layer := filepath.Join(dir, "etc-layer", "factory")
	for _, d := range []string{policy, home, ws, layer} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The installed scripts' text (which fail closed), with this test binary
	// as their helper.
	helper := filepath.Join(dir, "sandbox-helper")
	body := "#!/bin/sh\nCCO_GUARD_TEST_HELPER=1 CCO_GUARD_TEST_HATCH=" + filepath.Join(dir, "no-allow-unwrapped") + " exec " + self + " \"$@\"\n"
	if err := os.WriteFile(helper, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := string(managed.DroidSettings())
	for _, hook := range []string{guard.HookSessionStart, guard.HookPromptGate} {
		p := filepath.Join(dir, hook)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(guard.Script(hook)), guard.HelperPath, helper)), 0o755); err != nil {
			t.Fatal(err)
		}
		settings = strings.ReplaceAll(settings, guard.ScriptPath(hook), p)
	}
	if err := os.WriteFile(filepath.Join(policy, "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	return &droidRun{droid: droid, self: self, dir: dir, home: home, ws: ws, policy: policy,
		apiLog: filepath.Join(dir, "api.log"), touched: filepath.Join(dir, "touched-by-the-tool")}
}

// cmd is droid with args in the namespace.
func (d *droidRun) cmd(ctx context.Context, args ...string) *exec.Cmd {
	setup := `set -e
mount -t overlay cco-test-etc -o "lowerdir=$1:/etc" /etc
mount --bind "$2" /etc/factory
if [ -e /run/cco ]; then mount -t tmpfs -o ro,mode=0755 cco-test-no-marker /run/cco; fi
ip link set lo up
"$3" >/dev/null 2>&1 &
sleep 1
shift 3
exec "$@"`
	c := exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--net", "sh", "-c", setup, "sh", filepath.Join(d.dir, "etc-layer"), d.policy, d.self, d.droid}, args...)...)
	c.Dir = d.ws
	c.Env = []string{"HOME=" + d.home, "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=xterm-256color", "LANG=C.UTF-8",
		"FACTORY_API_KEY=fk-dummy-key-for-an-offline-test", "FACTORY_API_BASE_URL=http://127.0.0.1:18931",
		"FACTORY_DROID_AUTO_UPDATE_ENABLED=false", "FACTORY_DISABLE_KEYRING=1",
		"CCO_GUARD_TEST_FAKE_FACTORY=127.0.0.1:18931", "CCO_GUARD_TEST_FAKE_FACTORY_LOG=" + d.apiLog,
		"CCO_GUARD_TEST_FAKE_FACTORY_TOUCH=" + d.touched}
	c.WaitDelay = 5 * time.Second
	// A group of its own: the stand-in API ends with it (killGroup).
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// killGroup ends what c left running: the stand-in API.
func killGroup(c *exec.Cmd) {
	if c.Process != nil {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
}

func TestRealDroidTUIBlockedUnwrapped(t *testing.T) {
	d := newDroidRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := d.cmd(ctx)
	m, s := ptyPair(t)
	defer m.Close()
	c.Stdin, c.Stdout, c.Stderr = s, s, s
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out strings.Builder
	var mu sync.Mutex
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := m.Read(buf)
			if n > 0 {
				b := buf[:n]
				mu.Lock()
				out.Write(b)
				mu.Unlock()
				// The TUI waits for the terminal's answers.
				for q, a := range map[string]string{"\x1b]11;?": "\x1b]11;rgb:0000/0000/0000\x1b\\", "\x1b]10;?": "\x1b]10;rgb:ffff/ffff/ffff\x1b\\",
					"\x1b[6n": "\x1b[1;1R", "\x1b[c": "\x1b[?62;c", "\x1b[?u": "\x1b[?0u"} {
					if strings.Contains(string(b), q) {
						m.WriteString(a)
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	text := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	wait := func(want string, d time.Duration) bool {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if strings.Contains(text(), want) {
				return true
			}
		}
		return false
	}
	defer func() { killGroup(c); c.Wait() }()
	// A workspace it has not seen: Droid asks whether to trust it first.
	if wait("Trust this folder?", 60*time.Second) {
		time.Sleep(time.Second)
		m.WriteString("\r")
	}
	if !wait("for help", 60*time.Second) {
		t.Fatalf("the TUI did not show its prompt box:\n%q", text())
	}
	time.Sleep(2 * time.Second)
	m.WriteString("hello")
	time.Sleep(time.Second)
	m.WriteString("\r")
	const blocked = "cco guard: blocked: this droid is not running inside a cco jail"
	if !wait("cco guard: blocked", 30*time.Second) {
		t.Errorf("the TUI did not show the guard's block:\n%q", text())
	}
	// The reason as the TUI draws it may be wrapped; its start is whole.
	if !strings.Contains(strings.Join(strings.Fields(stripANSI(text())), " "), blocked) {
		t.Errorf("the TUI's block lacks %q", blocked)
	}
	b, _ := os.ReadFile(d.apiLog)
	if !strings.Contains(string(b), "/api/cli/whoami") {
		t.Errorf("the stand-in API saw no key check (did the TUI reach it?):\n%s", b)
	}
	if strings.Contains(string(b), "/api/llm/") {
		t.Errorf("the prompt reached the model although the gate blocked it:\n%s", b)
	}
}

// stripANSI drops terminal escape sequences from s.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		if j < len(s) && s[j] == '[' {
			for j++; j < len(s) && (s[j] < 0x40 || s[j] > 0x7e); j++ {
			}
		} else if j < len(s) && s[j] == ']' {
			for ; j < len(s) && s[j] != 0x07 && !(s[j] == '\\' && s[j-1] == 0x1b); j++ {
			}
		}
		i = j
	}
	return b.String()
}

// Plain `droid exec PROMPT`, unwrapped: Droid runs no UserPromptSubmit
// there, so the prompt reaches the (stand-in) model; the model asks for a
// shell command, and the guard's PreToolUse gate denies it: the command
// never runs. With the gate passing (here: no managed settings), the same
// run does run it, which shows the tool call is real.
func TestRealDroidExecToolCallDeniedUnwrapped(t *testing.T) {
	d := newDroidRun(t)
	for _, withPolicy := range []bool{true, false} {
		if !withPolicy {
			if err := os.WriteFile(filepath.Join(d.policy, "settings.json"), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		os.Remove(d.touched)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		c := d.cmd(ctx, "exec", "--auto", "high", "touch a file")
		out, err := c.CombinedOutput()
		killGroup(c)
		cancel()
		_, touched := os.Stat(d.touched)
		b, _ := os.ReadFile(d.apiLog)
		if !strings.Contains(string(b), "/api/llm/o/v1/responses") {
			t.Fatalf("droid exec did not call the model (exit %v):\n%s\n%s", err, out, b)
		}
		if withPolicy && touched == nil {
			t.Errorf("LEAK: the tool call ran although the guard's PreToolUse gate denies it:\n%s", out)
		}
		if !withPolicy && touched != nil {
			t.Errorf("without cco's settings the tool call did not run either, so the test proves nothing (exit %v):\n%s", err, out)
		}
	}
}
