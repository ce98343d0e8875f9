package guard_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/managed"
)

// The real Gemini CLI, unwrapped, with cco's system settings: it runs the
// guard's SessionStart verifier (its warning is shown) and BeforeAgent gate,
// which blocks the prompt, and prints "Agent execution blocked:" with the
// guard's reason. It runs in a network namespace of its own: not one packet
// leaves, and the block comes before any model call anyway.
func TestRealGeminiBlockedUnwrapped(t *testing.T) {
	realagents.Require(t)
	pkg := filepath.Join(realagents.Dir(t, realagents.Gemini), "package")
	// Gemini CLI reads a system settings file only when it and every
	// directory above it are root's and not writable by others.
	testenv.RequireRoot(t)
	script := filepath.Join(pkg, "bundle/gemini.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("%s: %v (fix: remove %s, and the next run unpacks it again)", script, err, realagents.CacheDir)
	}
	dir := testenv.WorkDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	settings := string(managed.GeminiSettings())
	for _, hook := range []string{guard.HookSessionStart, guard.HookPromptGate} {
		// The hook scripts run this test binary as the helper.
		p := filepath.Join(dir, hook)
		body := "#!/bin/sh\nCCO_GUARD_TEST_HELPER=1 exec " + self + " guard " + hook + " \"$@\"\n"
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		settings = strings.ReplaceAll(settings, guard.ScriptPath(hook), p)
	}
	etc := filepath.Join(dir, "etc")
	home := filepath.Join(dir, "home")
	ws := filepath.Join(dir, "ws")
	for _, d := range []string{etc, home, ws} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(etc, "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--net", "node", script, "-p", "hello", "--skip-trust")
	cmd.Dir = ws
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "NO_COLOR=1",
		"GEMINI_API_KEY=dummy-key-for-an-offline-test",
		"GEMINI_CLI_SYSTEM_SETTINGS_PATH=" + filepath.Join(etc, "settings.json")}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("gemini did not finish in 2 minutes:\n%s", out)
	}
	text := string(out)
	for _, want := range []string{
		"Agent execution blocked: cco guard: blocked: this gemini is not running inside a cco jail",
		"cco guard: WARNING: this gemini is not running inside a cco jail",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("gemini's output lacks %q (exit %v):\n%s", want, err, text)
		}
	}
	if strings.Contains(text, "Security Warning") {
		t.Errorf("gemini skipped the settings file:\n%s", text)
	}
}
