package attack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/engine"
)

// The classes of the processes the jail shows (issue 30, items 0, 3 and
// 4): what they hold of the host's environment, whether the agent can
// reach into any of cco's, and whether a stop the jail only claims
// suspends the launcher.

// hostSecrets are variables of the host environment a launch must not
// carry into any process of the jail but where the spec passes them (the
// agent's own login variable, into its own jail). The proxy's points at
// the discard port of the loopback: nothing in the classes dials it.
func hostSecrets() map[string]string {
	return map[string]string{
		"OPENAI_API_KEY":        "sk-CCO-ENV-openai-" + tag,
		"ANTHROPIC_API_KEY":     "sk-ant-CCO-ENV-anthropic-" + tag,
		"GITHUB_TOKEN":          "ghp_CCO-ENV-github-" + tag,
		"AWS_SECRET_ACCESS_KEY": "CCO-ENV-aws-" + tag,
		"https_proxy":           "http://user:CCO-ENV-proxy-" + tag + "@127.0.0.1:9",
		"CCO_HOST_ONLY":         "CCO-ENV-host-only-" + tag,
	}
}

// jailProc is what the probe read of one process of the jail (testdata/probe's
// Proc).
type jailProc struct {
	Pid     int    `json:"pid"`
	Comm    string `json:"comm"`
	Cmdline string `json:"cmdline"`
	Environ string `json:"environ"`
	Attach  string `json:"attach"`
	Seize   string `json:"seize"`
	VMRead  string `json:"vm_read"`
	Mem     string `json:"mem"`
	GetFD   string `json:"getfd"`
	Control bool   `json:"control"`
}

// String names p by its pid, name and the start of its command line.
func (p jailProc) String() string {
	cmd := strings.ReplaceAll(p.Cmdline, "\x00", " ")
	if len(cmd) > 80 {
		cmd = cmd[:80] + "..."
	}
	return fmt.Sprintf("process %d (%s: %s)", p.Pid, p.Comm, cmd)
}

// cco reports whether p is a process of cco's: the helper, as the jail's
// pid 1 or as the agent's starter.
func (p jailProc) cco(r *jailtest.Root) bool {
	argv0, _, _ := strings.Cut(p.Cmdline, "\x00")
	return argv0 == r.Dir+"/usr/libexec/cco/sandbox-helper" || p.Pid == 1
}

// hostenvSession is one launch of the probe with the host secrets in the shadow's
// environment, on a pipe or on a pty; the report is the probe's.
func hostenvSession(t *testing.T, r *jailtest.Root, w *world, agentName string, onPty bool, params map[string]any) jailtest.Result {
	t.Helper()
	b, _ := json.Marshal(params)
	c := w.Cmd(r, agentName, w.ws, "probe", string(b))
	for k, v := range hostSecrets() {
		c.Env = append(c.Env, k+"="+v)
	}
	defer testenv.Launching(t)()
	if !onPty {
		return jailtest.Run(t, c, launchTimeout)
	}
	return runOnPty(t, c, w.U, launchTimeout)
}

// runOnPty runs c as the session leader of a fresh host pty (the user's
// terminal) and returns what the terminal showed, with the report decoded.
func runOnPty(t *testing.T, c *exec.Cmd, u jailtest.RunAs, timeout time.Duration) jailtest.Result {
	t.Helper()
	m, s := userPty(t, u)
	c.Stdin, c.Stdout, c.Stderr = s, s, s
	c.SysProcAttr.Setpgid = false
	c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, true, 0
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 64<<10)
		for {
			n, err := m.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	var r jailtest.Result
	timer := time.AfterFunc(timeout, func() { r.TimedOut = true; c.Process.Kill() })
	err := c.Wait()
	timer.Stop()
	select {
	case <-read:
	case <-time.After(2 * time.Second):
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r.Stdout = strings.ReplaceAll(out.String(), "\r", "")
	if i, j := strings.Index(r.Stdout, "{"), strings.LastIndex(r.Stdout, "}"); i >= 0 && j > i {
		json.Unmarshal([]byte(r.Stdout[i:j+1]), &r.Report)
	}
	return r
}

// userPty is a pty pair of the host's devpts, its slave the user's.
func userPty(t *testing.T, u jailtest.RunAs) (master, slave *os.File) {
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
	name := "/dev/pts/" + strconv.Itoa(n)
	os.Chown(name, u.UID, u.GID)
	s, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80})
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// TestNoHostEnvironmentInTheJail is item 0: after a launch with secrets in
// the host environment, no process the jail shows (its pid 1, the helper,
// the agent) holds in /proc/PID/environ or /proc/PID/cmdline anything the
// agent's own environment does not: as root and as a user, on a pipe and
// on a pty, with egress on and off. The readings are the jail's; the
// verdict compares them, on the host, with the secrets and the agent's
// environment.
func TestNoHostEnvironmentInTheJail(t *testing.T) {
	testenv.RequireRoot(t)
	r := shared.Get(t)
	for _, egress := range []string{"on", "off"} {
		t.Run("egress-"+egress, func(t *testing.T) {
			if egress == "off" {
				r.WithConfig(t, "egress = \"off\"\n")
			}
			for _, agentName := range []string{"claude", "codex"} {
				for _, u := range users {
					for _, onPty := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/%s/%s", agentName, u.Name, streamName(onPty)), func(t *testing.T) {
							w := newWorld(t, u)
							sess := hostenvSession(t, r, w, agentName, onPty, map[string]any{"mode": "", "procs": true})
							judgeEnviron(t, r, sess)
						})
					}
				}
			}
		})
	}
}

// streamName names a session's standard streams.
func streamName(onPty bool) string {
	if onPty {
		return "pty"
	}
	return "pipe"
}

func judgeEnviron(t *testing.T, r *jailtest.Root, sess jailtest.Result) {
	t.Helper()
	if sess.Code != 0 || sess.Report == nil || sess.Report["procs"] == "" {
		t.Fatalf("the session did not run the probe: exit %d\noutput %s\nstderr %s", sess.Code, sess.Stdout, sess.Stderr)
	}
	var env []string
	var procs []jailProc
	if err := json.Unmarshal([]byte(sess.Report["env"]), &env); err != nil {
		t.Fatalf("the probe's environment %q: %v", sess.Report["env"], err)
	}
	if err := json.Unmarshal([]byte(sess.Report["procs"]), &procs); err != nil {
		t.Fatalf("the probe's processes %q: %v", sess.Report["procs"], err)
	}
	own := map[string]bool{}
	ownText := strings.Join(env, "\x00")
	for _, kv := range env {
		own[kv] = true
	}
	sawPID1, sawCco := false, 0
	for _, p := range procs {
		what := p.String()
		if p.Pid == 1 {
			sawPID1 = !strings.HasPrefix(p.Cmdline, "error: ")
		}
		if p.cco(r) {
			sawCco++
		}
		for k, v := range hostSecrets() {
			if strings.Contains(ownText, v) {
				continue // the spec passed it: the agent's own
			}
			if strings.Contains(p.Environ, v) {
				t.Errorf("LEAK: the host's %s is in the environ of %s in the jail", k, what)
			}
			if strings.Contains(p.Cmdline, v) {
				t.Errorf("LEAK: the host's %s is in the cmdline of %s in the jail", k, what)
			}
		}
		if strings.HasPrefix(p.Environ, "error: ") {
			continue
		}
		for _, kv := range strings.Split(strings.TrimRight(p.Environ, "\x00"), "\x00") {
			if kv != "" && !own[kv] && !strings.HasPrefix(kv, "PWD=") {
				t.Errorf("LEAK: %s holds %q, which the agent's own environment does not", what, kv)
			}
		}
		if p.cco(r) && !strings.HasPrefix(p.Environ, "error: ") {
			t.Errorf("the environ of cco's %s is readable in the jail (%d bytes): it is not sealed", what, len(p.Environ))
		}
	}
	if !sawPID1 || sawCco == 0 {
		t.Errorf("the scan did not see the jail's pid 1 and cco's processes (%d of cco's), it proves nothing: %+v", sawCco, procs)
	}
	for _, v := range hostSecrets() {
		if strings.Contains(sess.Stderr, v) {
			t.Errorf("LEAK: the session's stderr holds the host secret %q", v)
		}
	}
	// The agent still gets what its spec passes: a variable of its own
	// environment's making, not the host's.
	if !strings.Contains(ownText, "HOME=") {
		t.Errorf("the agent's environment has no HOME: %q", env)
	}
}

// refusedErr reports whether an attempt into a process was refused by the
// kernel (ptrace's checks, or seccomp for pidfd_getfd).
func refusedErr(s string) bool {
	return s == "EPERM" || s == "EACCES" || s == "ENOSYS" || s == "pidfd_open EPERM" || s == "pidfd_open ENOSYS"
}

// TestCcoProcessesCannotBeTraced is item 3: the probe tries ptrace attach
// and seize, process_vm_readv, /proc/PID/mem and pidfd_getfd on every
// process the jail shows; each of cco's refuses them all, while a child of
// the probe's own lets the same calls through (the control: ptrace works in
// the jail, so the refusals are the seal's). On a pipe and on a pty (the
// helper holding the agent's terminal), as root and as a user.
func TestCcoProcessesCannotBeTraced(t *testing.T) {
	testenv.RequireRoot(t)
	r := shared.Get(t)
	for _, agentName := range []string{"claude", "codex"} {
		for _, u := range users {
			for _, onPty := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/%s", agentName, u.Name, streamName(onPty)), func(t *testing.T) {
					t.Parallel()
					w := newWorld(t, u)
					// The sealed helper still serves the agent: a CONNECT
					// through its proxy endpoint (the egress bridge on a
					// root's terminal) gets the proxy's refusal of the
					// loopback, which it never dials.
					sess := hostenvSession(t, r, w, agentName, onPty, map[string]any{"trace": true,
						"flood": map[string]any{"count": 0, "size": 1, "targets": []string{"127.0.0.1:9"}}})
					if got := sess.Report["flood:0"]; !strings.HasPrefix(got, "HTTP/1.1 403") {
						t.Errorf("a CONNECT through the jail's proxy endpoint got %q, want the proxy's 403", got)
					}
					if sess.Code != 0 || sess.Report["trace"] == "" {
						t.Fatalf("the session did not run the probe: exit %d\noutput %s\nstderr %s", sess.Code, sess.Stdout, sess.Stderr)
					}
					var procs []jailProc
					if err := json.Unmarshal([]byte(sess.Report["trace"]), &procs); err != nil {
						t.Fatalf("the probe's report %q: %v", sess.Report["trace"], err)
					}
					cco, control := 0, false
					for _, p := range procs {
						what := p.String()
						if p.Control {
							control = true
							if p.Attach != "ok" || p.Seize != "ok" || p.Mem != "ok" || refusedErr(p.VMRead) {
								t.Errorf("the control (the probe's own child) could not be traced (attach %s, seize %s, mem %s, process_vm_readv %s): the refusals prove nothing", p.Attach, p.Seize, p.Mem, p.VMRead)
							}
							continue
						}
						if !p.cco(r) {
							continue
						}
						cco++
						for call, got := range map[string]string{"PTRACE_ATTACH": p.Attach, "PTRACE_SEIZE": p.Seize,
							"process_vm_readv": p.VMRead, "open /proc/PID/mem": p.Mem, "pidfd_getfd": p.GetFD} {
							if !refusedErr(got) {
								t.Errorf("LEAK: %s of cco's %s from the jail: %s", call, what, got)
							}
						}
						if !strings.HasPrefix(p.Environ, "error: ") {
							t.Errorf("LEAK: the environ of cco's %s is readable in the jail", what)
						}
					}
					if cco == 0 || !control {
						t.Errorf("the probe saw %d of cco's processes and control %v: it proves nothing: %+v", cco, control, procs)
					}
				})
			}
		}
	}
}

// TestFakedStopLeavesTheLauncherRunning is item 4: a helper that tells the
// launcher the agent stopped while it runs on (as a session that traced the
// helper could) does not suspend the launcher: its state on the host stays
// running, the agent's output keeps coming through, and the helper is told
// to continue. The real ^Z is TestSuspendThroughTheShadow
// (cmd/shadow/pty_test.go). As root and as a user. The shared root's helper
// is swapped for the rogue one for the test's length, so it runs alone.
func TestFakedStopLeavesTheLauncherRunning(t *testing.T) {
	testenv.RequireRoot(t)
	r := shared.Get(t)
	helper := r.Dir + "/usr/libexec/cco/sandbox-helper"
	rogue := t.TempDir() + "/rogue"
	mod, err := jailtest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b := exec.Command("go", "build", "-o", rogue, "./sandbox/attack/testdata/fakestop")
	b.Dir, b.Env = mod, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := b.CombinedOutput(); err != nil {
		t.Fatalf("building the rogue helper: %v\n%s", err, out)
	}
	saved := helper + ".real"
	if err := os.Rename(helper, saved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(saved, helper) })
	if out, err := exec.Command("cp", rogue, helper).CombinedOutput(); err != nil {
		t.Fatalf("installing the rogue helper: %v %s", err, out)
	}
	os.Chmod(helper, 0o755)
	// Without egress the helper has no endpoint to make: the rogue need
	// only speak the terminal's protocol.
	r.WithConfig(t, "egress = \"off\"\n")
	for _, u := range users {
		t.Run(u.Name, func(t *testing.T) {
			w := newWorld(t, u)
			c := w.Cmd(r, "claude", w.ws, "probe", "{}")
			m, s := userPty(t, u)
			c.Stdin, c.Stdout, c.Stderr = s, s, s
			c.SysProcAttr.Setpgid = false
			c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, true, 0
			defer testenv.Launching(t)()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			defer c.Process.Kill()
			s.Close()
			out := &lockedBuf{}
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
			waitFor := func(want string) {
				t.Helper()
				for deadline := time.Now().Add(15 * time.Second); !strings.Contains(out.String(), want); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("the terminal never showed %q; it showed %q", want, out.String())
					}
				}
			}
			waitFor("FAKED STOP SENT")
			// While the rogue waits for its answer, the launcher runs on
			// and relays the agent's output.
			before := strings.Count(out.String(), "ALIVE")
			for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				if st := hostState(c.Process.Pid); st == "T" {
					syscall.Kill(c.Process.Pid, syscall.SIGCONT)
					t.Fatalf("LEAK: a faked stop suspended the launcher (state %s) while the jail ran on; the terminal showed %q", st, out.String())
				}
			}
			if strings.Count(out.String(), "ALIVE") <= before {
				t.Errorf("the agent's output stopped coming through after the faked stop: %q", out.String())
			}
			waitFor("ROGUE CONTINUED")
			errc := make(chan error, 1)
			go func() { errc <- c.Wait() }()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("the session ended with %v, want 0; the terminal showed %q", err, out.String())
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("the session did not end; the terminal showed %q", out.String())
			}
		})
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) write(p []byte) { l.mu.Lock(); l.b.Write(p); l.mu.Unlock() }

func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// hostState is the state letter of the host's /proc/PID/stat.
func hostState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "?"
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return string(b[i+2])
	}
	return "?"
}

// TestJailEnvironmentNotOnHostCommandLines: what the spec passes into the
// jail (the agent's own login variable) is on no command line of the host
// while the session runs: bwrap reads its --setenv options from a pipe,
// since /proc/PID/cmdline is every host user's to read. Taken on the host,
// while the probe waits in the jail.
func TestJailEnvironmentNotOnHostCommandLines(t *testing.T) {
	testenv.RequireRoot(t)
	r := shared.Get(t)
	for _, u := range users {
		t.Run(u.Name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, u)
			ready, until := w.ws+"/probe-ready", w.ws+"/probe-until"
			b, _ := json.Marshal(map[string]any{"listen": []string{"127.0.0.1:0"}, "ready": ready, "until": until, "procs": true})
			c := w.Cmd(r, "claude", w.ws, "probe", string(b))
			for k, v := range hostSecrets() {
				c.Env = append(c.Env, k+"="+v)
			}
			var stdout, stderr bytes.Buffer
			c.Stdout, c.Stderr = &stdout, &stderr
			defer testenv.Launching(t)()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { c.Process.Kill(); c.Wait() }()
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the probe never got ready; stderr %s", stderr.String())
				}
			}
			passed := hostSecrets()["ANTHROPIC_API_KEY"]
			bwraps := 0
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				if _, err := strconv.Atoi(e.Name()); err != nil {
					continue
				}
				cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
				if err != nil || !bytes.Contains(cmd, []byte(w.Base)) && !bytes.Contains(cmd, []byte(r.Dir)) {
					continue
				}
				// The jail's first process on the host: bwrap, or cco's
				// own engine's child, or the jail's pid 1 it became.
				if bytes.Contains(cmd, []byte("bwrap")) || bytes.HasPrefix(cmd, []byte("sandbox-helper\x00"+engine.HelperMode+"\x00")) ||
					bytes.HasPrefix(cmd, []byte("sandbox-helper\x00init\x00--status-fd\x00")) || bytes.HasPrefix(cmd, []byte("sandbox-helper\x00exec\x00--status-fd\x00")) {
					bwraps++
				}
				for k, v := range hostSecrets() {
					if bytes.Contains(cmd, []byte(v)) {
						t.Errorf("LEAK: the host's process %s shows %s on its command line: %.120q", e.Name(), k, cmd)
					}
				}
			}
			if bwraps == 0 {
				t.Errorf("no bwrap or engine child of this session's on the host: the scan proves nothing")
			}
			os.WriteFile(until, nil, 0o644)
			if err := c.Wait(); err != nil {
				t.Errorf("the session: %v; stderr %s", err, stderr.String())
			}
			// The value did reach the agent: the spec passes claude its own
			// login variable, through bwrap's options.
			var rep map[string]string
			json.Unmarshal(stdout.Bytes(), &rep)
			if !strings.Contains(rep["env"], "ANTHROPIC_API_KEY="+passed) {
				t.Errorf("claude's own ANTHROPIC_API_KEY did not reach its jail: %q", rep["env"])
			}
		})
	}
}
