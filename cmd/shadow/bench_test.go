package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// BenchmarkLaunch times, in one run and interleaved, every line of the
// launch budget beside its baseline: the reference jail (bwrap straight to
// the agent, with the namespaces and the few binds of a minimal jail, no
// argv of the shadow's) against the shadow's default launch (egress on,
// no terminal) as root and as an unprivileged user, for claude and codex;
// both on a fresh pty; and, inside a jail, a nested launch against a
// direct exec of the vendor binary. The agent is a trivial fake that exits
// at once; every side's output goes to /dev/null or the pty. Metrics are
// medians; the ratios are the budget's (docs/explanation/launch-path.md):
// <= 1.3 for the default path, <= 1.5 on a terminal, <= 1.2 nested. Their
// units are plain names (underscores), which bench/ratios lists as they are.
// Two more lines split the difference: jail_<user>/reference_<user> is
// the jail's own mounts (bare bwrap with the argv the shadow plans, the
// agent straight from bwrap, egress off) against the reference, and
// claude_<user>/jail_<user> the shadow's own work against that jail.
func BenchmarkLaunch(b *testing.B) {
	testenv.RequireRoot(b)
	root := systemRoot(b)
	agentPath := filepath.Join(root, "bin/fakeagent")
	exit := params(map[string]any{"mode": "exit"})
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	type user struct {
		name     string
		uid, gid int
		home, ws string
	}
	users := []*user{{name: "root"}, {name: "nobody", uid: 65534, gid: 65534}}
	world := func(home, ws string) {
		for _, d := range []string{home + "/.claude", home + "/.codex", ws + "/.git/hooks"} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		os.WriteFile(home+"/.claude/settings.json", []byte("{}"), 0o644)
		os.WriteFile(ws+"/.git/config", nil, 0o644)
	}
	// jails are bare bwrap running the argv the shadow plans for the same
	// launch, as the same user, with the agent straight from bwrap (egress
	// off, no helper, no proxy): the jail's mounts alone. They run in a
	// copy of the user's world, whose mount points are made once, so that
	// the shadow's world keeps its own.
	jails := map[string]*bareBwrap{}
	for _, u := range users {
		base := testenv.WorkDir(b)
		u.home, u.ws = base+"/home-"+u.name, base+"/ws-"+u.name
		world(u.home, u.ws)
		jhome, jws := base+"/jail-home-"+u.name, base+"/jail-ws-"+u.name
		world(jhome, jws)
		filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })
		os.Chmod(u.home, 0o700)
		os.Chmod(jhome, 0o700)
		jails[u.name] = planJail(b, root, u.name, u.uid, jhome, jws)
	}
	cmd := func(u *user, tty *os.File, argv ...string) *exec.Cmd {
		c := exec.Command(argv[0], argv[1:]...)
		c.Dir = u.ws
		c.Env = []string{"HOME=" + u.home, "USER=" + u.name, "PATH=/usr/bin:/bin", "TERM=xterm"}
		c.Stdin, c.Stdout, c.Stderr = null, null, null
		c.SysProcAttr = &syscall.SysProcAttr{}
		if u.uid != 0 {
			c.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}
		}
		if tty != nil {
			c.Stdin, c.Stdout, c.Stderr = tty, tty, tty
			c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, true, 0
		}
		return c
	}
	// The reference jail, as the budget states it.
	reference := func(u *user, login string, tty *os.File) *exec.Cmd {
		return cmd(u, tty, "/usr/bin/bwrap", "--die-with-parent", "--unshare-user-try", "--unshare-pid", "--unshare-ipc",
			"--unshare-uts", "--unshare-cgroup-try", "--unshare-net", "--cap-drop", "ALL", "--ro-bind", "/", "/",
			"--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", u.home,
			"--bind", u.home+"/"+login, u.home+"/"+login, "--bind", u.ws, u.ws, "--chdir", u.ws, "--", agentPath, "probe", exit)
	}
	shadow := func(u *user, name string, tty *os.File) *exec.Cmd {
		return cmd(u, tty, filepath.Join(root, "usr/local/bin", name), "probe", exit)
	}
	master, tty := openPty(b)
	go io.Copy(io.Discard, master)

	type run struct {
		name string
		cmd  func() *exec.Cmd
	}
	var runs []run
	for _, u := range users {
		u := u
		runs = append(runs,
			run{"reference-" + u.name, func() *exec.Cmd { return reference(u, ".claude", nil) }},
			run{"jail-" + u.name, func() *exec.Cmd {
				c, _ := jails[u.name].cmd(b)
				c.Stdin, c.Stdout, c.Stderr = null, null, null
				c.SysProcAttr = &syscall.SysProcAttr{}
				if u.uid != 0 {
					c.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}
				}
				return c
			}},
			run{"claude-" + u.name, func() *exec.Cmd { return shadow(u, "claude", nil) }},
			run{"codex-" + u.name, func() *exec.Cmd { return shadow(u, "codex", nil) }})
	}
	runs = append(runs,
		run{"reference-pty", func() *exec.Cmd { return reference(users[0], ".claude", tty) }},
		run{"claude-pty", func() *exec.Cmd { return shadow(users[0], "claude", tty) }})
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, r := range runs {
			c := r.cmd()
			s := time.Now()
			err := c.Run()
			times[r.name] = append(times[r.name], time.Since(s))
			for _, f := range c.ExtraFiles {
				f.Close()
			}
			if err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
		}
	}
	b.StopTimer()
	median := func(ts []time.Duration) float64 {
		ts = slices.Clone(ts)
		slices.Sort(ts)
		return float64(ts[len(ts)/2].Microseconds())
	}
	for _, r := range runs {
		b.ReportMetric(median(times[r.name]), r.name+"-µs")
	}
	for _, u := range users {
		for _, a := range []string{"claude", "codex"} {
			b.ReportMetric(median(times[a+"-"+u.name])/median(times["reference-"+u.name]), a+"_"+u.name+"/reference_"+u.name)
		}
	}
	b.ReportMetric(median(times["claude-pty"])/median(times["reference-pty"]), "claude_pty/reference_pty")
	// Where the difference lies: the jail's own mounts against the
	// reference, and the shadow's own work against the jail alone.
	for _, u := range users {
		b.ReportMetric(median(times["jail-"+u.name])/median(times["reference-"+u.name]), "jail_"+u.name+"/reference_"+u.name)
		b.ReportMetric(median(times["claude-"+u.name])/median(times["jail-"+u.name]), "claude_"+u.name+"/jail_"+u.name)
	}

	// Nested: from inside a jail, the shadow again against the vendor
	// binary itself, timed there in turn.
	n := max(b.N, 20)
	c := cmd(users[0], nil, filepath.Join(root, "usr/local/bin/claude"), "probe", params(map[string]any{"mode": "time", "n": n,
		"runs": [][]string{{filepath.Join(root, "usr/local/bin/claude"), "probe", exit}, {filepath.Join(root, "usr/libexec/cco/claude/current/claude"), "probe", exit}}}))
	c.Stdout = nil
	out, err := c.Output()
	if err != nil {
		b.Fatalf("nested: %v", err)
	}
	var rep map[string]string
	if err := json.Unmarshal(out, &rep); err != nil || rep["time_err"] != "" {
		b.Fatalf("nested: %v %s", err, out)
	}
	nestedUS, _ := strconv.ParseFloat(rep["time:0"], 64)
	directUS, _ := strconv.ParseFloat(rep["time:1"], 64)
	b.ReportMetric(nestedUS, "nested-µs")
	b.ReportMetric(directUS, "direct-exec-µs")
	b.ReportMetric(nestedUS/directUS, "nested/direct_exec")
}

// planJail is bare bwrap running the jail the shadow plans for claude in
// home and ws, as uid, with egress off and the agent straight from bwrap.
// Its mount points are made here, once, and stay.
func planJail(b *testing.B, root, name string, uid int, home, ws string) *bareBwrap {
	b.Helper()
	sandbox.SystemRoot = root
	defer func() { sandbox.SystemRoot = "" }()
	p, _ := agent.Lookup("claude")
	spec, prep, err := sandbox.Plan(&sandbox.Launch{Profile: p, Config: &sandbox.Config{}, Home: home, User: name, UID: uid,
		Cwd: ws, Environ: []string{"HOME=" + home, "USER=" + name, "TERM=xterm"}, Session: "bench",
		Args: []string{"probe", params(map[string]any{"mode": "exit"})}, Direct: true, Egress: policy.ModeOff})
	if err != nil {
		b.Fatal(err)
	}
	for _, ph := range append(prep.Placeholders, prep.StandIns...) {
		if ph.Dir {
			err = os.Mkdir(ph.Path, 0o700)
		} else {
			err = os.WriteFile(ph.Path, []byte(ph.Data), 0o600)
		}
		if err != nil {
			b.Fatal(err)
		}
		os.Lchown(ph.Path, uid, uid)
	}
	return newBareBwrap(b, spec, ws)
}
