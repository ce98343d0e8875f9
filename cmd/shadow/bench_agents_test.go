package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
)

// BenchmarkAgentVersion times a real agent's start, `<agent> --version`,
// through the shadow (as root, egress off, no terminal) against the
// reference jail running the same command, interleaved in one run, medians:
// <agent>/reference_<agent> is the budget's line, at most 1.5
// (docs/explanation/launch-path.md). The agents are the pinned npm packs
// (internal/realagents); it runs with CCO_REAL_AGENTS=1, as root.
func BenchmarkAgentVersion(b *testing.B) {
	realagents.Require(b)
	testenv.RequireRoot(b)
	root, err := buildRoot()
	b.Cleanup(func() { os.RemoveAll(root) })
	if err != nil {
		b.Fatal(err)
	}
	must(b, os.WriteFile(filepath.Join(root, "etc/cco/sandbox.toml"), []byte("egress = \"off\"\n"), 0o644))
	node, err := exec.LookPath("node")
	if err == nil {
		node, err = filepath.EvalSymlinks(node)
	}
	if err != nil {
		b.Fatalf("node: %v (fix: apt-get install nodejs)", err)
	}
	// Each agent's real pack where its profile runs it.
	place := func(name, pkg string, links map[string]string) {
		p, _ := agent.Lookup(name)
		current := filepath.Join(root, filepath.Dir(p.Binary))
		for filepath.Base(current) != "current" {
			current = filepath.Dir(current)
		}
		must(b, os.RemoveAll(current))
		must(b, os.MkdirAll(current, 0o755))
		for rel, target := range links {
			must(b, os.MkdirAll(filepath.Dir(filepath.Join(current, rel)), 0o755))
			must(b, os.Symlink(target, filepath.Join(current, rel)))
		}
		if _, err := os.Stat(root + p.Binary); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
	}
	claude := filepath.Join(realagents.Dir(b, realagents.Claude), realagents.ClaudeBinary)
	codexTree := filepath.Join(realagents.Dir(b, realagents.Codex), realagents.CodexTree)
	gemini := filepath.Join(realagents.Dir(b, realagents.Gemini), "package")
	place("claude", "", map[string]string{"claude": claude})
	codexEnts, _ := os.ReadDir(codexTree)
	links := map[string]string{}
	for _, e := range codexEnts {
		links[e.Name()] = filepath.Join(codexTree, e.Name())
	}
	place("codex", "", links)
	place("gemini", "", map[string]string{"bundle": filepath.Join(gemini, "bundle"), "package.json": filepath.Join(gemini, "package.json"), "node": node})

	base := testenv.WorkDir(b)
	home, ws := filepath.Join(base, "home"), filepath.Join(base, "ws")
	for _, d := range []string{home + "/.claude", home + "/.codex", home + "/.gemini", ws + "/.git/hooks"} {
		must(b, os.MkdirAll(d, 0o755))
	}
	os.Chmod(home, 0o700)
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	env := []string{"HOME=" + home, "USER=root", "PATH=/usr/bin:/bin", "TERM=dumb"}
	reference := func(login string, argv ...string) *exec.Cmd {
		return exec.Command("/usr/bin/bwrap", append([]string{"--die-with-parent", "--unshare-user-try", "--unshare-pid",
			"--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net", "--cap-drop", "ALL", "--ro-bind", "/", "/",
			"--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", home,
			"--bind", home + "/" + login, home + "/" + login, "--bind", ws, ws, "--chdir", ws, "--"}, argv...)...)
	}
	type line struct {
		name string
		cmd  func() *exec.Cmd
	}
	lines := []line{
		{"claude", func() *exec.Cmd { return exec.Command(filepath.Join(root, "usr/local/bin/claude"), "--version") }},
		{"reference_claude", func() *exec.Cmd { return reference(".claude", claude, "--version") }},
		{"codex", func() *exec.Cmd { return exec.Command(filepath.Join(root, "usr/local/bin/codex"), "--version") }},
		{"reference_codex", func() *exec.Cmd { return reference(".codex", filepath.Join(codexTree, "bin/codex"), "--version") }},
		{"gemini", func() *exec.Cmd { return exec.Command(filepath.Join(root, "usr/local/bin/gemini"), "--version") }},
		{"reference_gemini", func() *exec.Cmd {
			return reference(".gemini", node, filepath.Join(gemini, "bundle/gemini.js"), "--version")
		}},
	}
	times := map[string][]time.Duration{}
	n := max(b.N, 5)
	b.ResetTimer()
	for i := 0; i < n; i++ {
		for _, l := range lines {
			c := l.cmd()
			c.Dir, c.Env, c.Stdin, c.Stdout, c.Stderr = ws, env, null, null, null
			s := time.Now()
			err := c.Run()
			times[l.name] = append(times[l.name], time.Since(s))
			if err != nil {
				b.Fatalf("%s: %v", l.name, err)
			}
		}
	}
	b.StopTimer()
	med := func(name string) float64 {
		ts := slices.Clone(times[name])
		slices.Sort(ts)
		return float64(ts[len(ts)/2].Microseconds())
	}
	for _, a := range []string{"claude", "codex", "gemini"} {
		b.ReportMetric(med(a), a+"-µs")
		b.ReportMetric(med("reference_"+a), "reference_"+a+"-µs")
		b.ReportMetric(med(a)/med("reference_"+a), a+"/reference_"+a)
	}
}
