package guard

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/sandbox"
)

// The gate must answer in well under 50 ms. These benchmarks measure its
// decision path against a baseline measured in the same run, so the numbers
// hold on any machine: run them with
//
//	go test ./guard -run '^$' -bench . -benchtime 200x
//
// BenchmarkGateDecision is the in-process decision; the baseline is one read
// of /proc/self/status, the least any jail test can cost.
func BenchmarkGateDecision(b *testing.B) {
	oldProbe, oldHatch := probeJail, hatchPath
	defer func() { probeJail, hatchPath = oldProbe, oldHatch }()
	hatchPath = filepath.Join(b.TempDir(), "allow-unwrapped")
	b.Run("baseline-read-status", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadFile("/proc/self/status"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("outside-blocks", func(b *testing.B) {
		probeJail = sandbox.ProbeJail
		for b.Loop() {
			if Run(HookPromptGate, []string{"claude"}, strings.NewReader(claudePrompt), io.Discard, io.Discard) != 2 {
				b.Fatal("not blocked")
			}
		}
	})
	b.Run("inside-allows", func(b *testing.B) {
		m := &sandbox.Marker{Schema: 1, Agent: "codex", Egress: "off"}
		// The real probe's reads, then the answer a jail gives.
		probeJail = func() (*sandbox.Marker, error) { sandbox.ProbeJail(); return m, nil }
		for b.Loop() {
			if Run(HookPromptGate, []string{"codex"}, strings.NewReader(codexPrompt), io.Discard, io.Discard) != 0 {
				b.Fatal("not allowed")
			}
		}
	})
}

// BenchmarkGateProcess is the whole hook as an agent runs it: /bin/sh runs
// the installed script, which execs the helper (here the test binary) on the
// agent's JSON. Each iteration also runs the baseline, `/bin/sh -c true`, so
// the report shows both and the guard's own share ("overhead-ms/op").
func BenchmarkGateProcess(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(b.TempDir(), HookPromptGate)
	if err := os.WriteFile(p, script(HookPromptGate, exe), 0o755); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), helperEnv+"=1", "CCO_GUARD_TEST_HATCH="+filepath.Join(b.TempDir(), "none"))
	var gate, base time.Duration
	for b.Loop() {
		t0 := time.Now()
		cmd := exec.Command("/bin/sh", "-c", p+" claude")
		cmd.Env, cmd.Stdin = env, strings.NewReader(claudePrompt)
		if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 2 {
			b.Fatalf("gate: %v", err)
		}
		t1 := time.Now()
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
		gate += t1.Sub(t0)
		base += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(gate.Microseconds())/1e3/n, "gate-ms/op")
	b.ReportMetric(float64(base.Microseconds())/1e3/n, "baseline-ms/op")
	b.ReportMetric(float64((gate-base).Microseconds())/1e3/n, "overhead-ms/op")
}

// BenchmarkVerifier is every in-jail check once (on the host most fail, at
// the same cost); the agents' SessionStart budget is one second.
func BenchmarkVerifier(b *testing.B) {
	m := &sandbox.Marker{Schema: 1, Agent: "claude", Egress: "off"}
	for b.Loop() {
		_ = jailReport(m)
	}
}
