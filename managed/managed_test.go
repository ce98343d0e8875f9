package managed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
)

var both = Config{Agents: []string{"claude", "codex"}}

// apply runs steps against the target root dir, as cco-install does.
func apply(t *testing.T, dir string, steps []provision.Step, force bool) *provision.Report {
	t.Helper()
	return provisiontest.Execute(t, dir, steps, func(run *provision.Run) { run.Force = force })
}

func step(rep *provision.Report, id string) provision.StepReport {
	for _, s := range rep.Steps {
		if s.ID == id {
			return s
		}
	}
	return provision.StepReport{ID: id, Status: "absent from the report"}
}

func put(t *testing.T, dir, target string, b []byte) {
	t.Helper()
	p := filepath.Join(dir, target)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, target string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, target))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	foreignReqNoGuard = `# site policy
allowed_approval_policies = ["never", "on-request"]

[rules]
prefix_rules = []
`
	foreignReqWithGuard = `# site policy that already runs cco's guard
[features]
hooks = true

[[hooks.UserPromptSubmit]]
[[hooks.UserPromptSubmit.hooks]]
type = "command"
command = "/usr/libexec/cco/guard/prompt-gate codex"

[[hooks.SessionStart]]
matcher = "startup|resume"
[[hooks.SessionStart.hooks]]
type = "command"
command = "/usr/libexec/cco/guard/session-start"
`
	foreignReqMalformed  = "[features]\nhooks = true\n\n[[hooks.SessionStart]\nmatcher = \"startup\"\n"
	foreignCfgNoGuard    = "model = \"gpt-5-codex\"\n"
	foreignCfgWithGuard  = "check_for_update_on_startup = false\nmodel = \"gpt-5-codex\"\n"
	foreignClaudeBase    = `{"permissions": {"defaultMode": "acceptEdits"}}`
	foreignGeminiNoGuard = `{"ui": {"theme": "GitHub"}}`
	// Gemini CLI reads its settings with comments and trailing commas.
	foreignGeminiWithGuard = `{
  // the site's own settings, which already run cco's guard
  "general": {"enableAutoUpdate": false},
  "hooksConfig": {"enabled": true},
  "hooks": {
    "SessionStart": [{"hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/session-start gemini"}]}],
    "BeforeAgent": [{"matcher": "*", "hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/prompt-gate gemini", "timeout": 5000},]}],
  },
}`
	foreignClaudeGuard = `{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/prompt-gate claude"}]}],
  "SessionStart": [{"hooks": [{"type": "command", "command": "/usr/libexec/cco/guard/session-start claude"}]}]}}`
)

// tomlPos is where BurntSushi/toml places the error in s, as the report
// must quote it.
func tomlPos(s string) string {
	var v map[string]any
	_, err := toml.Decode(s, &v)
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		panic("not a TOML syntax error: " + s)
	}
	return fmt.Sprintf("line %d, column %d: %s", pe.Position.Line, pe.Position.Col, pe.Message)
}

// The policy writers' table: every owner/state of every file, with what the
// step must report and what must be on disk afterwards.
func TestPolicyWriters(t *testing.T) {
	type tc struct {
		name     string
		cfg      Config
		id, path string
		ours     []byte
		setup    func(t *testing.T, dir string) // before the run under test
		status   string
		detail   string // in the detail
		snippet  string // in the snippet ("" for none)
		warning  string // in a warning
		keep     bool   // the file is byte-identical afterwards
		exit     int
	}
	edit := func(id string, cfg Config, path string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			apply(t, dir, Steps(cfg), false)
			b := read(t, dir, path)
			put(t, dir, path, append(b, "\n"...))
		}
	}
	base := Config{Agents: []string{"claude"}, ClaudeManagedFile: ClaudeBase}
	warn := Config{Agents: []string{"codex"}, ForeignPolicy: map[string]string{"codex": ForeignWarn}}
	gem := Config{Agents: []string{"gemini"}}
	gemWarn := Config{Agents: []string{"gemini"}, ForeignPolicy: map[string]string{"gemini": ForeignWarn}}
	var cases []tc
	files := []struct {
		id, path string
		cfg      Config
		ours     []byte
	}{
		{"policy.claude", ClaudeDropinPath, both, ClaudeSettings()},
		{"policy.claude", ClaudeBasePath, base, ClaudeSettings()},
		{"policy.codex.requirements", CodexRequirementsPath, both, CodexRequirements()},
		{"policy.codex.managed-config", CodexManagedConfigPath, both, CodexManagedConfig()},
		{"policy.gemini", GeminiSettingsPath, gem, GeminiSettings()},
	}
	for _, f := range files {
		cases = append(cases,
			tc{name: f.path + " absent", cfg: f.cfg, id: f.id, path: f.path, ours: f.ours, status: "changed", detail: "created"},
			tc{name: f.path + " ours", cfg: f.cfg, id: f.id, path: f.path, ours: f.ours, setup: func(t *testing.T, dir string) { apply(t, dir, Steps(f.cfg), false) }, status: "ok", detail: "up to date"},
			tc{name: f.path + " ours but hand-edited", cfg: f.cfg, id: f.id, path: f.path, setup: edit(f.id, f.cfg, f.path), status: "conflict", detail: "was edited after cco wrote it", keep: true, exit: 3},
		)
	}
	cases = append(cases,
		tc{name: "gemini settings foreign without the guard", cfg: gem, id: "policy.gemini", path: GeminiSettingsPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, GeminiSettingsPath, []byte(foreignGeminiNoGuard)) },
			status: "conflict", detail: "is not cco's and does not wire cco's guard hooks and turn the auto-updater off", snippet: `"command": "/usr/libexec/cco/guard/prompt-gate gemini"`, keep: true, exit: 3},
		tc{name: "gemini settings foreign without the guard, warn", cfg: gemWarn, id: "policy.gemini", path: GeminiSettingsPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, GeminiSettingsPath, []byte(foreignGeminiNoGuard)) },
			status: "skipped", detail: `gemini.foreign_policy = "warn"`, snippet: `"BeforeAgent"`, warning: "merge the snippet by hand", keep: true},
		tc{name: "gemini settings foreign with the guard (JSON with comments)", cfg: gem, id: "policy.gemini", path: GeminiSettingsPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, GeminiSettingsPath, []byte(foreignGeminiWithGuard)) },
			status: "ok", detail: "guard present (foreign file /etc/gemini-cli/settings.json)", keep: true},
		tc{name: "gemini settings foreign with the guard but the updater on", cfg: gem, id: "policy.gemini", path: GeminiSettingsPath,
			setup: func(t *testing.T, dir string) {
				put(t, dir, GeminiSettingsPath, []byte(strings.Replace(foreignGeminiWithGuard, `"enableAutoUpdate": false`, `"enableAutoUpdate": true`, 1)))
			},
			status: "conflict", detail: "does not wire cco's guard hooks and turn the auto-updater off", snippet: `"enableAutoUpdate": false`, keep: true, exit: 3},
		tc{name: "gemini settings foreign with hooks off", cfg: gem, id: "policy.gemini", path: GeminiSettingsPath,
			setup: func(t *testing.T, dir string) {
				put(t, dir, GeminiSettingsPath, []byte(strings.Replace(foreignGeminiWithGuard, `"enabled": true`, `"enabled": false`, 1)))
			},
			status: "conflict", detail: "does not wire", snippet: `"enabled": true`, keep: true, exit: 3},
		tc{name: "gemini settings malformed", cfg: gem, id: "policy.gemini", path: GeminiSettingsPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, GeminiSettingsPath, []byte("{\n  \"general\": {,\n}\n")) },
			status: "conflict", detail: "/etc/gemini-cli/settings.json does not parse: line 2, column", snippet: `"SessionStart"`, keep: true, exit: 3},
		tc{name: "gemini settings directory group-writable", cfg: gem, id: "policy.gemini", path: GeminiSettingsDir + "/keep",
			setup: func(t *testing.T, dir string) {
				put(t, dir, GeminiSettingsDir+"/keep", []byte("x"))
				if err := os.Chmod(filepath.Join(dir, GeminiSettingsDir), 0o775); err != nil {
					t.Fatal(err)
				}
			},
			status: "conflict", detail: "/etc/gemini-cli is writable by group or others (mode 0775), so Gemini CLI would skip", keep: true, exit: 3},
		tc{name: "requirements foreign without the guard", cfg: both, id: "policy.codex.requirements", path: CodexRequirementsPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, CodexRequirementsPath, []byte(foreignReqNoGuard)) },
			status: "conflict", detail: "is not cco's and does not wire cco's guard hooks", snippet: `command = "/usr/libexec/cco/guard/prompt-gate codex"`, keep: true, exit: 3},
		tc{name: "requirements foreign without the guard, warn", cfg: warn, id: "policy.codex.requirements", path: CodexRequirementsPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, CodexRequirementsPath, []byte(foreignReqNoGuard)) },
			status: "skipped", detail: `codex.foreign_policy = "warn"`, snippet: "[[hooks.UserPromptSubmit]]", warning: "merge the snippet by hand", keep: true},
		tc{name: "requirements foreign with the guard", cfg: both, id: "policy.codex.requirements", path: CodexRequirementsPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, CodexRequirementsPath, []byte(foreignReqWithGuard)) },
			status: "ok", detail: "guard present (foreign file /etc/codex/requirements.toml)", keep: true},
		tc{name: "requirements malformed", cfg: both, id: "policy.codex.requirements", path: CodexRequirementsPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, CodexRequirementsPath, []byte(foreignReqMalformed)) },
			status: "conflict", detail: "/etc/codex/requirements.toml does not parse: " + tomlPos(foreignReqMalformed), snippet: "[features]", keep: true, exit: 3},
		tc{name: "requirements malformed, warn", cfg: warn, id: "policy.codex.requirements", path: CodexRequirementsPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, CodexRequirementsPath, []byte(foreignReqMalformed)) },
			status: "conflict", detail: "does not parse: " + tomlPos(foreignReqMalformed), snippet: "[[hooks.UserPromptSubmit]]", keep: true, exit: 3},
		tc{name: "managed_config foreign without the setting", cfg: both, id: "policy.codex.managed-config", path: CodexManagedConfigPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, CodexManagedConfigPath, []byte(foreignCfgNoGuard)) },
			status: "conflict", detail: "does not set check_for_update_on_startup = false", snippet: "before the first [table] header:\ncheck_for_update_on_startup = false", keep: true, exit: 3},
		tc{name: "managed_config foreign with the setting", cfg: both, id: "policy.codex.managed-config", path: CodexManagedConfigPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, CodexManagedConfigPath, []byte(foreignCfgWithGuard)) },
			status: "ok", detail: "present (foreign file", keep: true},
		tc{name: "managed_config with cco's bytes but not in the receipt", cfg: both, id: "policy.codex.managed-config", path: CodexManagedConfigPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, CodexManagedConfigPath, CodexManagedConfig()) },
			status: "ok", detail: "it carries cco's marker line, but the receipt does not list it", keep: true},
		tc{name: "managed_config malformed", cfg: both, id: "policy.codex.managed-config", path: CodexManagedConfigPath,
			setup: func(t *testing.T, dir string) {
				put(t, dir, CodexManagedConfigPath, []byte("check_for_update_on_startup = \n"))
			},
			status: "conflict", detail: "does not parse: " + tomlPos("check_for_update_on_startup = \n"), snippet: "check_for_update_on_startup = false", keep: true, exit: 3},
		tc{name: "requirements is a directory", cfg: both, id: "policy.codex.requirements", path: CodexRequirementsPath + "/x",
			setup:  func(t *testing.T, dir string) { put(t, dir, CodexRequirementsPath+"/x", []byte("keep")) },
			status: "conflict", detail: "/etc/codex/requirements.toml is a directory", keep: true, exit: 3},
		tc{name: "claude drop-in foreign", cfg: both, id: "policy.claude", path: ClaudeDropinPath,
			setup:  func(t *testing.T, dir string) { put(t, dir, ClaudeDropinPath, []byte(foreignClaudeGuard)) },
			status: "conflict", detail: "not written by cco", keep: true, exit: 3},
		tc{name: "claude base foreign (legacy mode)", cfg: base, id: "policy.claude", path: ClaudeBasePath,
			setup:  func(t *testing.T, dir string) { put(t, dir, ClaudeBasePath, []byte(foreignClaudeBase)) },
			status: "conflict", detail: `set claude.managed_file = "dropin"`, snippet: `"command": "/usr/libexec/cco/guard/prompt-gate claude"`, keep: true, exit: 3},
		tc{name: "claude base malformed beside our drop-in", cfg: both, id: "policy.claude", path: ClaudeBasePath,
			setup:  func(t *testing.T, dir string) { put(t, dir, ClaudeBasePath, []byte("{\n  \"env\": {,\n}")) },
			status: "changed", warning: "managed-settings.json does not parse: line 2, column", keep: true},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.setup != nil {
				c.setup(t, dir)
			}
			var before []byte
			if c.keep {
				before = read(t, dir, c.path)
			}
			rep := apply(t, dir, Steps(c.cfg), false)
			s := step(rep, c.id)
			if s.Status != c.status || !strings.Contains(s.Detail, c.detail) {
				t.Fatalf("%s: status %q detail %q, want %q with %q", c.id, s.Status, s.Detail, c.status, c.detail)
			}
			if !strings.Contains(s.Snippet, c.snippet) || (c.snippet == "" && s.Snippet != "") {
				t.Errorf("snippet %q, want %q", s.Snippet, c.snippet)
			}
			if c.warning != "" && !strings.Contains(strings.Join(s.Warnings, "\n"), c.warning) {
				t.Errorf("warnings %q lack %q", s.Warnings, c.warning)
			}
			if rep.ExitCode() != c.exit {
				t.Errorf("exit %d, want %d", rep.ExitCode(), c.exit)
			}
			if c.keep && !bytes.Equal(before, read(t, dir, c.path)) {
				t.Errorf("%s was modified", c.path)
			}
			if c.ours != nil && !bytes.Equal(read(t, dir, c.path), c.ours) {
				t.Errorf("%s does not hold cco's content", c.path)
			}
		})
	}
}

// An edited file of ours is replaced only with --force, keeping the edit.
func TestPolicyForceReplacesEdited(t *testing.T) {
	dir := t.TempDir()
	apply(t, dir, Steps(both), false)
	put(t, dir, CodexRequirementsPath, []byte("# emptied by hand\n"))
	rep := apply(t, dir, Steps(both), true)
	if s := step(rep, "policy.codex.requirements"); s.Status != "changed" || !strings.Contains(s.Detail, "old bytes are at") {
		t.Fatalf("forced run: %+v", s)
	}
	if !bytes.Equal(read(t, dir, CodexRequirementsPath), CodexRequirements()) {
		t.Fatal("--force did not restore cco's requirements.toml")
	}
}

// The snippet, appended as the operator is told to, makes the foreign file
// wire the guard.
func TestRequirementsSnippetMerges(t *testing.T) {
	for name, foreign := range map[string]string{
		"no features table": foreignReqNoGuard,
		"only the gate":     "[[hooks.UserPromptSubmit]]\n[[hooks.UserPromptSubmit.hooks]]\ntype = \"command\"\ncommand = \"/usr/libexec/cco/guard/prompt-gate codex\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			put(t, dir, CodexRequirementsPath, []byte(foreign))
			s := step(apply(t, dir, Steps(both), false), "policy.codex.requirements")
			if s.Status != "conflict" {
				t.Fatalf("status %q", s.Status)
			}
			put(t, dir, CodexRequirementsPath, []byte(foreign+"\n"+s.Snippet))
			if s := step(apply(t, dir, Steps(both), false), "policy.codex.requirements"); s.Status != "ok" || !strings.Contains(s.Detail, "guard present (foreign file") {
				t.Fatalf("after merging the snippet: %q %q\nfile:\n%s", s.Status, s.Detail, read(t, dir, CodexRequirementsPath))
			}
		})
	}
	t.Run("features hooks off", func(t *testing.T) {
		p, err := ParseCodexPolicy("x", []byte("[features]\nhooks = false\n"))
		if err != nil {
			t.Fatal(err)
		}
		if s := requirementsSnippet(p); !strings.Contains(s, "change hooks = false to:\n#   hooks = true") {
			t.Fatalf("snippet:\n%s", s)
		}
	})
	t.Run("managed_config with the key set otherwise", func(t *testing.T) {
		dir := t.TempDir()
		put(t, dir, CodexManagedConfigPath, []byte("check_for_update_on_startup = true\n"))
		s := step(apply(t, dir, Steps(both), false), "policy.codex.managed-config")
		if s.Status != "conflict" || !strings.Contains(s.Snippet, "change the existing top-level key to:\ncheck_for_update_on_startup = false") {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("existing features table", func(t *testing.T) {
		p, err := ParseCodexPolicy("x", []byte("[features]\nweb_search = true\n"))
		if err != nil {
			t.Fatal(err)
		}
		if s := requirementsSnippet(p); strings.Contains(s, "\n[features]") || !strings.Contains(s, "add to the existing [features] table") {
			t.Fatalf("snippet would duplicate [features]:\n%s", s)
		}
	})
}

// What cco writes parses and carries the hooks in the vendors' schema.
func TestWrittenPoliciesParse(t *testing.T) {
	t.Run("claude", func(t *testing.T) {
		var v struct {
			Env                        map[string]string `json:"env"`
			EnableAllProjectMcpServers *bool             `json:"enableAllProjectMcpServers"`
			Hooks                      map[string][]struct {
				Matcher *string `json:"matcher"`
				Hooks   []struct {
					Type    string `json:"type"`
					Command string `json:"command"`
					Timeout int    `json:"timeout"`
				} `json:"hooks"`
			} `json:"hooks"`
		}
		dec := json.NewDecoder(bytes.NewReader(ClaudeSettings()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if v.Env["DISABLE_AUTOUPDATER"] != "1" || v.Env["DISABLE_UPDATES"] != "1" || len(v.Env) != 2 {
			t.Errorf("env %v", v.Env)
		}
		// A workspace .mcp.json written in a session must not start unasked
		// in an unwrapped launch (ADR 43).
		if v.EnableAllProjectMcpServers == nil || *v.EnableAllProjectMcpServers {
			t.Errorf("enableAllProjectMcpServers = %v, want false", v.EnableAllProjectMcpServers)
		}
		if l := ParseClaudeLayer("x", ClaudeSettings()); l.EnableAllProjectMcpServers == nil || *l.EnableAllProjectMcpServers {
			t.Errorf("the policy reader does not see cco's enableAllProjectMcpServers: %+v", l)
		}
		ss, ups := v.Hooks["SessionStart"], v.Hooks["UserPromptSubmit"]
		if len(ss) != 1 || ss[0].Matcher == nil || *ss[0].Matcher != "startup" || len(ss[0].Hooks) != 1 ||
			ss[0].Hooks[0] != (struct {
				Type    string `json:"type"`
				Command string `json:"command"`
				Timeout int    `json:"timeout"`
			}{"command", "/usr/libexec/cco/guard/session-start claude", 10}) {
			t.Errorf("SessionStart %+v", ss)
		}
		if len(ups) != 1 || ups[0].Matcher != nil || len(ups[0].Hooks) != 1 || ups[0].Hooks[0].Command != "/usr/libexec/cco/guard/prompt-gate claude" || ups[0].Hooks[0].Type != "command" {
			t.Errorf("UserPromptSubmit %+v (it takes no matcher)", ups)
		}
		if l := ParseClaudeLayer("x", ClaudeSettings()); !l.SessionStart || !l.PromptGate || l.Err != nil {
			t.Errorf("the guard does not recognise cco's own drop-in: %+v", l)
		}
	})
	t.Run("codex requirements", func(t *testing.T) {
		b := CodexRequirements()
		if !bytes.HasPrefix(b, []byte(Marker+"\n")) {
			t.Error("requirements.toml does not start with the marker line")
		}
		var v struct {
			Features              map[string]bool `toml:"features"`
			AllowedSandboxModes   []string        `toml:"allowed_sandbox_modes"`
			AllowedApprovalPolicy []string        `toml:"allowed_approval_policies"`
			AllowManagedHooksOnly *bool           `toml:"allow_managed_hooks_only"`
			Hooks                 map[string][]struct {
				Matcher *string `toml:"matcher"`
				Hooks   []struct {
					Type    string `toml:"type"`
					Command string `toml:"command"`
					Timeout int    `toml:"timeout"`
				} `toml:"hooks"`
			} `toml:"hooks"`
		}
		md, err := toml.Decode(string(b), &v)
		if err != nil {
			t.Fatal(err)
		}
		if u := md.Undecoded(); len(u) > 0 {
			t.Errorf("unexpected keys %v", u)
		}
		if !v.Features["hooks"] {
			t.Error("features.hooks is not pinned to true")
		}
		if v.AllowedSandboxModes != nil || v.AllowedApprovalPolicy != nil || v.AllowManagedHooksOnly != nil {
			t.Error("requirements.toml restricts sandbox modes, approval policies or hooks: the wrapper needs danger-full-access and the owner's hooks")
		}
		ss, ups := v.Hooks["SessionStart"], v.Hooks["UserPromptSubmit"]
		if len(ss) != 1 || *ss[0].Matcher != "startup" || ss[0].Hooks[0].Type != "command" || ss[0].Hooks[0].Command != "/usr/libexec/cco/guard/session-start codex" || ss[0].Hooks[0].Timeout != 10 {
			t.Errorf("SessionStart %+v", ss)
		}
		if len(ups) != 1 || ups[0].Matcher != nil || ups[0].Hooks[0].Command != "/usr/libexec/cco/guard/prompt-gate codex" {
			t.Errorf("UserPromptSubmit %+v", ups)
		}
	})
	t.Run("codex managed_config", func(t *testing.T) {
		b := CodexManagedConfig()
		var v map[string]any
		if _, err := toml.Decode(string(b), &v); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte(Marker+"\n")) || v["check_for_update_on_startup"] != false || len(v) != 1 {
			t.Errorf("managed_config.toml: %v", v)
		}
	})
}

func TestClaudeDefeatWarnings(t *testing.T) {
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"disableAllHooks in the base":           {map[string]string{ClaudeBasePath: `{"disableAllHooks": true}`}, "managed-settings.json sets disableAllHooks: true"},
		"disableAllHooks in a later drop-in":    {map[string]string{ClaudeDropinDir + "/90-site.json": `{"disableAllHooks": true}`}, "90-site.json sets disableAllHooks: true"},
		"later drop-in replaces env":            {map[string]string{ClaudeDropinDir + "/70-site.json": `{"env": {"DISABLE_UPDATES": "0"}}`}, `70-site.json is merged after /etc/claude-code/managed-settings.d/50-cco.json and sets env.DISABLE_UPDATES = "0"`},
		"later drop-in auto-approves .mcp.json": {map[string]string{ClaudeDropinDir + "/80-site.json": `{"enableAllProjectMcpServers": true}`}, "80-site.json is merged after /etc/claude-code/managed-settings.d/50-cco.json and sets enableAllProjectMcpServers: true"},
		"drop-in does not parse":                {map[string]string{ClaudeDropinDir + "/60-site.json": "{\"hooks\": [}"}, "60-site.json does not parse: line 1, column"},
		"drop-in off the schema":                {map[string]string{ClaudeDropinDir + "/60-site.json": "{\n \"disableAllHooks\": \"yes\"}"}, "60-site.json does not parse: line 2, column"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for p, b := range c.files {
				put(t, dir, p, []byte(b))
			}
			s := step(apply(t, dir, Steps(both), false), "policy.claude")
			if !strings.Contains(strings.Join(s.Warnings, "\n"), c.want) {
				t.Fatalf("warnings %q lack %q", s.Warnings, c.want)
			}
			for p, b := range c.files {
				if string(read(t, dir, p)) != b {
					t.Errorf("%s was modified", p)
				}
			}
		})
	}
	t.Run("legacy base mode: every drop-in is merged after it", func(t *testing.T) {
		dir := t.TempDir()
		put(t, dir, ClaudeDropinDir+"/10-site.json", []byte(`{"env": {"DISABLE_AUTOUPDATER": 0}}`))
		s := step(apply(t, dir, Steps(Config{Agents: []string{"claude"}, ClaudeManagedFile: ClaudeBase}), false), "policy.claude")
		if s.Status != "changed" || !strings.Contains(strings.Join(s.Warnings, "\n"), `10-site.json is merged after /etc/claude-code/managed-settings.json and sets env.DISABLE_AUTOUPDATER = "0"`) {
			t.Fatalf("%+v", s)
		}
	})
	t.Run("earlier drop-in and re-enabling later file are fine", func(t *testing.T) {
		dir := t.TempDir()
		put(t, dir, ClaudeBasePath, []byte(`{"enableAllProjectMcpServers": true}`))
		put(t, dir, ClaudeDropinDir+"/10-site.json", []byte(`{"disableAllHooks": true, "env": {"DISABLE_UPDATES": "0"}, "enableAllProjectMcpServers": true}`))
		put(t, dir, ClaudeDropinDir+"/70-site.json", []byte(`{"enableAllProjectMcpServers": true}`))
		put(t, dir, ClaudeDropinDir+"/90-site.json", []byte(`{"disableAllHooks": false, "enableAllProjectMcpServers": false}`))
		put(t, dir, ClaudeDropinDir+"/.hidden.json", []byte(`{"disableAllHooks": true}`))
		if s := step(apply(t, dir, Steps(both), false), "policy.claude"); len(s.Warnings) != 0 {
			t.Fatalf("warnings %q", s.Warnings)
		}
	})
}

func TestConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ClaudeManagedFile: "settings", Agents: []string{"claude"}}, `claude.managed_file = "settings" is not valid: use "dropin" (the default) or "base"`},
		{Config{ForeignPolicy: map[string]string{"codex": "ignore"}, Agents: []string{"codex"}}, `codex.foreign_policy = "ignore" is not valid`},
		{Config{ForeignPolicy: map[string]string{"aider": ForeignWarn}}, `a foreign policy for "aider": no such agent`},
		{Config{Agents: []string{"aider"}}, `agent "aider" has no managed policy`},
		{Config{ForeignPolicy: map[string]string{"claude": ForeignWarn}}, `claude.foreign_policy: claude has no foreign policy file`},
	} {
		dir := t.TempDir()
		rep := apply(t, dir, Steps(c.cfg), false)
		if rep.ExitCode() != 1 || len(rep.Steps) != 1 || !strings.Contains(rep.Steps[0].Detail, c.want) {
			t.Errorf("%+v: %+v, want a failure naming %q", c.cfg, rep.Steps, c.want)
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "etc")); len(ents) != 0 {
			t.Errorf("%+v: a bad config wrote %v", c.cfg, ents)
		}
	}
	ids := func(cfg Config) (out []string) {
		for _, s := range Steps(cfg) {
			out = append(out, s.ID())
		}
		return out
	}
	if got := strings.Join(ids(both), " "); got != "policy.claude policy.codex.requirements policy.codex.managed-config" {
		t.Errorf("ids %q", got)
	}
	if got := strings.Join(ids(Config{Agents: []string{"codex"}}), " "); got != "policy.codex.requirements policy.codex.managed-config" {
		t.Errorf("codex only: ids %q", got)
	}
	if got := ids(Config{}); len(got) != 0 {
		t.Errorf("no agents: ids %q", got)
	}
}
