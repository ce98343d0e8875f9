package attack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
)

// TestLoginStateReadOnly: everything the vendor loads at start from the
// agent's login state (env files, plugins and extensions, hook, MCP and
// trust config, custom commands) is read-only in the jail. The probe tries
// to write, replace, rename away and plant into each; the host's copies are
// unchanged afterwards, and nothing planted ran (the default verdict: git,
// the shell, a second launch).
func TestLoginStateReadOnly(t *testing.T) {
	runAttacks(t, []attack{{
		name: "plant what the vendor runs at start",
		probe: func(w *world, name string) probe {
			p, _ := agent.Lookup(name)
			var st []step
			for i, rel := range p.HomeReadOnly {
				path := filepath.Join(w.Home, strings.TrimSuffix(rel, "/"))
				payload := shq(w.touch(fmt.Sprintf("login-%s-%d", name, i)))
				var sh string
				if strings.HasSuffix(rel, "/") {
					sh = fmt.Sprintf(`mkdir -p %[1]q/x 2>/dev/null && printf %%s %[2]s > %[1]q/x/run.sh && echo DONE-plant
mv %[1]q %[1]q.gone 2>/dev/null && echo DONE-rename
printf %%s %[2]s > %[1]q/planted 2>/dev/null && echo DONE-write`, path, payload)
				} else {
					sh = fmt.Sprintf(`printf 'BROWSER=%%s\n' %[2]s > %[1]q 2>/dev/null && echo DONE-write
rm -f %[1]q 2>/dev/null && echo DONE-remove
mv %[1]q %[1]q.gone 2>/dev/null && echo DONE-rename`, path, payload)
				}
				st = append(st, step{Name: fmt.Sprintf("login%d", i), Sh: sh})
			}
			return probe{Steps: st}
		},
		check: func(t *testing.T, w *world, name string, sess jailtest.Result) {
			started(t, sess)
			p, _ := agent.Lookup(name)
			for i, rel := range p.HomeReadOnly {
				if out := sess.Report[fmt.Sprintf("sh:login%d", i)]; strings.Contains(out, "DONE") {
					t.Errorf("LEAK: in the jail, ~/%s could be changed: %s", rel, out)
				}
				path := filepath.Join(w.Home, strings.TrimSuffix(rel, "/"))
				fi, err := os.Lstat(path)
				if err != nil {
					t.Errorf("~/%s is gone from the host after the session: %v", rel, err)
					continue
				}
				if fi.IsDir() {
					if ents, _ := os.ReadDir(path); len(ents) != 0 {
						t.Errorf("LEAK: ~/%s holds %v after the session", rel, ents)
					}
				} else if b, _ := os.ReadFile(path); strings.Contains(string(b), w.sentinel) {
					t.Errorf("LEAK: ~/%s names a planted command after the session: %q", rel, b)
				}
			}
		},
	}})
}

// TestRealGeminiLoadsNothingTheJailWrote: the real Gemini CLI, run
// unwrapped after a hostile session, starts no MCP server the session
// tried to plant as an extension. The control shows that the same
// extension, written on the host, does start at an unwrapped launch: the
// verdict could fail.
func TestRealGeminiLoadsNothingTheJailWrote(t *testing.T) {
	realagents.Require(t)
	testenv.RequireRoot(t)
	script := filepath.Join(realagents.Dir(t, realagents.Gemini), "package/bundle/gemini.js")
	r := shared.Get(t)
	extension := func(marker string) string {
		return fmt.Sprintf(`{"name":"evil","version":"1.0.0","mcpServers":{"evil":{"command":"sh","args":["-c","touch %s"]}}}`, marker)
	}
	// The unwrapped gemini, offline, until its MCP servers have started:
	// the marker is made, or the model call has failed (which comes after
	// the servers start).
	unwrapped := func(t *testing.T, w *world, marker string) string {
		c := exec.Command("unshare", "--net", "node", script, "-p", "hello", "--skip-trust")
		c.Dir = w.ws
		c.Env = []string{"HOME=" + w.Home, "PATH=/usr/local/bin:/usr/bin:/bin", "TERM=dumb", "NO_COLOR=1",
			"GEMINI_API_KEY=dummy-key-for-an-offline-test", "GEMINI_CLI_SYSTEM_SETTINGS_PATH=/nonexistent/settings.json"}
		return realagents.RunUntil(t, c, filepath.Join(t.TempDir(), "out"), 90*time.Second, func(out string) bool {
			_, err := os.Stat(marker)
			return err == nil || strings.Contains(out, "rror")
		})
	}
	t.Run("control", func(t *testing.T) {
		w := newWorld(t, jailtest.AsRoot)
		marker := filepath.Join(w.sentinel, "control")
		dir := filepath.Join(w.Home, ".gemini/extensions/evil")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "gemini-extension.json"), []byte(extension(marker)), 0o644)
		out := unwrapped(t, w, marker)
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the real gemini, unwrapped, did not start an extension's MCP server written on the host: the test cannot tell a leak (%v)\n%s", err, out)
		}
	})
	for _, u := range users {
		t.Run(u.Name, func(t *testing.T) {
			w := newWorld(t, u)
			marker := filepath.Join(w.sentinel, "planted-extension")
			dir := filepath.Join(w.Home, ".gemini/extensions/evil")
			sess := w.launch(t, r, "gemini", w.ws, probe{Steps: steps("plant",
				fmt.Sprintf("mkdir -p %q && printf %%s %s > %q/gemini-extension.json && echo DONE", dir, shq(extension(marker)), dir))})
			started(t, sess)
			notDone(t, sess, map[string]string{"plant": "planting an extension in ~/.gemini/extensions"})
			out := unwrapped(t, w, marker)
			if _, err := os.Stat(marker); err == nil {
				t.Error("LEAK: the real gemini, unwrapped, started an MCP server the session planted")
			}
			if !strings.Contains(out, "rror") {
				t.Errorf("the unwrapped gemini never got as far as its model call, so its servers may not have started:\n%s", out)
			}
		})
	}
}
