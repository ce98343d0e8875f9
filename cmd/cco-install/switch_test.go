package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Sessions started during an upgrade or a rollback get the old or the new
// binary, never a broken one: a loop execs the vendor binaries through their
// `current` links (the paths the shadow execs) while the installer switches
// them back and forth.
func TestLaunchesDuringSwitchNeverFail(t *testing.T) {
	st, root, shadow, env := storeRoot(t, "claude,codex")
	inst := func(args ...string) {
		t.Helper()
		cmd := installer(t, root, shadow, env, args...)
		// installer sets CCO_AGENTS= first; the later value wins.
		if r := runReport(t, cmd); r.Failed != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	inst()
	st.stable.Store("2.1.330")
	st.latest.Store("0.170.0")

	versions := []string{"2.1.328", "2.1.330", "0.169.0", "0.170.0"}
	var launchers []func() (string, error)
	for _, bin := range []string{"usr/libexec/cco/claude/current/claude", "usr/libexec/cco/codex-dist/current/bin/codex"} {
		p := filepath.Join(root, bin)
		launchers = append(launchers, func() (string, error) {
			out, err := exec.Command(p).Output()
			return string(out), err
		})
	}
	whileLaunching(t, 20, versions, launchers, func() {
		for i := 0; i < 3; i++ {
			inst("--upgrade", "all")
			inst("--rollback", "all")
		}
	})
}

// whileLaunching runs each launcher in a loop of its own while switch runs,
// and fails the test if any launch failed or printed none of the versions, or
// if fewer than min launches ran (then it proved nothing).
func whileLaunching(t *testing.T, min int64, versions []string, launchers []func() (string, error), switches func()) {
	t.Helper()
	var launches, failures atomic.Int64
	var bad sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, launch := range launchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				out, err := launch()
				launches.Add(1)
				ok := false
				for _, v := range versions {
					ok = ok || strings.Contains(out, v)
				}
				if err != nil || !ok {
					failures.Add(1)
					bad.Store(out+" "+fmtErr(err), true)
				}
			}
		}()
	}
	switches()
	close(stop)
	wg.Wait()
	if launches.Load() < min {
		t.Fatalf("only %d launches ran during the switches: the test proved nothing", launches.Load())
	}
	if n := failures.Load(); n != 0 {
		bad.Range(func(k, _ any) bool { t.Logf("failed launch: %v", k); return true })
		t.Fatalf("%d of %d launches failed during the switches", n, launches.Load())
	}
	t.Logf("%d launches during the switches, none failed", launches.Load())
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
