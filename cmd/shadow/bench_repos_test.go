package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
)

// BenchmarkLaunchRepos100 is BenchmarkLaunchFlat's repos100 variant on its
// own: a workspace holding 100 nested repositories against a plain one,
// launched interleaved, medians compared (repos100/plain). Its fixtures
// are small, so it answers whether the per-repository cost moved without
// building the 500,000 files and 500 mounts of the whole benchmark. Run
// only with -bench, as root.
func BenchmarkLaunchRepos100(b *testing.B) {
	testenv.RequireRoot(b)
	root := systemRoot(b)
	base := testenv.WorkDir(b)
	withConfigB(b, root, "egress = \"off\"\n")
	exit := params(map[string]any{"mode": "exit"})
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
	ph, pw := world("plain")
	rh, rw := world("repos100")
	for i := 0; i < 100; i++ {
		g := filepath.Join(rw, fmt.Sprintf("src/r%03d/.git", i))
		must(b, os.MkdirAll(g+"/hooks", 0o755))
		must(b, os.MkdirAll(g+"/info", 0o755))
		must(b, os.WriteFile(g+"/config", []byte("[core]\n\tbare = false\n"), 0o644))
		must(b, os.WriteFile(g+"/HEAD", []byte("ref: refs/heads/main\n"), 0o644))
	}
	times := map[string][]time.Duration{}
	run := func(label, home, ws string) {
		c := exec.Command(filepath.Join(root, "usr/local/bin/claude"), "probe", exit)
		c.Dir = ws
		c.Env = []string{"HOME=" + home, "USER=root", "PATH=/usr/bin:/bin"}
		// Not while another test binary's host sockets come and go; the
		// wait is not timed.
		release := testenv.Launching(b)
		s := time.Now()
		out, err := c.CombinedOutput()
		d := time.Since(s)
		release()
		if err != nil {
			b.Fatalf("%s: %v\n%s", label, err, out)
		}
		times[label] = append(times[label], d)
	}
	// A first launch of each makes what a launch makes once.
	run("first", ph, pw)
	run("first", rh, rw)
	n := max(b.N, 7)
	b.ResetTimer()
	for i := 0; i < n; i++ {
		run("plain", ph, pw)
		run("repos100", rh, rw)
	}
	b.StopTimer()
	med := func(name string) float64 {
		ts := slices.Clone(times[name])
		slices.Sort(ts)
		return float64(ts[len(ts)/2].Microseconds()) / 1000
	}
	b.Logf("median: plain %.1f ms, repos100 %.1f ms", med("plain"), med("repos100"))
	b.ReportMetric(med("repos100")/med("plain"), "repos100/plain")
}
