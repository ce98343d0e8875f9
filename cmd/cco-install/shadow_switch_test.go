package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
)

// The shadow (the real one, with a fake vendor binary) is launched in a loop
// while cco-install upgrades and rolls Claude Code back and forth: zero
// failed launches, and each one ran the old or the new release.
func TestShadowLaunchesDuringSwitchNeverFail(t *testing.T) {
	testenv.RequireBwrap(t)
	testenv.RequireRoot(t)
	// Outside /tmp: the jail's /tmp is private (a root below it would hide
	// the vendor binary), and the workspace below it must not be in a
	// shared scratch tree.
	root := testenv.WorkDir(t)
	dir := t.TempDir()
	shadow := filepath.Join(dir, "shadow")
	build := exec.Command(testenv.GoTool(), "build",
		"-ldflags", "-X github.com/cco-dev/cco/sandbox.SystemRoot="+root, "-o", shadow, "github.com/cco-dev/cco/cmd/shadow")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the shadow: %v\n%s", err, out)
	}
	st := newVendorStore()
	defer st.srv.Close()
	env := []string{"CCO_AGENTS=claude", "CCO_CLAUDE_BASE_URL=" + st.srv.URL + "/claude"}
	inst := func(args ...string) {
		t.Helper()
		if r := runReport(t, installer(t, root, shadow, env, args...)); r.Failed != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	inst()
	os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755)
	if err := os.Symlink("/usr/bin/bwrap", filepath.Join(root, "usr/bin/bwrap")); err != nil {
		t.Fatal(err)
	}
	// No network is needed by the fake agent: egress off keeps the launch lean.
	os.WriteFile(filepath.Join(root, "etc/cco/sandbox.toml"), []byte("egress = \"off\"\n"), 0o644)
	home, ws := filepath.Join(root, "home"), filepath.Join(root, "ws")
	os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
	os.MkdirAll(ws, 0o755)

	launch := func() (string, error) {
		cmd := exec.Command(filepath.Join(root, "usr/local/bin/claude"))
		cmd.Dir = ws
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "USER=root"}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return string(out) + " stderr: " + stderr.String(), err
		}
		return string(out), err
	}
	if out, err := launch(); err != nil || !strings.Contains(out, "2.1.328 (Claude Code)") {
		t.Fatalf("a launch before any switch: %q, %v", out, err)
	}
	st.stable.Store("2.1.330")

	// Two sessions at a time in one home and workspace, as a user with two
	// terminals: they share the shadow's mount-point placeholders.
	whileLaunching(t, 10, []string{"2.1.328 (Claude Code)", "2.1.330 (Claude Code)"}, []func() (string, error){launch, launch}, func() {
		for i := 0; i < 10; i++ {
			inst("--upgrade", "claude")
			inst("--rollback", "claude")
		}
	})
}
