package agent

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		base, sel, want, err string
	}{
		{base: "claude", want: "claude"},
		{base: "codex", want: "codex"},
		{base: "claude", sel: "codex", want: "codex"},
		{base: "codex", sel: "claude", want: "claude"},
		{base: "gemini", want: "gemini"},
		{base: "claude", sel: "gemini", want: "gemini"},
		{base: "aider", err: `"aider" is not a built-in agent`},
		{base: "claude", sel: "/tmp/evil", err: `CCO_AGENT="/tmp/evil" is not a built-in agent`},
		{base: "claude", sel: "../codex", err: `CCO_AGENT="../codex"`},
	} {
		m := map[string]string{}
		if tc.sel != "" {
			m[EnvSelect] = tc.sel
		}
		p, err := Select(tc.base, env(m))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Select(%q, %q) error = %v, want %q", tc.base, tc.sel, err, tc.err)
			}
			continue
		}
		if err != nil || p.Name != tc.want {
			t.Errorf("Select(%q, %q) = %v, %v; want %s", tc.base, tc.sel, p, err, tc.want)
		}
	}
}

func TestTableShape(t *testing.T) {
	c, _ := Lookup("claude")
	x, _ := Lookup("codex")
	if c.Binary != "/usr/libexec/cco/claude/current/claude" || x.Binary != "/usr/libexec/cco/codex-dist/current/bin/codex" {
		t.Fatalf("binaries: %s %s", c.Binary, x.Binary)
	}
	if !reflect.DeepEqual(c.Env, []string{"DISABLE_AUTOUPDATER=1", "DISABLE_UPDATES=1"}) ||
		!reflect.DeepEqual(x.Env, []string{"CODEX_UPDATE_DISABLED=1"}) {
		t.Fatalf("env: %v %v", c.Env, x.Env)
	}
	if !reflect.DeepEqual(Names(), []string{"claude", "codex", "copilot", "droid", "gemini", "opencode", "pi"}) {
		t.Fatalf("names %v", Names())
	}
	ws := WorkspaceReadOnly()
	if d := WorkspaceDirs(); !reflect.DeepEqual(d, []string{".claude", ".codex", ".gemini", ".opencode"}) {
		t.Errorf("WorkspaceDirs = %v", d)
	}
	for _, want := range []string{".claude/settings.json", ".claude/settings.local.json", ".codex/config.toml", ".gemini/settings.json",
		".opencode/plugins/", ".opencode/opencode.json", "opencode.json", "opencode.jsonc", ".factory/", ".pi/", ".github/hooks/"} {
		found := false
		for _, w := range ws {
			found = found || w == want
		}
		if !found {
			t.Errorf("WorkspaceReadOnly lacks %s: %v", want, ws)
		}
	}
}

func TestClaudeArgs(t *testing.T) {
	c, _ := Lookup("claude")
	for _, tc := range []struct {
		name string
		in   []string
		skip bool
		want []string
	}{
		{"plain", nil, false, []string{"--no-chrome"}},
		{"version alone", []string{"--version"}, true, []string{"--version"}},
		{"-v alone", []string{"-v"}, false, []string{"-v"}},
		{"version and more", []string{"--version", "--chrome"}, false, []string{"--no-chrome", "--version"}},
		{"skip", nil, true, []string{"--no-chrome", "--dangerously-skip-permissions"}},
		{"strip chrome", []string{"--chrome", "-p", "hi"}, false, []string{"--no-chrome", "-p", "hi"}},
		{"strip chrome=", []string{"--chrome=true", "x"}, false, []string{"--no-chrome", "x"}},
		{"no dup no-chrome", []string{"--no-chrome"}, false, []string{"--no-chrome"}},
		{"no dup skip", []string{"--dangerously-skip-permissions"}, true, []string{"--no-chrome", "--dangerously-skip-permissions"}},
		{"user skip kept", []string{"--dangerously-skip-permissions"}, false, []string{"--no-chrome", "--dangerously-skip-permissions"}},
		{"subcommand", []string{"mcp", "list", "--chrome"}, false, []string{"--no-chrome", "mcp", "list"}},
		{"resume", []string{"--resume", "abc", "--chrome"}, false, []string{"--no-chrome", "--resume", "abc"}},
		{"after dashdash", []string{"mcp", "add", "x", "--", "srv", "--chrome"}, false,
			[]string{"--no-chrome", "mcp", "add", "x", "--", "srv", "--chrome"}},
	} {
		got := c.Args(tc.in, Options{SkipPermissions: tc.skip})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Args(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

const B = codexBypass

// The gemini profile: the shadow's name, the login state with its settings
// read-only, Gemini's own sandbox off and the system settings file out of
// the jail, its credentials and endpoints, and no default install.
func TestGeminiProfile(t *testing.T) {
	g, ok := Lookup("gemini")
	if !ok {
		t.Fatal("no gemini profile")
	}
	if g.Binary != "/usr/libexec/cco/gemini/current/bundle/gemini.js" || g.Default || g.AppServer || g.Policy != "gemini" {
		t.Errorf("profile %+v", g)
	}
	if !reflect.DeepEqual(g.Login, []string{".gemini"}) || !slices.Contains(g.HomeReadOnly, ".gemini/settings.json") || !slices.Contains(g.HomeReadOnly, ".gemini/extensions/") {
		t.Errorf("login %v, read-only %v", g.Login, g.HomeReadOnly)
	}
	for _, e := range []string{"GEMINI_SANDBOX=false", "GEMINI_CLI_SYSTEM_SETTINGS_PATH=/nonexistent/cco/gemini-settings.json"} {
		if !slices.Contains(g.Env, e) {
			t.Errorf("env %v lacks %s", g.Env, e)
		}
	}
	for _, c := range []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"} {
		if !slices.Contains(g.Credentials, c) {
			t.Errorf("credentials %v lack %s", g.Credentials, c)
		}
	}
	if slices.Contains(g.OthersCredentials(), "GEMINI_API_KEY") || !slices.Contains(g.OthersCredentials(), "OPENAI_API_KEY") {
		t.Errorf("refused in gemini's jail: %v", g.OthersCredentials())
	}
	for _, h := range []string{"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com", "accounts.google.com"} {
		if !slices.Contains(g.Egress, h) {
			t.Errorf("egress %v lacks %s", g.Egress, h)
		}
	}
	if d := Defaults(); slices.Contains(d, "gemini") {
		t.Errorf("gemini is a default agent: %v", d)
	}
}

func TestGeminiArgs(t *testing.T) {
	g, _ := Lookup("gemini")
	for _, tc := range []struct {
		name     string
		in, want []string
	}{
		{"interactive", nil, []string{}},
		{"interactive prompt", []string{"fix it"}, []string{"fix it"}},
		{"-s", []string{"-s", "hi"}, []string{"hi"}},
		{"--sandbox", []string{"--sandbox", "-m", "x"}, []string{"-m", "x"}},
		{"--sandbox=true", []string{"--sandbox=true"}, []string{}},
		{"headless", []string{"-p", "hello"}, []string{"--skip-trust", "-p", "hello"}},
		{"headless =", []string{"--prompt=hello", "-s"}, []string{"--skip-trust", "--prompt=hello"}},
		{"headless glued", []string{"-phello"}, []string{"--skip-trust", "-phello"}},
		{"headless trust given", []string{"--skip-trust", "-p", "x"}, []string{"--skip-trust", "-p", "x"}},
		{"a prompt that looks like a flag", []string{"-p", "-s"}, []string{"--skip-trust", "-p", "-s"}},
		{"a model that looks like a flag", []string{"-m", "-p"}, []string{"-m", "-p"}},
		{"after --", []string{"-p", "x", "--", "-s"}, []string{"--skip-trust", "-p", "x", "--", "-s"}},
		{"-- is no value", []string{"-p", "--", "-s"}, []string{"--skip-trust", "-p", "--", "-s"}},
	} {
		if got := g.Args(tc.in, Options{}); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Args(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestCodexArgs(t *testing.T) {
	x, _ := Lookup("codex")
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"plain empty", nil, []string{B}},
		{"plain prompt", []string{"fix it"}, []string{B, "fix it"}},
		{"plain model", []string{"-m", "o3", "hi"}, []string{B, "-m", "o3", "hi"}},
		{"plain -s", []string{"-s", "workspace-write", "hi"}, []string{B, "hi"}},
		{"plain -s=", []string{"-s=workspace-write"}, []string{B}},
		{"plain -sX", []string{"-sdanger-full-access"}, []string{B}},
		{"plain --sandbox", []string{"--sandbox", "workspace-write"}, []string{B}},
		{"plain --sandbox=", []string{"--sandbox=workspace-write", "p"}, []string{B, "p"}},
		{"plain -a", []string{"-a", "on-request"}, []string{B}},
		{"plain -aX", []string{"-auntrusted"}, []string{B}},
		{"plain -a=", []string{"-a=never"}, []string{B}},
		{"plain --ask", []string{"--ask-for-approval", "never"}, []string{B}},
		{"plain --ask=", []string{"--ask-for-approval=never"}, []string{B}},
		{"plain full-auto", []string{"--full-auto"}, []string{B}},
		{"plain yolo dedup", []string{"--yolo", B}, []string{B}},
		{"-c sandbox_mode", []string{"-c", "sandbox_mode=workspace-write"}, []string{B}},
		{"-c quoted", []string{"-c", `"sandbox_mode" = "workspace-write"`}, []string{B}},
		{"-c spaced", []string{"-c", ` sandbox_mode ="danger-full-access"`}, []string{B}},
		{"-c dotted", []string{"-c", "profiles.x.approval_policy=untrusted"}, []string{B}},
		{"-c inline", []string{"-c", `profiles={x={sandbox_mode="read-only"}}`}, []string{B}},
		{"-c glued", []string{"-csandbox_mode=workspace-write"}, []string{B}},
		{"-c=", []string{"-c=approval_policy=never"}, []string{B}},
		{"--config", []string{"--config", "approval_policy=on-request"}, []string{B}},
		{"--config=", []string{"--config=sandbox_mode=danger-full-access"}, []string{B}},
		{"-c other kept", []string{"-c", "model=o3"}, []string{B, "-c", "model=o3"}},
		{"-c lookalike kept", []string{"-c", "my_sandbox_mode_note=1"}, []string{B, "-c", "my_sandbox_mode_note=1"}},
		{"--config= other kept", []string{"--config=model=o3"}, []string{B, "--config=model=o3"}},
		{"value not stripped", []string{"-m", "-s", "hi"}, []string{B, "-m", "-s", "hi"}},
		{"exec", []string{"exec", "do it"}, []string{"exec", B, "do it"}},
		{"exec alias", []string{"e", "do it"}, []string{"e", B, "do it"}},
		{"exec full-auto", []string{"exec", "--full-auto", "-s", "workspace-write", "x"}, []string{"exec", B, "x"}},
		{"root flags then exec", []string{"-c", "model=o3", "-a", "never", "exec", "--sandbox=workspace-write", "x"},
			[]string{"-c", "model=o3", "exec", B, "x"}},
		{"exec resume", []string{"exec", "resume", "--last", "-c", "sandbox_mode=workspace-write"}, []string{"exec", B, "resume", "--last"}},
		{"resume", []string{"resume", "--last", "-a", "on-request"}, []string{"resume", B, "--last"}},
		{"resume root flag", []string{"-m", "o3", "resume", "abc"}, []string{"-m", "o3", "resume", B, "abc"}},
		{"agents", []string{"agents", "--full-auto", "-C", "/w"}, []string{"agents", B, "-C", "/w"}},
		{"agents config", []string{"agents", "--config=approval_policy=never", "--enable", "x"}, []string{"agents", B, "--enable", "x"}},
		{"login gets nothing", []string{"login"}, []string{"login"}},
		{"mcp dashdash", []string{"mcp", "add", "s", "--", "srv", "-s", "x"}, []string{"mcp", "add", "s", "--", "srv", "-s", "x"}},
		{"dashdash prompt", []string{"--", "-s is a prompt"}, []string{B, "--", "-s is a prompt"}},
	} {
		got := x.Args(tc.in, Options{SkipPermissions: true})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Args(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// TestCodexArgsReadOnly: codex's read-only sandbox mode, in every
// spelling, keeps the user's approvals and gets Codex's own sandbox off in
// the bypass's place (the jail binds the workspace read-only); the other
// modes are the jail's read-write workspace with the bypass.
func TestCodexArgsReadOnly(t *testing.T) {
	x, _ := Lookup("codex")
	off := []string{"--sandbox", "danger-full-access"}
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"-s -a", []string{"-s", "read-only", "-a", "untrusted"}, append(off, "-a", "untrusted")},
		{"-a first", []string{"-a", "on-request", "--sandbox", "read-only", "hi"}, append(off, "-a", "on-request", "hi")},
		{"--sandbox=", []string{"--sandbox=read-only", "-auntrusted"}, append(off, "-auntrusted")},
		{"-sX", []string{"-sread-only"}, off},
		{"-s=", []string{"-s=read-only", "--ask-for-approval=never"}, append(off, "--ask-for-approval=never")},
		{"-c sandbox_mode", []string{"-c", `sandbox_mode="read-only"`, "-c", "approval_policy=untrusted"}, append(off, "-c", "approval_policy=untrusted")},
		{"exec", []string{"exec", "-s", "read-only", "review it"}, []string{"exec", "--sandbox", "danger-full-access", "review it"}},
		{"strictest wins", []string{"-s", "workspace-write", "-s", "read-only"}, off},
		{"bypass flags dropped", []string{"--yolo", "-s", "read-only", "--full-auto", B}, off},
		{"login untouched", []string{"login", "-s", "read-only"}, []string{"login"}},
		{"after -- a prompt", []string{"--", "-s", "read-only"}, []string{B, "--", "-s", "read-only"}},
		{"a value, not the flag", []string{"-m", "-s", "read-only"}, []string{B, "-m", "-s", "read-only"}},
	} {
		got := x.Args(tc.in, Options{})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Args(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
		wantRO := slices.Equal(got[:min(2, len(got))], off) || tc.name == "exec" || tc.name == "login untouched"
		if x.ReadOnlyWorkspace(tc.in) != wantRO {
			t.Errorf("%s: ReadOnlyWorkspace(%q) = %v, want %v", tc.name, tc.in, !wantRO, wantRO)
		}
	}
	if c, _ := Lookup("claude"); c.ReadOnlyWorkspace([]string{"-s", "read-only"}) {
		t.Error("claude has no read-only mode")
	}
}

func TestCodexArgsNeverLeakPolicy(t *testing.T) {
	x, _ := Lookup("codex")
	forms := [][]string{
		{"-s", "workspace-write"}, {"-sworkspace-write"}, {"-s=danger-full-access"}, {"--sandbox", "workspace-write"}, {"--sandbox=workspace-write"},
		{"-a", "never"}, {"-anever"}, {"-a=never"}, {"--ask-for-approval", "never"}, {"--ask-for-approval=never"},
		{"--full-auto"}, {"-c", "sandbox_mode=x"}, {"-csandbox_mode=x"}, {"-c=sandbox_mode=x"},
		{"--config", "approval_policy=x"}, {"--config=approval_policy=x"},
	}
	for _, place := range [][]string{nil, {"exec"}, {"resume"}, {"agents"}} {
		for _, f := range forms {
			in := append(append([]string{}, place...), f...)
			got := x.Args(in, Options{})
			n := 0
			for _, g := range got {
				if g == B {
					n++
				}
				if g == "--full-auto" || strings.Contains(g, "sandbox_mode") || strings.Contains(g, "approval_policy") ||
					g == "-s" || g == "-a" || strings.HasPrefix(g, "--sandbox") || strings.HasPrefix(g, "--ask") ||
					g == "workspace-write" || g == "never" {
					t.Errorf("Args(%q) = %q leaks %q", in, got, g)
				}
			}
			if n != 1 {
				t.Errorf("Args(%q) = %q: bypass %d times", in, got, n)
			}
		}
	}
}

// The table's derived lists: the default agents, each jail's refused
// credentials and login files (every other profile's own), and the message
// lists.
func TestDerived(t *testing.T) {
	if d := Defaults(); !reflect.DeepEqual(d, []string{"claude", "codex"}) {
		t.Errorf("Defaults = %v", d)
	}
	for _, p := range All() {
		others := p.OthersCredentials()
		for _, c := range p.Credentials {
			if slices.Contains(others, c) {
				t.Errorf("%s: its own %s is among the refused", p.Name, c)
			}
		}
		for _, o := range All() {
			if o == p {
				continue
			}
			for _, c := range o.Credentials {
				// A key both read is each one's own.
				if !slices.Contains(others, c) && !slices.Contains(p.Credentials, c) {
					t.Errorf("%s's jail does not refuse %s's %s", p.Name, o.Name, c)
				}
			}
			for _, s := range o.Secrets {
				if !slices.Contains(p.OthersSecrets(), s) {
					t.Errorf("%s's jail does not check %s's %s", p.Name, o.Name, s)
				}
			}
		}
		if len(p.Egress) == 0 || len(p.Installers.HomeBins) == 0 || p.Installers.NPMPackage == "" || p.Upgrade != p.Name {
			t.Errorf("%s: incomplete profile %+v", p.Name, p)
		}
	}
	if got := List([]string{"a", "b", "c"}, "or"); got != "a, b or c" {
		t.Errorf("List = %q", got)
	}
	if got := List([]string{"a"}, "and"); got != "a" {
		t.Errorf("List = %q", got)
	}
	if !Known("codex") || Known("aider") {
		t.Error("Known")
	}
}

// TestLoginFlow: the login ports are carried in only for the login
// subcommand, wherever the options put it, or for a first run; never for
// a profile without login ports.
func TestLoginFlow(t *testing.T) {
	loggedIn := func(string) bool { return true }
	firstRun := func(rel string) bool { return rel != ".codex/auth.json" }
	codex, _ := Lookup("codex")
	for _, tc := range []struct {
		args   []string
		exists func(string) bool
		want   bool
	}{
		{[]string{"login"}, loggedIn, true},
		{[]string{"-c", "model=o3", "login", "--device-auth"}, loggedIn, true},
		{[]string{"--config=x=1", "-p", "work", "login"}, loggedIn, true},
		{nil, loggedIn, false},
		{[]string{"fix the login page"}, loggedIn, false},
		{[]string{"-m", "login"}, loggedIn, false}, // the model named "login"
		{[]string{"--", "login"}, loggedIn, false}, // the prompt
		{[]string{"exec", "login"}, loggedIn, false},
		{nil, firstRun, true},
		{[]string{"exec", "hello"}, firstRun, true},
	} {
		if got := codex.LoginFlow(tc.args, tc.exists); got != tc.want {
			t.Errorf("codex %q (auth.json there: %v): LoginFlow %v, want %v", tc.args, tc.exists(".codex/auth.json"), got, tc.want)
		}
	}
	// OpenCode's login is `opencode providers login` (alias auth); Pi's is
	// /login in the TUI, so only a first run carries its ports in.
	oc, _ := Lookup("opencode")
	pi, _ := Lookup("pi")
	ocFirst := func(rel string) bool { return rel != ".local/share/opencode/auth.json" }
	for _, tc := range []struct {
		p      *Profile
		args   []string
		exists func(string) bool
		want   bool
	}{
		{oc, []string{"auth", "login"}, loggedIn, true},
		{oc, []string{"--log-level", "DEBUG", "providers", "login", "https://x"}, loggedIn, true},
		{oc, []string{"auth", "list"}, loggedIn, false},
		{oc, []string{"run", "login"}, loggedIn, false},
		{oc, []string{"-m", "auth", "login"}, loggedIn, false},
		{oc, []string{"--", "auth", "login"}, loggedIn, false},
		{oc, nil, loggedIn, false},
		{oc, nil, ocFirst, true},
		{pi, nil, loggedIn, false},
		{pi, []string{"login"}, loggedIn, false},
		{pi, nil, func(rel string) bool { return rel != ".pi/agent/auth.json" }, true},
	} {
		if got := tc.p.LoginFlow(tc.args, tc.exists); got != tc.want {
			t.Errorf("%s %q: LoginFlow %v, want %v", tc.p.Name, tc.args, got, tc.want)
		}
	}
	for _, p := range All() {
		if len(p.LoginPorts) == 0 && p.LoginFlow([]string{"login"}, func(string) bool { return false }) {
			t.Errorf("%s has no login ports, yet LoginFlow is true", p.Name)
		}
		if len(p.LoginPorts) > 0 && (p.LoginState == "" || !slices.ContainsFunc(p.Login, func(d string) bool { return strings.HasPrefix(p.LoginState, d+"/") })) {
			t.Errorf("%s: LoginState %q is not in its login directories %v", p.Name, p.LoginState, p.Login)
		}
	}
}

// The codex key is claude's jail's to refuse, the Anthropic key is not
// (claude reads it, and so do opencode and pi); copilot refuses both.
func TestSharedCredentials(t *testing.T) {
	c, _ := Lookup("claude")
	o, _ := Lookup("opencode")
	cp, _ := Lookup("copilot")
	if slices.Contains(c.OthersCredentials(), "ANTHROPIC_API_KEY") || slices.Contains(o.OthersCredentials(), "ANTHROPIC_API_KEY") {
		t.Errorf("a shared key is refused in its readers' jails: %v / %v", c.OthersCredentials(), o.OthersCredentials())
	}
	if !slices.Contains(c.OthersCredentials(), "CODEX_API_KEY") || !slices.Contains(c.OthersCredentials(), "FACTORY_API_KEY") {
		t.Errorf("claude's jail does not refuse others' keys: %v", c.OthersCredentials())
	}
	for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "FACTORY_API_KEY"} {
		if !slices.Contains(cp.OthersCredentials(), k) {
			t.Errorf("copilot's jail does not refuse %s: %v", k, cp.OthersCredentials())
		}
	}
	if n := len(cp.OthersCredentials()); n != len(slices.Compact(slices.Sorted(slices.Values(cp.OthersCredentials())))) {
		t.Errorf("OthersCredentials has duplicates: %v", cp.OthersCredentials())
	}
}

// Every name that moves or drops a vendor's policy or guard, and every
// name a jail sets itself, is refused in pass_env.
func TestRefusedEnv(t *testing.T) {
	r := RefusedEnv()
	for _, n := range []string{"OPENCODE_TEST_MANAGED_CONFIG_DIR", "OPENCODE_PURE", "COPILOT_ALLOW_ALL",
		"COPILOT_TEST_MANAGED_SETTINGS_FILE_PATH", "FACTORY_HOME_OVERRIDE", "PI_PACKAGE_DIR",
		"OPENCODE_DISABLE_AUTOUPDATE", "COPILOT_AUTO_UPDATE", "FACTORY_DROID_AUTO_UPDATE_ENABLED", "PI_SKIP_VERSION_CHECK",
		"CLAUDE_CONFIG_DIR", "DISABLE_AUTOUPDATER", "CODEX_UPDATE_DISABLED", "GEMINI_SANDBOX"} {
		if !slices.Contains(r, n) {
			t.Errorf("RefusedEnv lacks %s: %v", n, r)
		}
	}
	for _, n := range []string{"ANTHROPIC_API_KEY", "PATH", "", "COPILOT_MODEL"} {
		if slices.Contains(r, n) {
			t.Errorf("RefusedEnv has %q", n)
		}
	}
	for _, p := range All() {
		for _, kv := range p.Env {
			if strings.HasPrefix(kv, "COPILOT_ALLOW_ALL=") {
				t.Errorf("%s sets %s: it would trust the workspace's hooks", p.Name, kv)
			}
		}
	}
}

// The four agents installed from their npm packages: where each runs
// from, its login state and what of it is read-only, what of a workspace
// is protected, its updater off, its policy handler or none (jail only).
func TestMoreProfiles(t *testing.T) {
	for _, tc := range []struct {
		name, binary, interp, policy, npm string
		login, homeRO, wsRO, env          []string
	}{
		{"opencode", "/usr/libexec/cco/opencode/current/opencode", "", "opencode", "opencode-ai",
			[]string{".config/opencode", ".local/share/opencode", ".local/state/opencode"},
			[]string{".config/opencode/opencode.json", ".config/opencode/opencode.jsonc", ".config/opencode/plugins/", ".config/opencode/plugin/", ".config/opencode/node_modules", ".config/opencode/commands/"},
			[]string{".opencode/plugins/", ".opencode/tools/", ".opencode/opencode.json", "opencode.json", "opencode.jsonc"}, []string{"OPENCODE_DISABLE_AUTOUPDATE=1"}},
		{"droid", "/usr/libexec/cco/droid/current/droid", "", "droid", "@factory/cli",
			[]string{".factory"}, []string{".factory/settings.json", ".factory/hooks.json", ".factory/mcp.json"},
			[]string{".factory/"}, []string{"FACTORY_DROID_AUTO_UPDATE_ENABLED=false", "FACTORY_DISABLE_KEYRING=1"}},
		{"pi", "/usr/libexec/cco/pi/current/node_modules/@mariozechner/pi-coding-agent/dist/cli.js", "/usr/libexec/cco/pi/current/node", "", "@mariozechner/pi-coding-agent",
			[]string{".pi/agent"}, []string{".pi/agent/settings.json", ".pi/agent/extensions/", ".pi/agent/bin/"},
			[]string{".pi/"}, []string{"PI_SKIP_VERSION_CHECK=1"}},
		{"copilot", "/usr/libexec/cco/copilot/current/copilot", "", "", "@github/copilot",
			[]string{".copilot"}, []string{".copilot/settings.json", ".copilot/pkg/", ".copilot/mcp-config.json"},
			[]string{".github/hooks/", ".mcp.json"}, []string{"COPILOT_AUTO_UPDATE=false"}},
	} {
		p, ok := Lookup(tc.name)
		if !ok {
			t.Errorf("no %s profile", tc.name)
			continue
		}
		if p.Binary != tc.binary || p.Interpreter != tc.interp || p.Policy != tc.policy || p.Installers.NPMPackage != tc.npm || p.Default {
			t.Errorf("%s: %+v", tc.name, p)
		}
		if !reflect.DeepEqual(p.Login, tc.login) {
			t.Errorf("%s: login %v", tc.name, p.Login)
		}
		for _, want := range [][2][]string{{p.HomeReadOnly, tc.homeRO}, {p.WorkspaceReadOnly, tc.wsRO}, {p.Env, tc.env}} {
			for _, w := range want[1] {
				if !slices.Contains(want[0], w) {
					t.Errorf("%s: %v lacks %s", tc.name, want[0], w)
				}
			}
		}
		// Read-only home paths lie in the login state the jail binds.
		for _, r := range p.HomeReadOnly {
			if !slices.ContainsFunc(p.Login, func(l string) bool { return r == l+"/" || strings.HasPrefix(r, l+"/") }) {
				t.Errorf("%s: %s is outside its login %v", tc.name, r, p.Login)
			}
		}
		if len(p.Credentials) == 0 || len(p.Secrets) == 0 || len(p.LoginEndpoints) == 0 || len(p.Telemetry) == 0 {
			t.Errorf("%s: incomplete %+v", tc.name, p)
		}
	}
}

func TestOpencodeArgs(t *testing.T) {
	o, _ := Lookup("opencode")
	for _, tc := range []struct {
		name     string
		in, want []string
	}{
		{"empty", nil, []string{}},
		{"run", []string{"run", "hi"}, []string{"run", "hi"}},
		{"--pure", []string{"--pure", "run", "hi"}, []string{"run", "hi"}},
		{"--pure=true", []string{"run", "--pure=true", "hi"}, []string{"run", "hi"}},
		{"--pure true", []string{"run", "--pure", "true", "hi"}, []string{"run", "hi"}},
		{"--no-pure", []string{"--no-pure"}, []string{}},
		{"--auto kept", []string{"run", "--auto", "x"}, []string{"run", "--auto", "x"}},
		{"after --", []string{"run", "--", "--pure"}, []string{"run", "--", "--pure"}},
	} {
		if got := o.Args(tc.in, Options{}); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Args(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestCopilotArgs(t *testing.T) {
	c, _ := Lookup("copilot")
	for _, tc := range []struct {
		name     string
		in, want []string
	}{
		{"empty", nil, []string{}},
		{"prompt", []string{"-p", "hi", "--allow-all-tools"}, []string{"-p", "hi", "--allow-all-tools"}},
		{"prefer", []string{"--prefer-version", "9.9.9", "-p", "x"}, []string{"-p", "x"}},
		{"prefer=", []string{"--prefer-version=9.9.9"}, []string{}},
		{"a prompt that looks like it", []string{"-p", "--prefer-version"}, []string{"-p", "--prefer-version"}},
		{"after --", []string{"--", "--prefer-version", "1"}, []string{"--", "--prefer-version", "1"}},
		{"-- is no value", []string{"--prefer-version", "--", "x"}, []string{"--", "x"}},
	} {
		if got := c.Args(tc.in, Options{}); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Args(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
	for _, n := range []string{"droid", "pi"} {
		p, _ := Lookup(n)
		in := []string{"exec", "--auto", "high", "hi"}
		if got := p.Args(in, Options{}); !reflect.DeepEqual(got, in) {
			t.Errorf("%s: Args(%q) = %q", n, in, got)
		}
	}
}
