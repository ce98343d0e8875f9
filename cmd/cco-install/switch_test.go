package main

import (
	"os"
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
	st := newVendorStore()
	defer st.srv.Close()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(root, 0o755)
	shadow := filepath.Join(dir, "shadow")
	os.WriteFile(shadow, []byte("#!/bin/sh\n"), 0o755)
	env := []string{"CCO_AGENTS=claude,codex", "CCO_CLAUDE_BASE_URL=" + st.srv.URL + "/claude",
		"CCO_CODEX_BASE_URLS=" + st.srv.URL + "/codex", "CCO_CODEX_GITHUB_BASE_URL=", "CCO_CODEX_GITHUB_API_URL="}
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

	var launches, failures atomic.Int64
	var bad sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, bin := range []string{"usr/libexec/cco/claude/current/claude", "usr/libexec/cco/codex-dist/current/bin/codex"} {
		wg.Add(1)
		go func(p string) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				out, err := exec.Command(filepath.Join(root, p)).Output()
				launches.Add(1)
				s := string(out)
				if err != nil || !(strings.Contains(s, "2.1.328") || strings.Contains(s, "2.1.330") || strings.Contains(s, "0.169.0") || strings.Contains(s, "0.170.0")) {
					failures.Add(1)
					bad.Store(s+" "+fmtErr(err), true)
				}
			}
		}(bin)
	}
	for i := 0; i < 3; i++ {
		inst("--upgrade", "all")
		inst("--rollback", "all")
	}
	close(stop)
	wg.Wait()
	if launches.Load() < 20 {
		t.Fatalf("only %d launches ran during the switches: the test proved nothing", launches.Load())
	}
	if n := failures.Load(); n != 0 {
		bad.Range(func(k, _ any) bool { t.Logf("failed launch: %v", k); return true })
		t.Fatalf("%d of %d launches failed during the switches", n, launches.Load())
	}
	t.Logf("%d launches during 6 switches, none failed", launches.Load())
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
