package main

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// fakeEgressProxy stands in for the egress proxy: its bytes are what is copied.
var fakeEgressProxy = []byte("#!/bin/sh\necho egress-proxy\n")

// installer runs the cco-install command (this test binary under that name)
// against root with the given shadow source and a stand-in egress proxy.
func installer(t *testing.T, root, shadow string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := exec.LookPath("cco-install")
	if err != nil {
		t.Fatalf("cco-install command not set up: %v", err)
	}
	proxy := filepath.Join(t.TempDir(), "egress-proxy")
	if err := os.WriteFile(proxy, fakeEgressProxy, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"--root", root, "--json"}, args...)...)
	cmd.Env = append(os.Environ(), append([]string{"CCO_SHADOW_PATH=" + shadow, "CCO_EGRESS_PROXY_PATH=" + proxy, "CCO_IMAGE=no", "CCO_AGENTS="}, env...)...)
	return cmd
}

type report struct {
	Changed int `json:"changed"`
	Failed  int `json:"failed"`
	Steps   []struct {
		ID       string   `json:"id"`
		Status   string   `json:"status"`
		Warnings []string `json:"warnings"`
	} `json:"steps"`
}

func runReport(t *testing.T, cmd *exec.Cmd) report {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\n%s\n%s", cmd.Args, err, errb.String(), out.String())
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
	return r
}

// shadowsIntact checks that each shadow name is absent (before its first
// install) or holds exactly one of the allowed contents: never partial.
func shadowsIntact(t *testing.T, root string, mayBeAbsent bool, allowed ...[]byte) {
	t.Helper()
	for _, name := range []string{"claude", "codex"} {
		b, err := os.ReadFile(filepath.Join(root, "usr/local/bin", name))
		if os.IsNotExist(err) && mayBeAbsent {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ok := false
		for _, a := range allowed {
			ok = ok || bytes.Equal(b, a)
		}
		if !ok {
			hist := map[byte]int{}
			for _, c := range b {
				hist[c]++
			}
			t.Fatalf("/usr/local/bin/%s holds %d bytes that are neither version (byte counts %v): partly written", name, len(b), hist)
		}
	}
}

func converges(t *testing.T, root, shadow string) {
	t.Helper()
	if r := runReport(t, installer(t, root, shadow, nil)); r.Failed != 0 {
		t.Fatalf("rerun failed: %+v", r)
	}
	if r := runReport(t, installer(t, root, shadow, nil)); r.Changed != 0 {
		t.Fatalf("after the rerun, a further run still changes %d steps: %+v", r.Changed, r.Steps)
	}
}

// Killed after each step in turn, then rerun: always converges, and no
// shadow is ever missing (once installed) or partly written.
func TestKilledAfterEachStepConverges(t *testing.T) {
	dir := t.TempDir()
	v1, v2 := []byte("#!/bin/sh\necho shadow v1\n"), []byte("#!/bin/sh\necho shadow v2, longer\n")
	shadow := filepath.Join(dir, "shadow")
	os.WriteFile(shadow, v1, 0o755)

	probe := filepath.Join(dir, "probe")
	os.MkdirAll(probe, 0o755)
	var ids []string
	for _, s := range runReport(t, installer(t, probe, shadow, nil, "--dry-run")).Steps {
		ids = append(ids, s.ID)
	}
	if len(ids) < 4 {
		t.Fatalf("plan too short: %v", ids)
	}
	for _, id := range ids {
		t.Run("fresh/"+id, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			os.MkdirAll(root, 0o755)
			killedAfter(t, installer(t, root, shadow, []string{"CCO_TEST_KILL_AFTER=" + id}))
			shadowsIntact(t, root, true, v1)
			converges(t, root, shadow)
			shadowsIntact(t, root, false, v1)
		})
		t.Run("upgrade/"+id, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			os.MkdirAll(root, 0o755)
			runReport(t, installer(t, root, shadow, nil))
			next := filepath.Join(t.TempDir(), "shadow")
			os.WriteFile(next, v2, 0o755)
			cmd := installer(t, root, next, []string{"CCO_TEST_KILL_AFTER=" + id})
			if id == "shadow.claude" || id == "shadow.codex" || id == "sandbox.helper" {
				killedAfter(t, cmd)
			} else {
				cmd.Run() // a step with nothing to do is never applied: no kill
			}
			shadowsIntact(t, root, false, v1, v2)
			converges(t, root, next)
			shadowsIntact(t, root, false, v2)
		})
	}
}

func killedAfter(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("want the installer killed by the test hook, got %v", err)
	}
}

// SIGKILL at random moments during an upgrade with a large shadow, each
// followed by a check and, at the end, a rerun that converges.
func TestKilledAtRandomMomentsConverges(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(root, 0o755)
	big := func(n byte) []byte { return bytes.Repeat([]byte{n}, 32<<20) }
	v1, v2 := big(1), big(2)
	s1, s2 := filepath.Join(dir, "s1"), filepath.Join(dir, "s2")
	os.WriteFile(s1, v1, 0o755)
	os.WriteFile(s2, v2, 0o755)
	runReport(t, installer(t, root, s1, nil))

	rng := rand.New(rand.NewSource(1))
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 12 && time.Now().Before(deadline); i++ {
		src := []string{s1, s2}[i%2]
		cmd := installer(t, root, src, nil)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Intn(150)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		shadowsIntact(t, root, false, v1, v2)
	}
	converges(t, root, s2)
	shadowsIntact(t, root, false, v2)
}
