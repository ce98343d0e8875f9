package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/sandbox"
)

// BenchmarkLaunch compares, in one run and interleaved, the shadow
// launching a trivial fake agent against bare bwrap running that agent with
// the shadow's own argv (the same namespaces, binds, masks and seccomp
// program). Without a terminal the shadow has bwrap run the agent directly;
// the second baseline is the argv of a terminal launch, through the in-jail
// helper. The ratio shadow/bwrap is the metric to read; the goal is <= 1.3.
func BenchmarkLaunch(b *testing.B) {
	root := systemRoot(b)
	base, err := os.MkdirTemp("", "cco-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	home, ws := filepath.Join(base, "home"), filepath.Join(base, "ws")
	for _, d := range []string{home + "/.claude", ws + "/.git/hooks"} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(home+"/.claude/settings.json", []byte("{}"), 0o644)
	os.WriteFile(ws+"/.git/config", nil, 0o644)
	args := []string{"probe", `{"mode":"exit"}`}
	env := []string{"HOME=" + home, "USER=root", "PATH=/usr/bin:/bin", "TERM=xterm"}

	// The shadow's argv for the same launch, for bare bwrap.
	sandbox.SystemRoot = root
	defer func() { sandbox.SystemRoot = "" }()
	p, _ := agent.Lookup("claude")
	rt, _ := os.MkdirTemp("", "cco-jail-")
	spec, prep, err := sandbox.Plan(&sandbox.Launch{Profile: p, Config: &sandbox.Config{}, Home: home, User: "root",
		UID: os.Getuid(), Cwd: ws, Environ: env, RuntimeDir: rt, Session: "bench", Args: args, Direct: true})
	if err != nil {
		b.Fatal(err)
	}
	sess, err := sandbox.Prepare(home, rt, prep)
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Finish()
	spec.SeccompFD = 3
	same := sandbox.Argv(spec)
	viaHelper := append([]string{}, same[:len(same)-len(spec.Command)]...)
	viaHelper = append(viaHelper, append([]string{root + sandbox.HelperPath, "exec", "--"}, spec.Command...)...)
	prog, _ := sandbox.SeccompBytes()
	bwrap := func(argv []string) {
		r, w, _ := os.Pipe()
		w.Write(prog)
		w.Close()
		c := exec.Command("/usr/bin/bwrap", argv...)
		c.ExtraFiles = []*os.File{r}
		c.Dir = ws
		if err := c.Run(); err != nil {
			b.Fatalf("bwrap: %v", err)
		}
		r.Close()
	}
	shadow := func() {
		c := exec.Command(filepath.Join(root, "usr/local/bin/claude"), args...)
		c.Env, c.Dir = env, ws
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("shadow: %v %s", err, out)
		}
	}
	var tShadow, tSame, tHelper time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		shadow()
		tShadow += time.Since(s)
		s = time.Now()
		bwrap(same)
		tSame += time.Since(s)
		s = time.Now()
		bwrap(viaHelper)
		tHelper += time.Since(s)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tShadow.Microseconds())/n, "shadow-µs/launch")
	b.ReportMetric(float64(tSame.Microseconds())/n, "bwrap-µs/launch")
	b.ReportMetric(float64(tHelper.Microseconds())/n, "bwrap-via-helper-µs/launch")
	b.ReportMetric(float64(tShadow)/float64(tSame), "shadow/bwrap")
}
