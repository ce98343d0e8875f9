package managed

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
)

// cco's OpenCode config lists the guard's plugin by its file URL, with the
// updater off; it parses back as wiring the guard, and the plugin file is
// installed beside the hook scripts, 0644.
func TestOpencodeConfig(t *testing.T) {
	var v struct {
		Plugin     []string `json:"plugin"`
		Autoupdate *bool    `json:"autoupdate"`
	}
	if err := json.Unmarshal(OpencodeConfig(), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Plugin) != 1 || v.Plugin[0] != "file:///usr/libexec/cco/guard/opencode.js" || v.Autoupdate == nil || *v.Autoupdate {
		t.Errorf("%+v", v)
	}
	if p, err := ParseOpencodePolicy(OpencodeConfigPath, OpencodeConfig()); err != nil || !p.Plugin {
		t.Fatalf("cco's own file parses as %+v, %v", p, err)
	}
	dir := t.TempDir()
	if rep := apply(t, dir, Steps(Config{Agents: []string{"opencode"}}), false); rep.ExitCode() != 0 {
		t.Fatalf("%+v", rep.Steps)
	}
	fi, err := os.Stat(filepath.Join(dir, guard.OpencodePluginPath))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("plugin: %v %v", fi, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, guard.OpencodePluginPath))
	for _, want := range []string{`"chat.message"`, "session.created", `"/usr/libexec/cco/guard"`, `const agent = "opencode"`, "throw new Error"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the plugin lacks %s", want)
		}
	}
}

// The plugin entry is found in every form OpenCode takes (the URL, the
// path, [spec, options]) and in JSON with comments; a foreign file without
// it is a conflict with the snippet to merge, left as it was.
func TestOpencodeForeign(t *testing.T) {
	for _, c := range []struct {
		name, file string
		plugin     bool
	}{
		{"url", `{"plugin": ["file:///usr/libexec/cco/guard/opencode.js"]}`, true},
		{"path", `{"plugin": ["/usr/libexec/cco/guard/opencode.js", "x"]}`, true},
		{"with options", `{"plugin": [["file:///usr/libexec/cco/guard/opencode.js", {"a": 1}]]}`, true},
		{"comments", "{\n// site policy\n\"plugin\": [\"file:///usr/libexec/cco/guard/opencode.js\",],\n}", true},
		{"another plugin", `{"plugin": ["opencode-foo"]}`, false},
		{"none", `{"share": "disabled"}`, false},
	} {
		p, err := ParseOpencodePolicy(OpencodeConfigPath, []byte(c.file))
		if err != nil || p.Plugin != c.plugin {
			t.Errorf("%s: %+v %v", c.name, p, err)
		}
	}
	if _, err := ParseOpencodePolicy(OpencodeConfigPath, []byte("{\n\"plugin\": [\n")); err == nil || !strings.Contains(err.Error(), "does not parse: line") {
		t.Errorf("malformed: %v", err)
	}
	dir := t.TempDir()
	foreign := `{"share": "disabled"}`
	put(t, dir, OpencodeConfigPath, []byte(foreign))
	rep := apply(t, dir, Steps(Config{Agents: []string{"opencode"}}), false)
	if rep.ExitCode() != provision.ExitConflict {
		t.Fatalf("exit %d: %+v", rep.ExitCode(), rep.Steps)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, OpencodeConfigPath)); string(b) != foreign {
		t.Fatalf("the foreign file was changed: %s", b)
	}
	found := false
	for _, s := range rep.Steps {
		found = found || s.ID == "policy.opencode" && strings.Contains(s.Snippet, guard.OpencodePluginURL) && strings.Contains(s.Fix, "opencode.foreign_policy")
	}
	if !found {
		t.Errorf("no snippet and fix: %+v", rep.Steps)
	}
	rep = apply(t, dir, Steps(Config{Agents: []string{"opencode"}, ForeignPolicy: map[string]string{"opencode": ForeignWarn}}), false)
	if rep.ExitCode() != 0 {
		t.Errorf("warn: exit %d: %+v", rep.ExitCode(), rep.Steps)
	}
}

// status says the guard is active only when the config lists the plugin
// and the plugin file is cco's byte for byte: a plugin OpenCode cannot load
// is only logged.
func TestWiredOpencode(t *testing.T) {
	for _, c := range []struct {
		name    string
		install bool
		file    string
		plugin  *string // the plugin file's content, when set
		state   WireState
		active  bool
		detail  string
	}{
		{"missing", false, "", nil, NotWiredMissing, false, "does not exist"},
		{"ours", true, "", nil, WiredOurs, true, "(cco's) wires the guard"},
		{"plugin removed", true, "", ptr(""), Defeated, false, "is missing: OpenCode logs"},
		{"plugin edited", true, "", ptr("export const CcoGuard = async () => ({})\n"), Defeated, false, "not cco's plugin any more"},
		{"foreign without", false, `{"plugin": []}`, nil, NotWiredForeign, false, "does not wire"},
		{"ours, edited away", true, `{}`, nil, NotWiredForeign, false, "was cco's and was edited"},
		{"malformed", false, "{\n\"plugin\": [\n", nil, Malformed, false, "does not parse: line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.install {
				apply(t, dir, Steps(Config{Agents: []string{"opencode"}}), false)
			}
			if c.file != "" {
				put(t, dir, OpencodeConfigPath, []byte(c.file))
			}
			if c.plugin != nil {
				p := filepath.Join(dir, guard.OpencodePluginPath)
				if *c.plugin == "" {
					os.Remove(p)
				} else {
					os.WriteFile(p, []byte(*c.plugin), 0o644)
				}
			}
			root := provisiontest.Root(t, dir)
			rc, _, err := provision.LoadReceipt(root)
			if err != nil {
				t.Fatal(err)
			}
			w := Wired(root, rc, []string{"opencode"})[0]
			if w.State != c.state || w.Active != c.active || !strings.Contains(w.Detail, c.detail) || (!w.Active && w.Fix == "") {
				t.Fatalf("%+v, want %s active=%v with %q and a fix", w, c.state, c.active, c.detail)
			}
		})
	}
}

func ptr(s string) *string { return &s }
