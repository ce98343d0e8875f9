package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/egress"
)

// BenchmarkLaunch compares, in one run and interleaved, the shadow
// launching a trivial fake agent (egress "public", the default: it starts
// the policy proxy, and the in-jail helper starts the bridge) against bare
// bwrap running that agent with the shadow's own argv (the same namespaces,
// binds, masks, seccomp program, data files, helper and bridge, against one
// proxy this benchmark started once). Both sides' output goes to a pipe the
// benchmark reads. The ratio shadow/bwrap is the metric to read;
// the goal is <= 1.3. A second baseline is bwrap running the agent itself
// with no network (what egress = "off" costs without a terminal).
func BenchmarkLaunch(b *testing.B) {
	root := systemRoot(b)
	// Outside /tmp (refused as a workspace); WorkDir's cleanup runs after
	// the sessions' Finish, which the cleanups below register later.
	base := testenv.WorkDir(b)
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
	defer os.RemoveAll(rt)
	pol, err := sandbox.EgressPolicy(&sandbox.Config{}, "claude", home)
	if err != nil {
		b.Fatal(err)
	}
	px, err := egress.NewProxy(pol, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	h, err := egress.StartHost(context.Background(), px, rt)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	plan := func(mode, dir string) *sandbox.Spec {
		spec, prep, err := sandbox.Plan(&sandbox.Launch{Profile: p, Config: &sandbox.Config{}, Home: home, User: "root",
			UID: os.Getuid(), Cwd: ws, Environ: env, Session: "bench", Args: args, Direct: true,
			Egress: mode, EgressSocket: dir})
		if err != nil {
			b.Fatal(err)
		}
		sess, err := sandbox.Prepare(home, "", prep)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(sess.Finish)
		return spec
	}
	same := newBareBwrap(b, plan(egress.ModePublic, h.SocketPath), ws)
	offDirect := newBareBwrap(b, plan(egress.ModeOff, ""), ws)
	bwrap := func(bb *bareBwrap) {
		c, done := bb.cmd(b)
		defer done()
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v %s", err, out)
		}
	}
	cfg := filepath.Join(root, "etc/cco/sandbox.toml")
	defer os.Remove(cfg)
	shadow := func() {
		c := exec.Command(filepath.Join(root, "usr/local/bin/claude"), args...)
		c.Env, c.Dir = append(env, os.Getenv("CCO_EXP_ENV")), ws
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("shadow: %v %s", err, out)
		}
	}
	var tShadow, tSame, tOff, tShadowOff time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		shadow()
		tShadow += time.Since(s)
		s = time.Now()
		bwrap(same)
		tSame += time.Since(s)
		s = time.Now()
		bwrap(offDirect)
		tOff += time.Since(s)
		os.WriteFile(cfg, []byte("egress = \"off\"\n"), 0o644)
		s = time.Now()
		shadow()
		tShadowOff += time.Since(s)
		os.Remove(cfg)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tShadow.Microseconds())/n, "shadow-µs/launch")
	b.ReportMetric(float64(tSame.Microseconds())/n, "bwrap-µs/launch")
	b.ReportMetric(float64(tOff.Microseconds())/n, "bwrap-direct-offline-µs/launch")
	b.ReportMetric(float64(tShadowOff.Microseconds())/n, "shadow-offline-µs/launch")
	b.ReportMetric(float64(tShadow)/float64(tSame), "shadow/bwrap")
	b.ReportMetric(float64(tShadowOff)/float64(tOff), "shadow-offline/bwrap-direct")
}
