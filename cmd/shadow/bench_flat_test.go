package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/toolchains"
)

// BenchmarkLaunchFlat times, interleaved in one run, the launch of claude
// (as root, egress off, no terminal) in a plain home and workspace on a
// plain host, against the same launch where one thing grows:
//
//   - toolchains: the home holds every tree of home_read_only's shipped
//     list, with the credential files the walk masks in the shapes found
//     (a Maven distribution's conf/settings.xml, npm's builtin npmrc, a
//     venv's pip.conf) (the budget: at most 1 ms added,
//     toolchains_added-µs);
//   - toolchainsfull: the same trees holding more entries than the
//     credential walk's budget (toolchains.Budget), so the walk reads all
//     it may and names the rest: its worst case (toolchainsfull_added-µs);
//   - repos100: the workspace holds 100 nested repositories;
//   - files500k: the workspace holds a directory of 500,000 files;
//   - sockets10k: the host holds 10,000 bound sockets, in a
//     world-writable directory the jail would see;
//   - mounts500: the host has 500 more mounts, against the reference jail
//     on that host (mounts500/reference_mounts500 beside
//     plain/reference).
//
// The budget for each but the toolchains is <x>/plain <= 1.2
// (docs/explanation/launch-path.md). The fixtures are large: this runs
// only with -bench, as root.
func BenchmarkLaunchFlat(b *testing.B) {
	testenv.RequireRoot(b)
	root := systemRoot(b)
	base := testenv.WorkDir(b)
	withConfigB(b, root, "egress = \"off\"\n")
	exit := params(map[string]any{"mode": "exit"})
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()

	world := func(name string) (home, ws string) {
		home, ws = filepath.Join(base, name, "home"), filepath.Join(base, name, "ws")
		for _, d := range []string{home + "/.claude", ws + "/.git/hooks", ws + "/.git/info"} {
			must(b, os.MkdirAll(d, 0o755))
		}
		must(b, os.WriteFile(ws+"/.git/config", nil, 0o644))
		must(b, os.WriteFile(ws+"/.git/HEAD", []byte("ref: refs/heads/main\n"), 0o644))
		os.Chmod(home, 0o700)
		return home, ws
	}
	type variant struct {
		name     string
		home, ws string
		ref      bool // the reference jail, not the shadow
	}
	var vs []variant
	add := func(name string, ref bool, prep func(home, ws string)) {
		home, ws := world(name)
		if prep != nil {
			prep(home, ws)
		}
		// A first launch makes what a launch makes once (the cache tree,
		// the login state's stand-ins).
		if !ref {
			c := exec.Command(filepath.Join(root, "usr/local/bin/claude"), "probe", exit)
			c.Dir, c.Env = ws, []string{"HOME=" + home, "USER=root", "PATH=/usr/bin:/bin"}
			if out, err := c.CombinedOutput(); err != nil {
				b.Fatalf("%s: first launch: %v\n%s", name, err, out)
			}
		}
		vs = append(vs, variant{name, home, ws, ref})
	}
	add("plain", false, nil)
	add("reference", true, nil)
	add("toolchains", false, func(home, _ string) { toolchainTrees(b, home) })
	add("toolchainsfull", false, func(home, _ string) {
		toolchainTrees(b, home)
		// A rustup toolchain's docs: many small directories of files,
		// past the budget.
		doc := filepath.Join(home, ".rustup/toolchains/stable/share/doc/rust/html")
		for d := 0; d*100 < toolchains.Budget+10000; d++ {
			dir := filepath.Join(doc, fmt.Sprintf("m%04d", d))
			must(b, os.MkdirAll(dir, 0o755))
			for i := 0; i < 99; i++ {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%02d.html", i)))
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		}
	})
	add("repos100", false, func(_, ws string) {
		for i := 0; i < 100; i++ {
			g := filepath.Join(ws, fmt.Sprintf("src/r%03d/.git", i))
			must(b, os.MkdirAll(g+"/hooks", 0o755))
			must(b, os.MkdirAll(g+"/info", 0o755))
			must(b, os.WriteFile(g+"/config", []byte("[core]\n\tbare = false\n"), 0o644))
			must(b, os.WriteFile(g+"/HEAD", []byte("ref: refs/heads/main\n"), 0o644))
		}
	})
	add("files500k", false, func(_, ws string) {
		d := filepath.Join(ws, "data")
		must(b, os.MkdirAll(d, 0o755))
		for i := 0; i < 500000; i++ {
			f, err := os.Create(filepath.Join(d, fmt.Sprintf("f%06d", i)))
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})

	cmd := func(v variant) *exec.Cmd {
		var c *exec.Cmd
		if v.ref {
			c = exec.Command("/usr/bin/bwrap", "--die-with-parent", "--unshare-user-try", "--unshare-pid", "--unshare-ipc",
				"--unshare-uts", "--unshare-cgroup-try", "--unshare-net", "--cap-drop", "ALL", "--ro-bind", "/", "/",
				"--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", v.home,
				"--bind", v.home+"/.claude", v.home+"/.claude", "--bind", v.ws, v.ws, "--chdir", v.ws, "--",
				filepath.Join(root, "bin/fakeagent"), "probe", exit)
		} else {
			c = exec.Command(filepath.Join(root, "usr/local/bin/claude"), "probe", exit)
		}
		c.Dir = v.ws
		c.Env = []string{"HOME=" + v.home, "USER=root", "PATH=/usr/bin:/bin"}
		c.Stdin, c.Stdout, c.Stderr = null, null, null
		return c
	}
	times := map[string][]time.Duration{}
	run := func(label string, v variant) {
		for try := 1; ; try++ {
			c := cmd(v)
			var stderr bytes.Buffer
			c.Stderr = &stderr
			// Not while another test binary's host sockets come and go
			// (a launch then fails on a vanished mask); the wait is not
			// timed.
			release := testenv.Launching(b)
			s := time.Now()
			err := c.Run()
			d := time.Since(s)
			release()
			if err == nil {
				times[label] = append(times[label], d)
				return
			}
			// On a shared machine another test's tree under /var/lib can
			// vanish between the plan and bwrap's mkdir of its mount
			// point: that launch is not a sample, and is tried again.
			if try < 3 && strings.Contains(stderr.String(), "bwrap: Can't mkdir") {
				b.Logf("%s: a host path vanished during the launch, trying again:\n%s", label, stderr.Bytes())
				continue
			}
			b.Fatalf("%s: %v\n%s", label, err, stderr.Bytes())
		}
	}
	n := max(b.N, 10)
	b.ResetTimer()
	for i := 0; i < n; i++ {
		for _, v := range vs {
			run(v.name, v)
		}
	}
	// The host grows: sockets, then mounts, each with the plain launch
	// and the reference beside it.
	b.StopTimer()
	release := hostSocketsB(b, filepath.Join(base, "socks"), 10000)
	b.StartTimer()
	for i := 0; i < n; i++ {
		run("sockets10k", vs[0])
		run("plain-sockets", vs[0])
	}
	b.StopTimer()
	release()
	unmount := hostMountsB(b, filepath.Join(base, "mounts"), 500)
	b.StartTimer()
	for i := 0; i < n; i++ {
		run("mounts500", vs[0])
		run("reference_mounts500", vs[1])
	}
	b.StopTimer()
	unmount()

	med := func(name string) float64 {
		ts := slices.Clone(times[name])
		slices.Sort(ts)
		return float64(ts[len(ts)/2].Microseconds())
	}
	for name := range times {
		b.ReportMetric(med(name), name+"-µs")
	}
	b.ReportMetric(med("toolchains")-med("plain"), "toolchains_added-µs")
	b.ReportMetric(med("toolchainsfull")-med("plain"), "toolchainsfull_added-µs")
	for _, v := range []string{"toolchains", "toolchainsfull", "repos100", "files500k"} {
		b.ReportMetric(med(v)/med("plain"), v+"/plain")
	}
	b.ReportMetric(med("sockets10k")/med("plain"), "sockets10k/plain")
	b.ReportMetric(med("plain")/med("reference"), "plain/reference")
	b.ReportMetric(med("mounts500")/med("reference_mounts500"), "mounts500/reference_mounts500")
}

// toolchainTrees makes every tree of home_read_only's shipped list in
// home, and in them a toolchain's worth of credential files where the
// tools keep them: a Maven distribution under SDKMAN!, a Node under nvm
// with npm's builtin config, pipx venvs with pip.conf.
func toolchainTrees(b *testing.B, home string) {
	for _, t := range toolchains.Default {
		p := filepath.Join(home, t[2:])
		if t == "~/.tool-versions" {
			must(b, os.WriteFile(p, []byte("golang 1.26\n"), 0o644))
			continue
		}
		must(b, os.MkdirAll(p, 0o755))
	}
	for _, f := range []string{
		".sdkman/candidates/maven/3.9.9/conf/settings.xml",
		".sdkman/candidates/maven/3.9.9/lib/maven-core.jar",
		".nvm/versions/node/v22.11.0/lib/node_modules/npm/npmrc",
		".nvm/versions/node/v22.11.0/lib/node_modules/npm/package.json",
		".nvm/versions/node/v22.11.0/bin/node",
		".local/share/pipx/venvs/black/pip.conf",
		".local/share/pipx/venvs/black/bin/black",
	} {
		p := filepath.Join(home, f)
		must(b, os.MkdirAll(filepath.Dir(p), 0o755))
		must(b, os.WriteFile(p, []byte("x\n"), 0o644))
	}
}

// withConfigB writes the root's sandbox.toml for one benchmark.
func withConfigB(b *testing.B, root, text string) {
	cfg := filepath.Join(root, "etc/cco/sandbox.toml")
	must(b, os.WriteFile(cfg, []byte(text), 0o644))
	b.Cleanup(func() { os.Remove(cfg) })
}

// hostSocketsB binds n sockets in dir (mode 1777, as /var/tmp is) and
// returns what closes them.
func hostSocketsB(b *testing.B, dir string, n int) func() {
	testenv.HostSockets(b)
	must(b, os.MkdirAll(dir, 0o755))
	os.Chmod(dir, 0o1777)
	var ls []net.Listener
	for i := 0; i < n; i++ {
		l, err := net.Listen("unix", filepath.Join(dir, fmt.Sprintf("s%05d.sock", i)))
		if err != nil {
			b.Fatal(err)
		}
		ls = append(ls, l)
	}
	return func() {
		for _, l := range ls {
			l.Close()
		}
	}
}

// hostMountsB mounts n small tmpfs below dir and returns what unmounts
// them (also when the benchmark fails).
func hostMountsB(b *testing.B, dir string, n int) func() {
	var done []string
	undo := func() {
		for _, d := range done {
			syscall.Unmount(d, syscall.MNT_DETACH)
		}
		done = nil
	}
	b.Cleanup(undo)
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("m%03d", i))
		must(b, os.MkdirAll(d, 0o755))
		if err := syscall.Mount("cco-bench", d, "tmpfs", 0, "size=64k"); err != nil {
			b.Fatalf("mounting %s: %v", d, err)
		}
		done = append(done, d)
	}
	return undo
}
