package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/engine"
)

func TestExitStatusIsTheAgents(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asNobody)
	for _, code := range []int{0, 1, 7, 125} {
		r := runCmd(t, w.cmd(root, "codex", w.ws, "probe", params(map[string]any{"mode": "exit", "code": code})))
		if r.code != code {
			t.Errorf("agent exit %d: shadow exit %d (%s)", code, r.code, r.stderr)
		}
	}
}

// waitFile waits for the fake agent to say it started.
func waitFile(t *testing.T, p string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(p); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", p)
}

func TestSignalsForwarded(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		w := newWorld(t, asNobody)
		c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "signal", "tag": "s"}))
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		waitFile(t, w.ws+"/started-s")
		c.Process.Signal(sig)
		err := c.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 42 || !strings.Contains(out.String(), "got "+sig.String()) {
			t.Errorf("%v: exit %v, output %q; want the agent's own 42 after it got the signal", sig, err, out.String())
		}
	}
}

// TestSigkillLeavesNothing is item 16, and the stale-placeholder half of
// the mount-point rule: after SIGKILL of the shadow no jailed process
// survives, and the next launch removes the placeholders it left.
func TestSigkillLeavesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, u := range []runAs{asRoot, asNobody} {
		w := newWorld(t, u)
		tag := "k" + strconv.FormatInt(time.Now().UnixNano(), 36)
		c := w.cmd(root, "codex", w.ws2, "probe", params(map[string]any{"mode": "sleep", "tag": tag}))
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		waitFile(t, w.ws2+"/started-"+tag)
		if _, err := os.Lstat(w.ws2 + "/.git/hooks"); err != nil {
			t.Fatalf("no placeholder while running: %v", err)
		}
		// The egress proxy's socket, in the user's socket directory.
		sock := filepath.Join(os.TempDir(), "cco-"+strconv.Itoa(u.uid), strconv.Itoa(c.Process.Pid)+"-*.sock")
		if m, _ := filepath.Glob(sock); len(m) != 1 {
			t.Fatalf("the egress socket %s while running: %v", sock, m)
		}
		c.Process.Kill()
		c.Wait()
		deadline := time.Now().Add(3 * time.Second)
		for {
			left := processesWith(tag)
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: jailed processes survived SIGKILL of the shadow: %v", u.name, left)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := os.Lstat(w.ws2 + "/.git/hooks"); err != nil {
			t.Fatalf("the killed shadow's placeholder should still be there: %v", err)
		}
		os.Remove(w.ws2 + "/started-" + tag)
		r := runCmd(t, w.cmd(root, "codex", w.ws, "probe", params(map[string]any{"mode": "exit"})))
		if r.code != 0 {
			t.Fatalf("next launch: %d %s", r.code, r.stderr)
		}
		noStrays(t, w)
		if m, _ := filepath.Glob(sock); len(m) != 0 {
			t.Errorf("the killed shadow's egress socket outlived the next launch: %v", m)
		}
	}
}

func processesWith(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, e.Name()+":"+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

func TestNestedLaunchUsesTheSameJail(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	// With a sandbox.toml, which a user's jail shows owned by the overflow
	// uid: the nested launch must still read it.
	withConfig(t, root, "egress = \"off\"\n")
	for _, inner := range []string{"claude", "codex"} {
		w := newWorld(t, asNobody)
		r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "nested", "root": root, "tag": inner})))
		if r.code != 0 || r.report == nil || r.report["nested_err"] != "" {
			t.Fatalf("exit %d %v\n%s", r.code, r.report, r.stderr)
		}
		var in map[string]string
		if err := json.Unmarshal([]byte(r.report["nested"]), &in); err != nil {
			t.Fatalf("nested report %q: %v", r.report["nested"], err)
		}
		if in["pidns"] != r.report["pidns"] || in["mntns"] != r.report["mntns"] {
			t.Errorf("nested %s ran in another jail: pid %s vs %s, mnt %s vs %s", inner, in["pidns"], r.report["pidns"], in["mntns"], r.report["mntns"])
		}
		argv := strings.Split(in["argv"], "\x1f")
		wantBin := map[string]string{"claude": "/usr/libexec/cco/claude/current/claude", "codex": "/usr/libexec/cco/codex-dist/current/bin/codex"}[inner]
		wantFlag := map[string]string{"claude": "--no-chrome", "codex": "--dangerously-bypass-approvals-and-sandbox"}[inner]
		if len(argv) < 2 || argv[0] != root+wantBin || argv[1] != wantFlag {
			t.Errorf("nested %s argv %q", inner, argv)
		}
	}
}

// A marker file alone, on the host, must not pass for a jail.
func TestHelperRefusesOnTheHost(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asNobody)
	for _, u := range []runAs{asRoot, asNobody} {
		// exec, and init (the jail's pid 1), which would start the agent
		// itself.
		for _, mode := range []string{"exec", "init"} {
			w.u = u
			c := w.cmd(root, "claude", w.ws, mode, "--", root+"/bin/fakeagent", "probe", `{"mode":"exit"}`)
			c.Path = root + "/usr/libexec/cco/sandbox-helper"
			c.Args[0] = c.Path
			r := runCmd(t, c)
			if r.code != 126 || !strings.Contains(r.stderr, "refusing to run") || !strings.Contains(r.stderr, "outside a cco jail") {
				t.Errorf("%s: helper %s on the host: %d %q", u.name, mode, r.code, r.stderr)
			}
		}
	}
}

func TestHelperGuardMode(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"/usr/libexec/cco/sandbox-helper", "guard", "prompt-gate"}, strings.NewReader("{}"), &out, &errb)
	// The guard is another package's; its result must be passed through.
	if code != 2 || !strings.Contains(errb.String(), "guard") {
		t.Errorf("guard mode: %d %q", code, errb.String())
	}
	if code := run([]string{"sandbox-helper", "frobnicate"}, nil, &out, &errb); code != 2 {
		t.Errorf("unknown mode: %d", code)
	}
}

func TestUnknownArgv0(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"/usr/local/bin/aider"}, nil, &out, &errb); code != 126 || !strings.Contains(errb.String(), `"aider" is not a cco agent name`) {
		t.Errorf("unknown name: %d %q", code, errb.String())
	}
	t.Setenv("CCO_AGENT", "/tmp/evil")
	errb.Reset()
	if code := run([]string{"claude"}, nil, &out, &errb); code != 126 || !strings.Contains(errb.String(), `CCO_AGENT="/tmp/evil" is not a built-in agent`) {
		t.Errorf("CCO_AGENT path: %d %q", code, errb.String())
	}
}

func TestCCOAgentSelectsAnotherProfile(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asNobody)
	c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "argv"}))
	c.Env = append(c.Env, "CCO_AGENT=codex")
	r := runCmd(t, c)
	if r.code != 0 || !strings.HasPrefix(r.report["argv"], root+"/usr/libexec/cco/codex-dist/current/bin/codex\x1f--dangerously-bypass") {
		t.Errorf("CCO_AGENT=codex: %d %q %s", r.code, r.report["argv"], r.stderr)
	}
}

func TestPersistenceWarning(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asNobody)
	r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "mcp"})))
	if r.code != 0 || !strings.Contains(r.stderr, "WARNING") || !strings.Contains(r.stderr, `mcpServers "planted"`) ||
		!strings.Contains(r.stderr, "/tmp/evil --now") {
		t.Errorf("no persistence warning: %d %q", r.code, r.stderr)
	}
	// An unchanged entry is not reported again.
	r = runCmd(t, w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "mcp"})))
	if strings.Contains(r.stderr, "WARNING") {
		t.Errorf("warned about an entry that was there before: %q", r.stderr)
	}
}

// TestNewRepositoryWarning: a workspace without a .git cannot have its git
// files re-bound; what a session's repository there would run through git
// on the host is reported. A repository that was there is re-bound instead.
func TestNewRepositoryWarning(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asNobody)
	fresh := filepath.Join(w.base, "fresh")
	os.Mkdir(fresh, 0o755)
	os.Chown(fresh, w.u.uid, w.u.gid)
	r := runCmd(t, w.cmd(root, "codex", fresh, "probe", params(map[string]any{"mode": "gitinit"})))
	for _, want := range []string{"WARNING", fresh + "/.git/hooks/post-checkout", `core.fsmonitor="/tmp/evil"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d: stderr lacks %q:\n%s", r.code, want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "pre-commit.sample") {
		t.Errorf("warned about git's own sample hook:\n%s", r.stderr)
	}
	r = runCmd(t, w.cmd(root, "codex", w.ws, "probe", params(map[string]any{"mode": "exit"})))
	if strings.Contains(r.stderr, "WARNING") {
		t.Errorf("warned in a workspace whose repository was there before: %s", r.stderr)
	}
}

// The refusals: exit 127 for a missing vendor binary, 126 with the exact
// fix for a jail that cannot be built. They change the shared root, so
// they run one after another and put it back.
func TestRefusals(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asNobody)
	probe := params(map[string]any{"mode": "exit"})
	move := func(from string) func() {
		if err := os.Rename(from, from+".away"); err != nil {
			t.Fatal(err)
		}
		return func() { os.Rename(from+".away", from) }
	}
	t.Run("missing vendor binary", func(t *testing.T) {
		for name, p := range map[string]string{"claude": "usr/libexec/cco/claude/current/claude", "codex": "usr/libexec/cco/codex-dist/current/bin/codex"} {
			back := move(filepath.Join(root, p))
			r := runCmd(t, w.cmd(root, name, w.ws, "probe", probe))
			back()
			if r.code != 127 || !strings.Contains(r.stderr, "sudo cco-install --upgrade "+name) {
				t.Errorf("%s: %d %q", name, r.code, r.stderr)
			}
		}
	})
	// Gemini's Node runs as every gemini user: one another user can
	// change is refused at launch, naming it and the fix.
	t.Run("interpreter not root's alone", func(t *testing.T) {
		for _, p := range agent.All() {
			if p.Interpreter == "" {
				continue
			}
			node := filepath.Join(root, p.Interpreter)
			if err := os.Chown(node, 1000, 1000); err != nil {
				t.Fatal(err)
			}
			r := runCmd(t, w.cmd(root, p.Name, w.ws, "probe", probe))
			os.Chown(node, 0, 0)
			if r.code != 127 || !strings.Contains(r.stderr, node+" is not root's alone") || !strings.Contains(r.stderr, "is owned by uid 1000") || !strings.Contains(r.stderr, "chown root:root") {
				t.Errorf("%s: %d %q", p.Name, r.code, r.stderr)
			}
		}
	})
	t.Run("no bwrap", func(t *testing.T) {
		back := move(filepath.Join(root, "usr/bin/bwrap"))
		defer back()
		// bubblewrap's own refusals: the launch runs on it.
		c := w.cmd(root, "codex", w.ws, "probe", probe)
		c.Env = append(c.Env, engine.EnvVar+"=bwrap")
		r := runCmd(t, c)
		if r.code != 126 || !strings.Contains(r.stderr, "apt-get install bubblewrap") {
			t.Errorf("%d %q", r.code, r.stderr)
		}
	})
	t.Run("user namespaces blocked", func(t *testing.T) {
		bw := filepath.Join(root, "usr/bin/bwrap")
		back := move(bw)
		defer back()
		// What bwrap says under Ubuntu 24.04's AppArmor restriction.
		os.WriteFile(bw, []byte("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"), 0o755)
		defer os.Remove(bw)
		// bubblewrap's own refusals: the launch runs on it.
		c := w.cmd(root, "claude", w.ws, "probe", probe)
		c.Env = append(c.Env, engine.EnvVar+"=bwrap")
		r := runCmd(t, c)
		if r.code != 126 || !strings.Contains(r.stderr, "user namespaces are blocked") || !strings.Contains(r.stderr, "apparmor_parser -r") ||
			!strings.Contains(r.stderr, "userns") {
			t.Errorf("%d %q", r.code, r.stderr)
		}
	})
	t.Run("bwrap fails otherwise", func(t *testing.T) {
		bw := filepath.Join(root, "usr/bin/bwrap")
		back := move(bw)
		defer back()
		os.WriteFile(bw, []byte("#!/bin/sh\ncase \"$*\" in *true) exit 0;; esac\necho 'bwrap: Can not mount tmpfs' >&2\nexit 1\n"), 0o755)
		defer os.Remove(bw)
		// bubblewrap's own refusals: the launch runs on it.
		c := w.cmd(root, "claude", w.ws, "probe", probe)
		c.Env = append(c.Env, engine.EnvVar+"=bwrap")
		r := runCmd(t, c)
		if r.code != 126 || !strings.Contains(r.stderr, "bwrap failed before the agent started") {
			t.Errorf("%d %q", r.code, r.stderr)
		}
	})
	t.Run("refused workspace", func(t *testing.T) {
		for _, dir := range []string{w.home + "/.ssh", "/etc", "/var/tmp"} {
			r := runCmd(t, w.cmd(root, "codex", dir, "probe", probe))
			if r.code != 126 || !strings.Contains(r.stderr, "refusing the workspace") || !strings.Contains(r.stderr, "fix: cd into a project directory") {
				t.Errorf("%s: %d %q", dir, r.code, r.stderr)
			}
		}
	})
	t.Run("unknown sandbox.toml key", func(t *testing.T) {
		cfg := filepath.Join(root, "etc/cco/sandbox.toml")
		os.WriteFile(cfg, []byte("alow_write = [\"/x\"]\n"), 0o644)
		defer os.Remove(cfg)
		r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", probe))
		if r.code != 126 || !strings.Contains(r.stderr, `unknown key "alow_write" (did you mean "allow_write"?)`) || !strings.Contains(r.stderr, cfg) {
			t.Errorf("%d %q", r.code, r.stderr)
		}
	})
	t.Run("sandbox.toml not root's", func(t *testing.T) {
		cfg := filepath.Join(root, "etc/cco/sandbox.toml")
		os.WriteFile(cfg, []byte("forge = []\n"), 0o666)
		os.Chmod(cfg, 0o666)
		defer os.Remove(cfg)
		r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", probe))
		if r.code != 126 || !strings.Contains(r.stderr, "chmod 644") {
			t.Errorf("%d %q", r.code, r.stderr)
		}
	})
	t.Run("sandbox.toml honoured", func(t *testing.T) {
		cfg := filepath.Join(root, "etc/cco/sandbox.toml")
		os.WriteFile(cfg, []byte("claude_skip_permissions = true\npass_env = [\"SENTINEL_VAR\"]\n"), 0o644)
		defer os.Remove(cfg)
		r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "probe", "root": root})))
		if r.code != 0 || !strings.Contains(r.report["argv"], "--dangerously-skip-permissions") || !strings.Contains(r.report["env"], "SENTINEL_VAR=leak") {
			t.Errorf("%d argv %q env %q %s", r.code, r.report["argv"], r.report["env"], r.stderr)
		}
	})
}

// `codex agents` runs against an app-server of the jail's own; other codex
// commands and claude do not.
func TestCodexAgentsUsesTheJailsAppServer(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asNobody)
	r := runCmd(t, w.cmd(root, "codex", w.ws, "agents", "--full-auto"))
	argv := strings.Split(r.report["argv"], "\x1f")
	i := slices.Index(argv, "--remote")
	if r.code != 0 || i < 0 || i+1 >= len(argv) || !strings.HasPrefix(argv[i+1], "unix:///tmp/") || !strings.HasSuffix(argv[i+1], "/server.sock") ||
		!slices.Contains(argv, "--dangerously-bypass-approvals-and-sandbox") || slices.Contains(argv, "--full-auto") {
		t.Fatalf("codex agents: %d argv %q stderr %s", r.code, argv, r.stderr)
	}
	r = runCmd(t, w.cmd(root, "codex", w.ws, "probe", params(map[string]any{"mode": "argv"})))
	if strings.Contains(r.report["argv"], "--remote") {
		t.Errorf("plain codex went through the app-server: %q", r.report["argv"])
	}
}
