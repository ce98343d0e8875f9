package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// userHome makes a home with the user layer holding text (owned by the
// test's uid, mode 0644).
func userHome(t *testing.T, text string) string {
	t.Helper()
	home := t.TempDir()
	p := filepath.Join(home, UserConfigRel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return home
}

func rootConfig(t *testing.T, text string) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(text), ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestUserLayerNarrows(t *testing.T) {
	root := rootConfig(t, `pass_env = ["A", "B"]
egress = "allowlist"
egress_allow = ["*.example.com", "api.other.org"]
egress_ports = [80, 443]
hide = ["/srv/secret"]
home_read_only = ["~/.rustup", "~/.cargo/bin"]
caches = "persist"
`)
	home := userHome(t, `pass_env = ["A"]
egress = "off"
egress_allow = ["api.example.com", "*.x.example.com"]
egress_ports = [443]
hide = ["~/private"]
home_read_only = ["~/.rustup/toolchains"]
caches = "session"
max_procs = 100
`)
	c, notes, err := root.WithUserLayer("claude", home, os.Getuid())
	if err != nil || len(notes) != 0 {
		t.Fatalf("narrowing refused: %v %v", err, notes)
	}
	if !slices.Equal(c.PassEnv, []string{"A"}) || c.Egress != "off" || !slices.Equal(c.EgressPorts, []int{443}) ||
		!slices.Equal(c.Hide, []string{"/srv/secret", "~/private"}) || !slices.Equal(c.HomeTrees(), []string{".rustup/toolchains"}) ||
		c.Caches != "session" || c.MaxProcs != 100 {
		t.Errorf("merged config wrong: %+v", c)
	}
	up := filepath.Join(home, UserConfigRel)
	if c.Source("pass_env") != up || c.Source("egress_log") != "default" || c.Source("hide") != ConfigPath+" and "+up {
		t.Errorf("sources: pass_env %q, egress_log %q, hide %q", c.Source("pass_env"), c.Source("egress_log"), c.Source("hide"))
	}
	// Root's own configuration is untouched.
	if !slices.Equal(root.PassEnv, []string{"A", "B"}) || root.Source("pass_env") != ConfigPath {
		t.Errorf("root's config changed: %v %q", root.PassEnv, root.Source("pass_env"))
	}
}

func TestUserLayerWidens(t *testing.T) {
	root := `pass_env = ["A"]
egress = "allowlist"
egress_allow = ["*.example.com"]
caches = "session"
`
	for _, tc := range []struct{ user, want string }{
		{`pass_env = ["A", "SECRET"]`, `pass_env entry "SECRET"`},
		{`egress = "public"`, `egress = "public" is wider`},
		{`egress_allow = ["evil.org"]`, `egress_allow entry "evil.org"`},
		{`egress_allow = ["*.com"]`, `egress_allow`},
		{`egress_ports = [22]`, `egress_ports entry "22"`},
		{`allow_host = ["db.internal"]`, `allow_host entry "db.internal"`},
		{`allow_ip = ["10.0.0.0/8"]`, `allow_ip entry "10.0.0.0/8"`},
		{`home_read_only = ["~/.mytool"]`, `home_read_only entry "~/.mytool"`},
		{`allow_write = ["/srv/data"]`, `allow_write entry "/srv/data"`},
		{`forge = ["github"]`, `forge entry "github"`},
		{`caches = "persist"`, `caches = "persist" is wider`},
		{`claude_skip_permissions = true`, `claude_skip_permissions = true is wider`},
		{`max_procs = 100000`, `max_procs = 100000 is wider`},
		{`workspace_root = "/srv"`, `workspace_root = "/srv" is wider`},
		{`egress_log = "/tmp/x.log"`, `egress_log`},
		{`user_may_add = ["pass_env"]`, `user_may_add is root's`},
		{`egress_alow = ["x.org"]`, `unknown key "egress_alow" (did you mean "egress_allow"?)`},
		{`egress_ports = []`, `egress_ports`},
		{"ssh_agent = true", `ssh_agent = true is wider`},
		{`host_ports = [8080]`, `host_ports entry "8080"`},
		{`egress_upstream = "none"`, `egress_upstream is root's`},
		{`egress_allow = ["https://x.org/"]`, `egress_allow`},
	} {
		home := userHome(t, tc.user)
		_, _, err := rootConfig(t, root).WithUserLayer("claude", home, os.Getuid())
		up := filepath.Join(home, UserConfigRel)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), up) || !strings.Contains(err.Error(), "fix:") {
			t.Errorf("%s: err = %v, want it to name %s, %q and a fix", tc.user, err, up, tc.want)
		}
	}
}

func TestUserLayerMayAdd(t *testing.T) {
	root := rootConfig(t, `pass_env = ["A"]
user_may_add = ["pass_env", "home_read_only"]
`)
	home := userHome(t, `pass_env = ["A", "MY_TOOL_HOME"]
home_read_only = ["~/.mytool"]
`)
	c, _, err := root.WithUserLayer("codex", home, os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.PassEnv, []string{"A", "MY_TOOL_HOME"}) || !slices.Equal(c.HomeTrees(), []string{".mytool"}) {
		t.Errorf("additions not applied: %v %v", c.PassEnv, c.HomeTrees())
	}
	// What root allows adding is still checked as root's own values are.
	home = userHome(t, `pass_env = ["LD_PRELOAD"]`)
	if _, _, err := root.WithUserLayer("codex", home, os.Getuid()); err == nil || !strings.Contains(err.Error(), "LD_PRELOAD") {
		t.Errorf("a refused variable added by the user: err = %v", err)
	}
	home = userHome(t, `egress_allow = ["evil.org"]`)
	rc := rootConfig(t, "egress = \"allowlist\"\nuser_may_add = [\"pass_env\"]\n")
	if _, _, err := rc.WithUserLayer("codex", home, os.Getuid()); err == nil {
		t.Error("an egress_allow addition passed with only pass_env in user_may_add")
	}
	if _, err := ParseConfig([]byte(`user_may_add = ["pass_envv"]`), ConfigPath); err == nil || !strings.Contains(err.Error(), `did you mean "pass_env"`) {
		t.Errorf("user_may_add typo: %v", err)
	}
	if _, err := ParseConfig([]byte(`user_may_add = ["egress"]`), ConfigPath); err == nil {
		t.Error("user_may_add accepted a scalar key")
	}
}

func TestUserLayerIgnored(t *testing.T) {
	root := rootConfig(t, `pass_env = ["A"]`)
	// Writable by others.
	home := userHome(t, `pass_env = []`)
	os.Chmod(filepath.Join(home, UserConfigRel), 0o666)
	c, notes, err := root.WithUserLayer("claude", home, os.Getuid())
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "writable by others") || !slices.Equal(c.PassEnv, []string{"A"}) {
		t.Errorf("world-writable layer: %v %q %v", err, notes, c)
	}
	// A group-writable directory on the way.
	home = userHome(t, `pass_env = []`)
	os.Chmod(filepath.Join(home, ".config/cco"), 0o775)
	if _, notes, _ := root.WithUserLayer("claude", home, os.Getuid()); len(notes) != 1 || !strings.Contains(notes[0], ".config/cco is writable") {
		t.Errorf("group-writable directory: %q", notes)
	}
	// A link, at the file or at a directory on the way.
	for _, at := range []string{UserConfigRel, ".config/cco"} {
		home = userHome(t, `pass_env = []`)
		other := t.TempDir()
		p := filepath.Join(home, at)
		os.Rename(p, filepath.Join(other, "x"))
		os.Symlink(filepath.Join(other, "x"), p)
		c, notes, err := root.WithUserLayer("claude", home, os.Getuid())
		if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "is a link") || !slices.Equal(c.PassEnv, []string{"A"}) {
			t.Errorf("link at %s: %v %q", at, err, notes)
		}
	}
	// A file where a directory belongs.
	home = t.TempDir()
	os.WriteFile(filepath.Join(home, ".config"), []byte("x"), 0o644)
	if c, notes, err := root.WithUserLayer("claude", home, os.Getuid()); err != nil || len(notes) != 0 || c != root {
		t.Errorf("a file at ~/.config is no layer: %v %q", err, notes)
	}
	// Owned by another user.
	home = userHome(t, `pass_env = []`)
	if _, notes, _ := root.WithUserLayer("claude", home, os.Getuid()+1); len(notes) != 1 || !strings.Contains(notes[0], "writable by others") {
		t.Errorf("another owner: %q", notes)
	}
	// None at all.
	if c, notes, err := root.WithUserLayer("claude", t.TempDir(), os.Getuid()); err != nil || notes != nil || c != root {
		t.Errorf("no layer: %v %v", err, notes)
	}
}

func TestUnknownKeyDidYouMean(t *testing.T) {
	_, err := ParseConfig([]byte(`egress_alow = ["x.org"]`), ConfigPath)
	if err == nil || !strings.Contains(err.Error(), `did you mean "egress_allow"?`) || !strings.Contains(err.Error(), "fix: rename egress_alow to egress_allow in "+ConfigPath) {
		t.Errorf("err = %v", err)
	}
	// The fix, applied literally, parses.
	if _, err := ParseConfig([]byte(`egress_allow = ["x.org"]`), ConfigPath); err != nil {
		t.Errorf("the fix does not parse: %v", err)
	}
}

func TestWorkspaceHoldingUserLayerRefused(t *testing.T) {
	home := userHome(t, "")
	for _, ws := range []string{filepath.Join(home, ".config"), filepath.Join(home, ".config/cco")} {
		if err := refuseTree(ws, home, "workspace", nil); err == nil {
			t.Errorf("workspace %s holds the user layer and was not refused", ws)
		}
	}
}
