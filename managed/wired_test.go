package managed_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/guard/wiring"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/managed"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
)

var bothAgents = managed.Config{Agents: agent.Names()}

type target struct {
	t    *testing.T
	dir  string
	root *provision.Root
}

func newTarget(t *testing.T) *target {
	t.Helper()
	dir := t.TempDir()
	return &target{t, dir, provisiontest.Root(t, dir)}
}

// install runs the guard's and the policy steps, as cco-install does.
func (tg *target) install() *provision.Report {
	tg.t.Helper()
	return provisiontest.Execute(tg.t, tg.dir, append(wiring.Steps(), managed.Steps(bothAgents)...))
}

func (tg *target) receipt() *provision.Receipt {
	tg.t.Helper()
	rc, _, err := provision.LoadReceipt(tg.root)
	if err != nil {
		tg.t.Fatal(err)
	}
	return rc
}

func (tg *target) put(p, content string, mode os.FileMode) {
	tg.t.Helper()
	hp := filepath.Join(tg.dir, p)
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		tg.t.Fatal(err)
	}
	if err := os.WriteFile(hp, []byte(content), mode); err != nil {
		tg.t.Fatal(err)
	}
}

func (tg *target) wiring(agent string) managed.Wiring {
	tg.t.Helper()
	w := managed.Wired(tg.root, tg.receipt(), []string{agent})
	if len(w) != 1 || w[0].Agent != agent {
		tg.t.Fatalf("Wired: %+v", w)
	}
	return w[0]
}

// On a fresh root an install leaves the guard active for both agents, and a
// second look finds no drift.
func TestInstallThenStatusActive(t *testing.T) {
	tg := newTarget(t)
	if rep := tg.install(); rep.ExitCode() != 0 {
		t.Fatalf("install: %+v", rep.Steps)
	}
	for _, w := range managed.Wired(tg.root, tg.receipt(), nil) {
		p, _ := agent.Lookup(w.Agent)
		if p.Policy == "" {
			// Jail only: no vendor layer to wire, and status says so.
			if w.Active || w.State != managed.JailOnly || !strings.Contains(w.Detail, "jail alone") {
				t.Errorf("%s: %+v, want jail only", w.Agent, w)
			}
			continue
		}
		if !w.Active || w.State != managed.WiredOurs {
			t.Errorf("%s: %+v, want active and ours", w.Agent, w)
		}
	}
	if f := wiring.Drift(tg.root, tg.receipt(), nil); len(f) != 0 {
		t.Errorf("drift right after an install: %+v", f)
	}
}

// A foreign requirements.toml present beforehand: exit 3, the file is
// byte-identical, codex's guard is reported inactive, and the snippet is in
// the step's snippet field; claude's guard is installed all the same.
func TestInstallWithForeignRequirements(t *testing.T) {
	tg := newTarget(t)
	foreign := "# the site's own policy\nallowed_approval_policies = [\"on-request\"]\n"
	tg.put(managed.CodexRequirementsPath, foreign, 0o644)
	rep := tg.install()
	if rep.ExitCode() != provision.ExitConflict {
		t.Fatalf("exit %d, want 3: %+v", rep.ExitCode(), rep.Steps)
	}
	if b, _ := os.ReadFile(filepath.Join(tg.dir, managed.CodexRequirementsPath)); string(b) != foreign {
		t.Fatalf("the foreign requirements.toml was modified:\n%s", b)
	}
	var snippet string
	for _, s := range rep.Steps {
		if s.ID == "policy.codex.requirements" {
			snippet = s.Snippet
		}
	}
	if !strings.Contains(snippet, "[[hooks.UserPromptSubmit.hooks]]") || !strings.Contains(snippet, guard.Command(guard.HookPromptGate, "codex")) {
		t.Fatalf("snippet %q", snippet)
	}
	if w := tg.wiring("codex"); w.Active || w.State != managed.NotWiredForeign {
		t.Errorf("codex: %+v, want inactive, foreign-without", w)
	}
	if w := tg.wiring("claude"); !w.Active {
		t.Errorf("claude: %+v, want active", w)
	}
}

const claudeGuard = `{"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/session-start claude"}]}],
 "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/prompt-gate claude"}]}]}}`

func TestWiredClaude(t *testing.T) {
	cases := []struct {
		name    string
		install bool
		files   map[string]string
		state   managed.WireState
		active  bool
		detail  string
	}{
		{"missing", false, nil, managed.NotWiredMissing, false, "no Claude Code managed settings"},
		{"ours", true, nil, managed.WiredOurs, true, "(cco's) wires the guard"},
		{"foreign with the guard", false, map[string]string{managed.ClaudeDropinDir + "/40-site.json": claudeGuard}, managed.WiredForeign, true, "guard present (foreign file /etc/claude-code/managed-settings.d/40-site.json)"},
		{"foreign without", false, map[string]string{managed.ClaudeBasePath: `{"permissions": {"defaultMode": "plan"}}`}, managed.NotWiredForeign, false, "wires the prompt gate"},
		{"defeated by a later drop-in", true, map[string]string{managed.ClaudeDropinDir + "/90-site.json": `{"disableAllHooks": true}`}, managed.Defeated, false, "90-site.json sets disableAllHooks: true"},
		{"defeated by the base", true, map[string]string{managed.ClaudeBasePath: `{"disableAllHooks": true}`}, managed.Defeated, false, "managed-settings.json sets disableAllHooks"},
		{"re-enabled by a later drop-in", true, map[string]string{managed.ClaudeBasePath: `{"disableAllHooks": true}`, managed.ClaudeDropinDir + "/90-site.json": `{"disableAllHooks": false}`}, managed.WiredOurs, true, ""},
		{"our drop-in broken", true, map[string]string{managed.ClaudeDropinPath: `{"hooks": `}, managed.Malformed, false, "50-cco.json does not parse: line 1, column"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := newTarget(t)
			if c.install {
				tg.install()
			}
			for p, b := range c.files {
				tg.put(p, b, 0o644)
			}
			w := tg.wiring("claude")
			if w.State != c.state || w.Active != c.active || !strings.Contains(w.Detail, c.detail) || (!w.Active && w.Fix == "") {
				t.Fatalf("%+v, want %s active=%v with %q and a fix", w, c.state, c.active, c.detail)
			}
		})
	}
}

func TestWiredCodex(t *testing.T) {
	withGuard := "[[hooks.SessionStart]]\n[[hooks.SessionStart.hooks]]\ncommand = \"/usr/libexec/cco/guard/session-start codex\"\n" +
		"[[hooks.UserPromptSubmit]]\n[[hooks.UserPromptSubmit.hooks]]\ntype = \"command\"\ncommand = \"/usr/libexec/cco/guard/prompt-gate codex\"\n"
	cases := []struct {
		name    string
		install bool
		file    string
		state   managed.WireState
		active  bool
		detail  string
	}{
		{"missing", false, "", managed.NotWiredMissing, false, "does not exist"},
		{"ours", true, "", managed.WiredOurs, true, "(cco's) wires the guard"},
		{"foreign with the guard", false, withGuard, managed.WiredForeign, true, "guard present (foreign file"},
		{"foreign without", false, "model = \"o3\"\n", managed.NotWiredForeign, false, "does not wire cco's guard hooks"},
		{"ours, edited away", true, "# emptied\n", managed.NotWiredForeign, false, "was cco's and was edited"},
		{"malformed", false, "[features]\nhooks = tru\n", managed.Malformed, false, "does not parse: line 2, column"},
		{"hooks feature off", false, "[features]\nhooks = false\n" + withGuard, managed.Defeated, false, "hooks = false"},
		{"gate for another agent", false, strings.ReplaceAll(withGuard, " codex", " claude"), managed.NotWiredForeign, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := newTarget(t)
			if c.install {
				tg.install()
			}
			if c.file != "" {
				tg.put(managed.CodexRequirementsPath, c.file, 0o644)
			}
			w := tg.wiring("codex")
			if w.State != c.state || w.Active != c.active || !strings.Contains(w.Detail, c.detail) || (!w.Active && w.Fix == "") {
				t.Fatalf("%+v, want %s active=%v with %q and a fix", w, c.state, c.active, c.detail)
			}
		})
	}
}

func findings(fs []provision.Finding) string {
	var b bytes.Buffer
	for _, f := range fs {
		b.WriteString(f.Path + ": " + f.Detail + " [" + f.Fix + "]\n")
	}
	return b.String()
}

func TestDrift(t *testing.T) {
	user := &provision.User{Name: "ada", UID: 1000, GID: 1000, Home: "/home/ada"}
	cases := []struct {
		name  string
		setup func(tg *target)
		want  []string // each in some finding (path: message [fix])
	}{
		{"guard script edited", func(tg *target) {
			tg.put(guard.PromptGateScript, "#!/bin/sh\nexit 0\n", 0o755)
		}, []string{guard.PromptGateScript + ": the guard script was changed since cco installed it"}},
		{"guard script loosened", func(tg *target) {
			os.Chmod(filepath.Join(tg.dir, guard.SessionStartScript), 0o777)
		}, []string{guard.SessionStartScript + ": the guard script has mode 0777", "chmod 0755"}},
		{"guard script given to a user", func(tg *target) {
			testenv.RequireRoot(tg.t)
			os.Chown(filepath.Join(tg.dir, guard.PromptGateScript), 1000, 1000)
		}, []string{guard.PromptGateScript + ": the guard script has mode 0755 and owner uid 1000, not 0755 and uid 0"}},
		{"guard script removed", func(tg *target) {
			os.Remove(filepath.Join(tg.dir, guard.PromptGateScript))
		}, []string{guard.PromptGateScript + ": the guard script is missing, so every prompt is blocked"}},
		{"policy removed", func(tg *target) {
			os.Remove(filepath.Join(tg.dir, managed.ClaudeDropinPath))
		}, []string{managed.ClaudeDropinPath + ": the policy file cco wrote was removed"}},
		{"policy edited", func(tg *target) {
			tg.put(managed.CodexManagedConfigPath, "check_for_update_on_startup = true\n", 0o644)
		}, []string{managed.CodexManagedConfigPath + ": the policy file cco wrote was edited", "--force"}},
		{"vendor claude ahead on PATH", func(tg *target) {
			tg.put("/home/ada/.local/share/claude/versions/2.1.328", "ELF", 0o755)
			os.MkdirAll(filepath.Join(tg.dir, "/home/ada/.local/bin"), 0o755)
			os.Symlink("/home/ada/.local/share/claude/versions/2.1.328", filepath.Join(tg.dir, "/home/ada/.local/bin/claude"))
			tg.put("/home/ada/.bashrc", "# ~/.bashrc\nalias ll='ls -l'\nexport PATH=\"$HOME/.local/bin:$PATH\"\n", 0o644)
			tg.put("/home/ada/.profile", "PATH=\"$PATH:$HOME/.local/bin\"\n", 0o644) // appends: not ahead
		}, []string{"/home/ada/.local/bin/claude: ada's /home/ada/.local/bin/claude is a symlink to /home/ada/.local/share/claude/versions/2.1.328 (Claude Code's native installer): a claude that runs unwrapped, ahead of /usr/local/bin/claude (~/.bashrc line 3 put ~/.local/bin first on PATH)",
			"[remove /home/ada/.local/bin/claude; then `claude` runs cco's wrapper /usr/local/bin/claude]"}},
		{"vendor codex ahead on PATH", func(tg *target) {
			tg.put("/home/ada/.local/bin/codex", "ELF", 0o755)
			tg.put("/home/ada/.bashrc", "# >>> Codex installer >>>\nexport PATH=\"/home/ada/.local/bin:$PATH\"\n# <<< Codex installer <<<\n", 0o644)
		}, []string{"ada's /home/ada/.local/bin/codex is a file of 3 bytes: a codex that runs unwrapped", "~/.bashrc line 2"}},
		{"an npm claude in /usr/local/sbin", func(tg *target) {
			os.MkdirAll(filepath.Join(tg.dir, "/usr/local/sbin"), 0o755)
			os.Symlink("/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", filepath.Join(tg.dir, "/usr/local/sbin/claude"))
		}, []string{"/usr/local/sbin/claude is a symlink to /usr/lib/node_modules/@anthropic-ai/claude-code/cli.js (an npm global install)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := newTarget(t)
			if rep := tg.install(); rep.ExitCode() != 0 {
				t.Fatalf("install: %+v", rep.Steps)
			}
			c.setup(tg)
			got := findings(wiring.Drift(tg.root, tg.receipt(), []*provision.User{user}))
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("findings:\n%s\nlack %q", got, w)
				}
			}
		})
	}
	t.Run("a link to the shadow is fine", func(t *testing.T) {
		tg := newTarget(t)
		tg.install()
		os.MkdirAll(filepath.Join(tg.dir, "/home/ada/.local/bin"), 0o755)
		os.Symlink("/usr/local/bin/codex", filepath.Join(tg.dir, "/home/ada/.local/bin/codex"))
		if got := wiring.Drift(tg.root, tg.receipt(), []*provision.User{user}); len(got) != 0 {
			t.Fatalf("findings: %s", findings(got))
		}
	})
}
