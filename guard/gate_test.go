package guard

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
)

// seams points the guard at a test system root (with the shadow installed)
// and at no escape hatch, and restores everything afterwards.
func seams(t *testing.T) (root string) {
	t.Helper()
	oldProbe, oldRoot, oldHatch, oldPath, oldProc, oldEnv := probeJail, sysRoot, hatchPath, pathEnv, procDir, environ
	t.Cleanup(func() {
		probeJail, sysRoot, hatchPath, pathEnv, procDir, environ = oldProbe, oldRoot, oldHatch, oldPath, oldProc, oldEnv
	})
	root = t.TempDir()
	for _, a := range agent.Names() {
		writeExe(t, filepath.Join(root, ShadowDir, a))
	}
	sysRoot = root
	hatchPath = filepath.Join(t.TempDir(), "allow-unwrapped")
	pathEnv = func() string { return "/usr/local/bin:/usr/bin:/bin" }
	return root
}

func writeExe(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// The test process itself is outside any jail: the real probe must say so,
// and the gate must block with the agent's form and the fix.
func TestGateBlocksOutside(t *testing.T) {
	for _, agent := range agentNames {
		t.Run(agent, func(t *testing.T) {
			seams(t)
			_, prompt := inputs(agent)
			code, out, errOut := runHook(HookPromptGate, []string{agent}, prompt)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stdout %q stderr %q)", code, out, errOut)
			}
			if strings.TrimSpace(errOut) == "" {
				t.Fatal("stderr is empty: Codex lets an exit 2 with empty stderr through")
			}
			for _, want := range []string{"blocked", "not running inside a cco jail", "this " + agent, "`" + agent + "`", ShadowDir} {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr %q lacks %q", errOut, want)
				}
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing when blocking", out)
			}
		})
	}
}

// Environment variables that a user or an agent could set are never
// evidence of a jail.
func TestGateForgedEnvStillBlocked(t *testing.T) {
	seams(t)
	for _, kv := range [][2]string{
		{"CCO_JAIL", "1"}, {"CCO_SANDBOX", "1"}, {"CCO_INSIDE_JAIL", "1"}, {"CCO_AGENT", "claude"},
		{"CCO_JAIL_MARKER", "/tmp/jail"}, {"container", "bwrap"},
	} {
		t.Setenv(kv[0], kv[1])
	}
	code, _, errOut := runHook(HookPromptGate, []string{"claude"}, claudePrompt)
	if code != 2 || !strings.Contains(errOut, "blocked") {
		t.Fatalf("exit %d stderr %q: a forged environment let the prompt through", code, errOut)
	}
}

func TestGateEscapeHatch(t *testing.T) {
	testenv.RequireRoot(t) // the hatch counts only when root owns it
	for _, agent := range agentNames {
		t.Run(agent, func(t *testing.T) {
			seams(t)
			if err := os.WriteFile(hatchPath, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			_, prompt := inputs(agent)
			code, out, errOut := runHook(HookPromptGate, []string{agent}, prompt)
			if code != 0 {
				t.Fatalf("exit %d stderr %q, want 0 with the hatch", code, errOut)
			}
			var msg struct{ SystemMessage string }
			if err := json.Unmarshal([]byte(out), &msg); err != nil {
				t.Fatalf("stdout %q is not a systemMessage JSON: %v", out, err)
			}
			if !strings.Contains(msg.SystemMessage, "WARNING") || !strings.Contains(msg.SystemMessage, AllowUnwrappedPath) {
				t.Errorf("systemMessage %q does not warn and name the hatch", msg.SystemMessage)
			}
			// The verifier still warns.
			start, _ := inputs(agent)
			code, out, _ = runHook(HookSessionStart, []string{agent}, start)
			if code != 0 || !strings.Contains(out, "WARNING") || !strings.Contains(out, "unconfined") {
				t.Errorf("verifier exit %d stdout %q, want a loud warning", code, out)
			}
		})
	}
}

// A flag file that a user could have made is not the operator's hatch.
func TestGateEscapeHatchForged(t *testing.T) {
	testenv.RequireRoot(t)
	t.Run("owned by a user", func(t *testing.T) {
		seams(t)
		if err := os.WriteFile(hatchPath, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(hatchPath, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runHook(HookPromptGate, []string{"codex"}, codexPrompt)
		if code != 2 || !strings.Contains(errOut, "owned by uid 65534") {
			t.Fatalf("exit %d stderr %q: a user-owned hatch was honoured", code, errOut)
		}
	})
	t.Run("in a directory others can write", func(t *testing.T) {
		seams(t)
		dir := filepath.Dir(hatchPath)
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hatchPath, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runHook(HookPromptGate, []string{"claude"}, claudePrompt)
		if code != 2 || !strings.Contains(errOut, "its directory is not root's alone") {
			t.Fatalf("exit %d stderr %q: a hatch in a writable directory was honoured", code, errOut)
		}
	})
	t.Run("a symlink", func(t *testing.T) {
		seams(t)
		target := filepath.Join(t.TempDir(), "x")
		os.WriteFile(target, nil, 0o644)
		if err := os.Symlink(target, hatchPath); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := runHook(HookPromptGate, []string{"claude"}, claudePrompt); code != 2 {
			t.Fatalf("exit %d: a symlinked hatch was honoured", code)
		}
	})
}

func TestGateFailsClosed(t *testing.T) {
	cases := []struct {
		name, hook string
		args       []string
		stdin      string
		panic      bool
		want       string
	}{
		{"empty input", HookPromptGate, []string{"claude"}, "", false, "not the JSON object"},
		{"not JSON", HookPromptGate, []string{"codex"}, "hello", false, "not the JSON object"},
		{"truncated JSON", HookPromptGate, []string{"claude"}, claudePrompt[:40], false, "not the JSON object"},
		{"unknown agent", HookPromptGate, []string{"cursor"}, claudePrompt, false, `unknown agent "cursor"`},
		{"too many args", HookPromptGate, []string{"claude", "x"}, claudePrompt, false, "too many arguments"},
		{"unknown hook", "pre-tool", []string{"claude"}, claudePrompt, false, `unknown hook "pre-tool"`},
		{"oversized input", HookPromptGate, []string{"claude"}, `{"prompt":"` + strings.Repeat("x", maxInput) + `"}`, false, "larger than"},
		{"a panic in a check", HookPromptGate, []string{"claude"}, claudePrompt, true, "internal error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seams(t)
			inside := func() (*sandbox.Marker, error) {
				return &sandbox.Marker{Schema: 1, Agent: "claude", Egress: "off"}, nil
			}
			probeJail = inside // even inside a jail, a broken call blocks
			if c.panic {
				probeJail = func() (*sandbox.Marker, error) { panic("boom") }
			}
			code, _, errOut := runHook(c.hook, c.args, c.stdin)
			if code != 2 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "blocking") {
				t.Fatalf("exit %d stderr %q, want 2 and %q", code, errOut, c.want)
			}
		})
	}
}

// Without an agent argument the guard tells the agents apart by their input.
func TestGateInfersAgent(t *testing.T) {
	seams(t)
	for agent, in := range map[string]string{"claude": claudePrompt, "codex": codexPrompt, "gemini": geminiPrompt, "gemini ": geminiSessionStart} {
		agent = strings.TrimSpace(agent)
		_, _, errOut := runHook(HookPromptGate, nil, in)
		if !strings.Contains(errOut, "this "+agent+" ") {
			t.Errorf("%s input: stderr %q does not name %s", agent, errOut, agent)
		}
	}
}

func TestGateDiagnosis(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, root string)
		path  string
		want  string
	}{
		{"shadow missing", func(_ *testing.T, root string) { os.Remove(filepath.Join(root, ShadowDir, "claude")) },
			"/usr/local/bin:/usr/bin", "The cco wrapper /usr/local/bin/claude is missing: reinstall it with `sudo cco-install`"},
		{"shadowed by ~/.local/bin", func(t *testing.T, root string) { writeExe(t, filepath.Join(root, "home/u/.local/bin/claude")) },
			"/home/u/.local/bin:/usr/local/bin:/usr/bin", "`claude` on your PATH is /home/u/.local/bin/claude, which comes before the cco wrapper /usr/local/bin/claude: remove /home/u/.local/bin/claude"},
		{"not on PATH", func(*testing.T, string) {}, "/usr/bin:/bin", "/usr/local/bin is not on your PATH"},
		{"started another way", func(*testing.T, string) {}, "/usr/local/bin:/usr/bin", "was started another way"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := seams(t)
			c.setup(t, root)
			pathEnv = func() string { return c.path }
			_, _, errOut := runHook(HookPromptGate, []string{"claude"}, claudePrompt)
			if !strings.Contains(errOut, c.want) {
				t.Fatalf("stderr %q lacks %q", errOut, c.want)
			}
		})
	}
}

// Inside a jail the gate allows silently: exit-0 stdout would become model
// context.
func TestGateAllowsInsideProbe(t *testing.T) {
	seams(t)
	probeJail = func() (*sandbox.Marker, error) { return &sandbox.Marker{Schema: 1, Agent: "codex", Egress: "off"}, nil }
	code, out, errOut := runHook(HookPromptGate, []string{"codex"}, codexPrompt)
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("exit %d stdout %q stderr %q, want a silent 0", code, out, errOut)
	}
}
