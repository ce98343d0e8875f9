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

	"github.com/cco-dev/cco/internal/testenv"
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
	for _, u := range users {
		base := testenv.WorkDir(b)
		u.home, u.ws = base+"/home-"+u.name, base+"/ws-"+u.name
		for _, d := range []string{u.home + "/.claude", u.home + "/.codex", u.ws + "/.git/hooks"} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		os.WriteFile(u.home+"/.claude/settings.json", []byte("{}"), 0o644)
		os.WriteFile(u.ws+"/.git/config", nil, 0o644)
		filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })
		os.Chmod(u.home, 0o700)
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
			if err := c.Run(); err != nil {
				b.Fatalf("%s: %v", r.name, err)
			}
			times[r.name] = append(times[r.name], time.Since(s))
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
