package agent

import (
	"slices"
	"strings"
	"testing"
)

// An agent's settings variables pass by name or prefix, into its own jail
// only; a refused name, a variable it sets for its children and another
// agent's login never do, also when a prefix matches them.
func TestSettingsEnv(t *testing.T) {
	claude, codex, opencode := table["claude"], table["codex"], table["opencode"]
	for _, c := range []struct {
		p    *Profile
		k    string
		want bool
	}{
		{claude, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", true},
		{claude, "DISABLE_TELEMETRY", true},
		{claude, "API_TIMEOUT_MS", true},
		{claude, "MAX_THINKING_TOKENS", true},
		{claude, "BASH_DEFAULT_TIMEOUT_MS", true},
		{claude, "VERTEX_REGION_CLAUDE_3_5_HAIKU", true},
		{claude, "CLAUDE_CODE_", false},                // the bare prefix
		{claude, "CLAUDE_CONFIG_DIR", false},           // moves its state
		{claude, "CLAUDE_CODE_MESSAGING_TOKEN", false}, // its children's
		{claude, "DISABLE_AUTOUPDATER", false},         // the jail sets it
		{claude, "IS_SANDBOX", false},
		{claude, "RUST_LOG", false},
		{codex, "RUST_LOG", true},
		{codex, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", false},
		{codex, "DISABLE_TELEMETRY", false},
		{codex, "CODEX_HOME", false},
		{opencode, "OPENCODE_DISABLE_SHARE", true},
		{opencode, "OPENCODE_DISABLE_AUTOUPDATE", false}, // the jail sets it
	} {
		if got := c.p.Setting(c.k); got != c.want {
			t.Errorf("%s.Setting(%s) = %v, want %v", c.p.Name, c.k, got, c.want)
		}
	}
	// No profile lists a refused name outright, and no prefix is empty.
	for _, p := range All() {
		for _, s := range p.SettingsEnv {
			if slices.Contains(RefusedEnv(), s) || s == "*" || strings.Count(s, "*") > 1 || strings.Contains(strings.TrimSuffix(s, "*"), "*") {
				t.Errorf("%s: SettingsEnv entry %q is refused or not a name or a prefix", p.Name, s)
			}
		}
	}
}

// IS_SANDBOX=1 only where the shadow gave claude
// --dangerously-skip-permissions and the session is root.
func TestClaudeIsSandbox(t *testing.T) {
	claude := table["claude"]
	for _, c := range []struct {
		o    Options
		args []string
		want bool
	}{
		{Options{SkipPermissions: true, Root: true}, []string{"-p", "hi"}, true},
		{Options{SkipPermissions: true}, []string{"-p", "hi"}, false},
		{Options{Root: true}, []string{"-p", "hi"}, false},
		{Options{Root: true}, []string{"--dangerously-skip-permissions", "-p", "hi"}, false}, // the user's own flag
		{Options{SkipPermissions: true, Root: true}, []string{"--version"}, false},           // nothing injected
		{Options{SkipPermissions: true, Root: true}, []string{"--", "--dangerously-skip-permissions"}, true},
	} {
		env := claude.ArgsEnv(claude.Args(c.args, c.o), c.o)
		if got := slices.Contains(env, "IS_SANDBOX=1"); got != c.want {
			t.Errorf("%+v %q: env %q, want IS_SANDBOX=1 %v", c.o, c.args, env, c.want)
		}
	}
	for _, n := range Names() {
		if n != "claude" && len(table[n].ArgsEnv(table[n].Args([]string{"x"}, Options{SkipPermissions: true, Root: true}), Options{SkipPermissions: true, Root: true})) != 0 {
			t.Errorf("%s sets variables for its arguments", n)
		}
	}
}

// The cloud switches: on by the vendors' true values, and their variables
// the verifier's own for that agent alone.
func TestClouds(t *testing.T) {
	claude, gemini, codex := table["claude"], table["gemini"], table["codex"]
	if got := claude.Cloud([]string{"CLAUDE_CODE_USE_BEDROCK=1", "CLAUDE_CODE_USE_VERTEX=true", "GOOGLE_GENAI_USE_VERTEXAI=1"}); !slices.Equal(got, []string{CloudAWS, CloudGoogle}) {
		t.Errorf("claude's clouds %q", got)
	}
	if got := claude.Cloud([]string{"CLAUDE_CODE_USE_BEDROCK=0", "CLAUDE_CODE_USE_VERTEX="}); len(got) != 0 {
		t.Errorf("switches off: %q", got)
	}
	if got := gemini.Cloud([]string{"CLAUDE_CODE_USE_VERTEX=1"}); len(got) != 0 {
		t.Errorf("gemini took claude's switch: %q", got)
	}
	if got := codex.Cloud([]string{"CLAUDE_CODE_USE_BEDROCK=1"}); len(got) != 0 || len(codex.CloudEnv()) != 0 {
		t.Errorf("codex has clouds: %q %q", got, codex.CloudEnv())
	}
	if !slices.Contains(claude.CloudEnv(), "AWS_SECRET_ACCESS_KEY") || !slices.Contains(gemini.CloudEnv(), "GOOGLE_APPLICATION_CREDENTIALS") {
		t.Errorf("cloud env: claude %q gemini %q", claude.CloudEnv(), gemini.CloudEnv())
	}
}
