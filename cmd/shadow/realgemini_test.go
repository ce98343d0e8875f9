package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
)

// The real Gemini CLI (the pinned @google/gemini-cli pack, internal/realagents)
// through the shadow, as an unprivileged user, with egress off: Gemini's own
// sandbox stays off, the headless run is trusted, no system settings file
// gets in its way, and the prompt goes to the model, which it cannot reach
// (the jail has no network: not one packet leaves).
func TestRealGeminiThroughTheShadow(t *testing.T) {
	realagents.Require(t)
	pkg := filepath.Join(realagents.Dir(t, realagents.Gemini), "package")
	testenv.RequireRoot(t)
	testenv.RequireBwrap(t)
	root, err := buildRoot()
	t.Cleanup(func() { os.RemoveAll(root) })
	if err != nil {
		t.Fatal(err)
	}
	// The package in place of the fake agent, readable by every user, and
	// the host's Node as the vendor step links it (gemini.node).
	current := filepath.Join(root, "usr/libexec/cco/gemini/current")
	if err := os.RemoveAll(current); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(pkg)
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		node, err = filepath.EvalSymlinks(node)
	}
	if err != nil {
		t.Fatalf("node: %v (fix: apt-get install nodejs)", err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(current, 0o755))
	must(os.Symlink(filepath.Join(abs, "bundle"), filepath.Join(current, "bundle")))
	must(os.Symlink(filepath.Join(abs, "package.json"), filepath.Join(current, "package.json")))
	must(os.Symlink(node, filepath.Join(current, "node")))
	if err := os.WriteFile(filepath.Join(root, "etc/cco/sandbox.toml"), []byte("egress = \"off\"\npass_env = [\"GEMINI_API_KEY\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, asNobody)
	c := w.cmd(root, "gemini", w.ws, "-p", "hello")
	c.Env = append(c.Env, "GEMINI_API_KEY=dummy-key-for-an-offline-test", "NO_COLOR=1")
	defer testenv.Launching(t)()
	text := realagents.RunUntil(t, c, filepath.Join(w.base, "gemini.out"), 90*time.Second, func(s string) bool { return strings.Contains(s, "fetch failed") })
	if !strings.Contains(text, "fetch failed") {
		t.Fatalf("gemini did not get as far as the model call:\n%s", text)
	}
	for _, bad := range []string{"Agent execution blocked", "Security Warning", "untrusted", "not trusted", "docker", "podman", "Please set an Auth method"} {
		if strings.Contains(text, bad) {
			t.Errorf("gemini's output has %q:\n%s", bad, text)
		}
	}
}
