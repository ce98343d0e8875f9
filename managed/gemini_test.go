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

// cco's Gemini CLI settings: the guard's two hooks under the events Gemini
// CLI runs (SessionStart, BeforeAgent), hooks on, the auto-updater and its
// notice off, timeouts in milliseconds; and what cco writes parses back as
// wiring the guard.
func TestGeminiSettings(t *testing.T) {
	var v struct {
		General struct {
			EnableAutoUpdate             *bool `json:"enableAutoUpdate"`
			EnableAutoUpdateNotification *bool `json:"enableAutoUpdateNotification"`
		} `json:"general"`
		HooksConfig struct {
			Enabled *bool `json:"enabled"`
		} `json:"hooksConfig"`
		Hooks map[string][]struct {
			Hooks []struct {
				Type, Command, Name string
				Timeout             int
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(GeminiSettings(), &v); err != nil {
		t.Fatal(err)
	}
	if v.General.EnableAutoUpdate == nil || *v.General.EnableAutoUpdate || v.General.EnableAutoUpdateNotification == nil || *v.General.EnableAutoUpdateNotification {
		t.Errorf("general %+v: the updater is not off", v.General)
	}
	if v.HooksConfig.Enabled == nil || !*v.HooksConfig.Enabled {
		t.Error("hooksConfig.enabled is not true")
	}
	for event, cmd := range map[string]string{
		"SessionStart": "/usr/libexec/cco/guard/session-start gemini",
		"BeforeAgent":  "/usr/libexec/cco/guard/prompt-gate gemini",
	} {
		g := v.Hooks[event]
		if len(g) != 1 || len(g[0].Hooks) != 1 || g[0].Hooks[0].Command != cmd || g[0].Hooks[0].Type != "command" || g[0].Hooks[0].Timeout != 10000 || g[0].Hooks[0].Name == "" {
			t.Errorf("%s: %+v", event, g)
		}
	}
	p, err := ParseGeminiPolicy(GeminiSettingsPath, GeminiSettings())
	if err != nil || !p.Wires() || p.AutoUpdate == nil || *p.AutoUpdate {
		t.Fatalf("cco's own file parses as %+v, %v", p, err)
	}
}

// A fresh install creates /etc/gemini-cli 0755 whatever the umask: Gemini
// CLI skips the file under a group- or world-writable directory.
func TestGeminiSettingsDirMode(t *testing.T) {
	dir := t.TempDir()
	rep := apply(t, dir, Steps(Config{Agents: []string{"gemini"}}), false)
	if rep.ExitCode() != 0 {
		t.Fatalf("%+v", rep.Steps)
	}
	for _, d := range []string{"/etc", GeminiSettingsDir} {
		fi, err := os.Stat(filepath.Join(dir, d))
		if err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v, want mode 0755", d, fi.Mode(), err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, GeminiSettingsPath)); fi == nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("settings mode %v", fi)
	}
}

func TestWiredGemini(t *testing.T) {
	withGuard := `{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/session-start gemini"}]}],
  "BeforeAgent": [{"hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/prompt-gate"}]}]}}`
	cases := []struct {
		name    string
		install bool
		file    string
		chmod   os.FileMode // of /etc/gemini-cli, when set
		state   WireState
		active  bool
		detail  string
	}{
		{"missing", false, "", 0, NotWiredMissing, false, "does not exist"},
		{"ours", true, "", 0, WiredOurs, true, "(cco's) wires the guard"},
		{"foreign with the guard", false, withGuard, 0, WiredForeign, true, "guard present (foreign file /etc/gemini-cli/settings.json)"},
		{"foreign without", false, `{"ui": {}}`, 0, NotWiredForeign, false, "does not wire cco's guard hooks"},
		{"ours, edited away", true, `{}`, 0, NotWiredForeign, false, "was cco's and was edited"},
		{"malformed", false, "{\n\"hooks\": [\n", 0, Malformed, false, "does not parse: line"},
		{"hooks off", false, strings.Replace(withGuard, `{"hooks": {`, `{"hooksConfig": {"enabled": false}, "hooks": {`, 1), 0, Defeated, false, "hooksConfig.enabled = false"},
		{"gate disabled", false, strings.Replace(withGuard, `{"hooks": {`, `{"hooksConfig": {"disabled": ["/usr/libexec/cco/guard/prompt-gate gemini"]}, "hooks": {`, 1), 0, Defeated, false, "hooksConfig.disabled"},
		{"gate for another agent", false, strings.ReplaceAll(withGuard, "prompt-gate\"", "prompt-gate claude\""), 0, NotWiredForeign, false, ""},
		{"directory world-writable", true, "", 0o777, Defeated, false, "/etc/gemini-cli is writable by group or others (mode 0777), so Gemini CLI skips"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.install {
				apply(t, dir, Steps(Config{Agents: []string{"gemini"}}), false)
			}
			if c.file != "" {
				put(t, dir, GeminiSettingsPath, []byte(c.file))
			}
			if c.chmod != 0 {
				if err := os.Chmod(filepath.Join(dir, GeminiSettingsDir), c.chmod); err != nil {
					t.Fatal(err)
				}
			}
			root := provisiontest.Root(t, dir)
			rc, _, err := provision.LoadReceipt(root)
			if err != nil {
				t.Fatal(err)
			}
			ws := Wired(root, rc, []string{"gemini"})
			if len(ws) != 1 {
				t.Fatalf("%+v", ws)
			}
			w := ws[0]
			if w.State != c.state || w.Active != c.active || !strings.Contains(w.Detail, c.detail) || (!w.Active && w.Fix == "") {
				t.Fatalf("%+v, want %s active=%v with %q and a fix", w, c.state, c.active, c.detail)
			}
		})
	}
}
