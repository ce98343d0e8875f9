package guard

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
)

// How a test jail presents the marker.
const (
	markerReal  = "ro-bind"    // as the shadow does: a read-only bind at MarkerPath
	markerRW    = "rw-bind"    // a read-write bind of a file the user can write
	markerPlain = "plain-file" // a plain file in a directory the user can write
	markerNone  = "none"
)

type jail struct {
	agent   string // the marker's agent
	egress  string
	marker  string
	home    string
	env     map[string]string
	noNet   bool // --unshare-net
	seccomp bool
	keepCap bool // leave the capabilities alone (a jail built without --cap-drop)
	rwRoot  bool // bind / read-write (the verifier only asks access(2), it never writes)
	hostPid bool // share the host's pid namespace
}

// seccompAllow is the smallest seccomp program bwrap accepts: one
// instruction, "ret ALLOW", as u16 op, u8 jt, u8 jf, u32 k, little-endian.
func seccompAllow(t *testing.T) *os.File {
	t.Helper()
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint16(0x06)) // BPF_RET|BPF_K
	b.Write([]byte{0, 0})
	binary.Write(&b, binary.LittleEndian, uint32(0x7fff0000)) // SECCOMP_RET_ALLOW
	p := filepath.Join(t.TempDir(), "seccomp.bpf")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// run starts the test binary as the helper inside real bwrap and feeds it
// the hook input.
func (j jail) run(t *testing.T, hook string, args []string, stdin string) (int, string, string) {
	t.Helper()
	bwrap := testenv.RequireBwrap(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if j.home == "" {
		j.home = t.TempDir()
	}
	argv := []string{"--die-with-parent", "--unshare-ipc", "--unshare-uts"}
	if !j.hostPid {
		argv = append(argv, "--unshare-pid")
	}
	if os.Geteuid() != 0 {
		argv = append(argv, "--unshare-user")
	}
	if j.noNet {
		argv = append(argv, "--unshare-net")
	}
	if !j.keepCap {
		argv = append(argv, "--cap-drop", "ALL")
	}
	argv = append(argv, "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", j.home, "--setenv", helperEnv, "1")
	for k, v := range j.env {
		argv = append(argv, "--setenv", k, v)
	}
	rootBind := "--ro-bind"
	if j.rwRoot {
		rootBind = "--bind"
	}
	argv = append(argv, rootBind, "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run")
	mdir := t.TempDir()
	mfile := filepath.Join(mdir, "jail")
	mb, _ := json.Marshal(sandbox.Marker{Schema: sandbox.MarkerSchema, Agent: j.agent, Session: "s1", Workspace: "/work/proj", Egress: j.egress})
	if err := os.WriteFile(mfile, mb, 0o666); err != nil {
		t.Fatal(err)
	}
	switch j.marker {
	case markerReal:
		argv = append(argv, "--dir", filepath.Dir(sandbox.MarkerPath), "--ro-bind", mfile, sandbox.MarkerPath)
	case markerRW:
		argv = append(argv, "--dir", filepath.Dir(sandbox.MarkerPath), "--bind", mfile, sandbox.MarkerPath)
	case markerPlain:
		argv = append(argv, "--bind", mdir, filepath.Dir(sandbox.MarkerPath))
	}
	cmd := exec.Command(bwrap)
	if j.seccomp {
		cmd.ExtraFiles = []*os.File{seccompAllow(t)} // fd 3
		argv = append(argv, "--seccomp", "3")
	}
	argv = append(argv, "--", exe, "guard", hook)
	cmd.Args = append([]string{"bwrap"}, append(argv, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("bwrap: %v", err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func realJail(agent string) jail {
	return jail{agent: agent, egress: "off", marker: markerReal, noNet: true, seccomp: true}
}

func sysMsg(t *testing.T, out string) string {
	t.Helper()
	var m struct{ SystemMessage string }
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.SystemMessage == "" {
		t.Fatalf("stdout %q is not a systemMessage JSON (%v)", out, err)
	}
	return m.SystemMessage
}

func TestJailAllowsAndVerifies(t *testing.T) {
	for _, agent := range agentNames {
		t.Run(agent, func(t *testing.T) {
			j := realJail(agent)
			start, prompt := inputs(agent)
			code, out, errOut := j.run(t, HookPromptGate, []string{agent}, prompt)
			if code != 0 || out != "" {
				t.Fatalf("gate inside the jail: exit %d stdout %q stderr %q, want a silent 0", code, out, errOut)
			}
			code, out, errOut = j.run(t, HookSessionStart, []string{agent}, start)
			if code != 0 {
				t.Fatalf("verifier: exit %d stderr %q", code, errOut)
			}
			msg := sysMsg(t, out)
			if !strings.Contains(msg, "inside a cco jail for "+agent) || strings.Contains(msg, "FAILED") {
				t.Fatalf("verifier message %q, want every check passed", msg)
			}
			t.Logf("verifier: %s", msg)
			for _, c := range checks {
				if !strings.Contains(msg, c.name) {
					t.Errorf("verifier message %q does not report %q", msg, c.name)
				}
			}
		})
	}
}

// Near-jails that a user can build without the shadow: each lacks one of the
// things only the shadow arranges, and each is still blocked.
func TestJailForgeriesBlocked(t *testing.T) {
	forged := map[string]string{"CCO_JAIL": "1", "CCO_SANDBOX": "1", "CCO_JAIL_MARKER": "/tmp/jail"}
	cases := map[string]struct {
		j    jail
		want string
	}{
		"marker on a read-write bind": {jail{agent: "claude", egress: "off", marker: markerRW, noNet: true, seccomp: true, env: forged}, "mounted read-write"},
		"marker as a plain file":      {jail{agent: "claude", egress: "off", marker: markerPlain, noNet: true, seccomp: true, env: forged}, "not a mount point"},
		"no marker, forged env":       {jail{agent: "codex", egress: "off", marker: markerNone, noNet: true, seccomp: true, env: forged}, "not a mount point"},
		"capabilities kept":           {jail{agent: "codex", egress: "off", marker: markerReal, noNet: true, keepCap: true, env: forged}, "capabilities"},
	}
	if os.Geteuid() != 0 {
		delete(cases, "capabilities kept") // in a user namespace bwrap drops them anyway
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			agent := c.j.agent
			start, prompt := inputs(agent)
			code, out, errOut := c.j.run(t, HookPromptGate, []string{agent}, prompt)
			if code != 2 || !strings.Contains(errOut, "blocked") || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d stdout %q stderr %q, want 2 naming %q", code, out, errOut, c.want)
			}
			code, out, _ = c.j.run(t, HookSessionStart, []string{agent}, start)
			if msg := sysMsg(t, out); code != 0 || !strings.Contains(msg, "WARNING") || !strings.Contains(msg, "Every prompt will be blocked") {
				t.Fatalf("verifier exit %d message %q, want a loud warning", code, msg)
			}
		})
	}
}

// Each verifier check must catch its failure inside a real jail.
func TestJailVerifierReportsFailures(t *testing.T) {
	home := func(t *testing.T, files ...string) string {
		h := t.TempDir()
		for _, f := range files {
			p := filepath.Join(h, f)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return h
	}
	cases := []struct {
		name string
		j    func(t *testing.T) jail
		want string
	}{
		{"mask not empty", func(t *testing.T) jail {
			j := realJail("codex")
			j.home = home(t, ".codex/packages/standalone/current")
			return j
		}, "masks empty: "},
		{"other agent's login readable", func(t *testing.T) jail {
			j := realJail("claude")
			j.home = home(t, ".codex/auth.json")
			return j
		}, "other agent's login absent: "},
		{"host token in env", func(t *testing.T) jail {
			j := realJail("claude")
			j.env = map[string]string{"GITHUB_TOKEN": "ghp_secretvalue", "OPENAI_API_KEY": "sk-other", "ANTHROPIC_API_KEY": "own", "DEPLOY_PASSWORD": "x", "SSH_AUTH_SOCK": "/run/user/0/ssh"}
			return j
		}, "no host tokens in env: DEPLOY_PASSWORD, GITHUB_TOKEN, OPENAI_API_KEY, SSH_AUTH_SOCK set"},
		{"no seccomp", func(t *testing.T) jail {
			j := realJail("claude")
			j.seccomp = false
			return j
		}, `seccomp filter: Seccomp is "0"`},
		{"root read-write", func(t *testing.T) jail {
			j := realJail("claude")
			j.rwRoot = true
			return j
		}, "read-only root: / is on a read-write mount"},
		{"host pid namespace", func(t *testing.T) jail {
			j := realJail("codex")
			j.hostPid = true
			return j
		}, "pid namespace: pid 1 is"},
		{"host network while egress is off", func(t *testing.T) jail {
			j := realJail("codex")
			j.noNet = false
			return j
		}, `egress: egress is "off" but the jail sees`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := c.j(t)
			start, _ := inputs(j.agent)
			code, out, errOut := j.run(t, HookSessionStart, []string{j.agent}, start)
			if code != 0 {
				t.Fatalf("exit %d stderr %q", code, errOut)
			}
			msg := sysMsg(t, out)
			if !strings.Contains(msg, "jail check FAILED") || !strings.Contains(msg, c.want) {
				t.Fatalf("message %q lacks %q", msg, c.want)
			}
			if strings.Contains(msg, "ghp_secretvalue") {
				t.Fatal("the verifier echoed a secret value")
			}
		})
	}
}
