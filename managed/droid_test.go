package managed

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
)

// cco's Droid settings: the verifier at SessionStart, the gate at
// UserPromptSubmit and at PreToolUse for every tool (plain droid exec
// runs no UserPromptSubmit), timeouts in seconds, the auto-updater off;
// and it parses back as wiring the guard.
func TestDroidSettings(t *testing.T) {
	var v struct {
		AutoUpdateEnabled *bool `json:"autoUpdateEnabled"`
		Hooks             map[string][]struct {
			Matcher *string `json:"matcher"`
			Hooks   []struct {
				Type, Command string
				Timeout       int
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(DroidSettings(), &v); err != nil {
		t.Fatal(err)
	}
	if v.AutoUpdateEnabled == nil || *v.AutoUpdateEnabled {
		t.Error("autoUpdateEnabled is not false")
	}
	for event, cmd := range map[string]string{
		"SessionStart":     "/usr/libexec/cco/guard/session-start droid",
		"UserPromptSubmit": "/usr/libexec/cco/guard/prompt-gate droid",
		"PreToolUse":       "/usr/libexec/cco/guard/prompt-gate droid",
	} {
		g := v.Hooks[event]
		if len(g) != 1 || len(g[0].Hooks) != 1 || g[0].Hooks[0].Command != cmd || g[0].Hooks[0].Type != "command" || g[0].Hooks[0].Timeout != 10 {
			t.Errorf("%s: %+v", event, g)
		}
		if (event == "PreToolUse") != (g[0].Matcher != nil && *g[0].Matcher == "*") {
			t.Errorf("%s: matcher %v", event, g[0].Matcher)
		}
	}
	p, err := ParseDroidPolicy(DroidSettingsPath, DroidSettings())
	if err != nil || !p.Wires() || p.AutoUpdate == nil || *p.AutoUpdate {
		t.Fatalf("cco's own file parses as %+v, %v", p, err)
	}
}

func TestWiredDroid(t *testing.T) {
	withGuard := `{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/session-start droid"}]}],
  "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/prompt-gate droid"}]}],
  "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/prompt-gate droid"}]}]}}`
	for _, c := range []struct {
		name    string
		install bool
		file    string
		state   WireState
		active  bool
		detail  string
	}{
		{"missing", false, "", NotWiredMissing, false, "does not exist"},
		{"ours", true, "", WiredOurs, true, "(cco's) wires the guard"},
		{"foreign with the guard", false, withGuard, WiredForeign, true, "guard present (foreign file /etc/factory/settings.json)"},
		{"foreign, no tool gate", false, strings.Replace(withGuard, `"matcher": "*"`, `"matcher": "Execute"`, 1), NotWiredForeign, false, "does not wire"},
		{"foreign without", false, `{"model": "x"}`, NotWiredForeign, false, "does not wire"},
		{"ours, edited away", true, `{}`, NotWiredForeign, false, "was cco's and was edited"},
		{"malformed", false, "{\n\"hooks\": [\n", Malformed, false, "does not parse: line"},
		{"hooks off", false, strings.Replace(withGuard, `{"hooks": {`, `{"hooksDisabled": true, "hooks": {`, 1), Defeated, false, "hooksDisabled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.install {
				apply(t, dir, Steps(Config{Agents: []string{"droid"}}), false)
			}
			if c.file != "" {
				put(t, dir, DroidSettingsPath, []byte(c.file))
			}
			root := provisiontest.Root(t, dir)
			rc, _, err := provision.LoadReceipt(root)
			if err != nil {
				t.Fatal(err)
			}
			w := Wired(root, rc, []string{"droid"})[0]
			if w.State != c.state || w.Active != c.active || !strings.Contains(w.Detail, c.detail) || (!w.Active && w.Fix == "") {
				t.Fatalf("%+v, want %s active=%v with %q and a fix", w, c.state, c.active, c.detail)
			}
		})
	}
	// A foreign file: a conflict with the snippet of what it lacks, left
	// byte for byte.
	dir := t.TempDir()
	foreign := `{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/session-start droid"}]}]}}`
	put(t, dir, DroidSettingsPath, []byte(foreign))
	rep := apply(t, dir, Steps(Config{Agents: []string{"droid"}}), false)
	if rep.ExitCode() != provision.ExitConflict {
		t.Fatalf("exit %d", rep.ExitCode())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, DroidSettingsPath)); string(b) != foreign {
		t.Fatalf("changed: %s", b)
	}
	for _, s := range rep.Steps {
		if s.ID == "policy.droid" && (strings.Contains(s.Snippet, "SessionStart") || !strings.Contains(s.Snippet, "PreToolUse") || !strings.Contains(s.Snippet, "autoUpdateEnabled")) {
			t.Errorf("snippet %s", s.Snippet)
		}
	}
}
