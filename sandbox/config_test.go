package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/cco-dev/cco/internal/testenv"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`
workspace_root = "/srv/w"
allow_write = ["/var/cache/x"]
pass_env = ["KEEP", "EDITOR"]
forge = ["github"]
claude_skip_permissions = true
egress = "allowlist"
egress_allow = ["*.example.org"]
egress_ports = [443]
`), "/etc/cco/sandbox.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkspaceRoot != "/srv/w" || !slices.Equal(c.AllowWrite, []string{"/var/cache/x"}) || !c.ClaudeSkipPermissions ||
		!slices.Equal(c.PassEnv, []string{"KEEP", "EDITOR"}) || !slices.Equal(c.Forge, []string{"github"}) ||
		c.Egress != "allowlist" || !slices.Equal(c.EgressPorts, []int{443}) {
		t.Errorf("parsed %+v", c)
	}
}

func TestDefaultConfigParsesAndListsEveryKey(t *testing.T) {
	if _, err := ParseConfig([]byte(DefaultConfigTOML), "default"); err != nil {
		t.Fatal(err)
	}
	// Uncommenting every key of the default file must give a valid file.
	var lines []string
	for _, l := range strings.Split(DefaultConfigTOML, "\n") {
		if strings.HasPrefix(l, "# ") && strings.Contains(l, " = ") {
			lines = append(lines, strings.TrimPrefix(l, "# "))
		}
	}
	c, err := ParseConfig([]byte(strings.Join(lines, "\n")), "uncommented")
	if err != nil {
		t.Fatalf("uncommented default: %v\n%s", err, strings.Join(lines, "\n"))
	}
	var keys map[string]any
	toml.Decode(strings.Join(lines, "\n"), &keys)
	for _, k := range []string{"workspace_root", "allow_write", "pass_env", "forge", "claude_skip_permissions",
		"egress", "egress_allow", "allow_host", "allow_ip", "egress_ports", "egress_log"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("default file does not show %s", k)
		}
	}
	_ = c
}

func TestParseConfigRefusals(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`workspace_roots = "/x"`, "unknown key workspace_roots"},
		{"[extra]\nx = 1", "unknown key extra, extra.x"},
		{`workspace_root = "rel"`, `workspace_root "rel" is not an absolute path`},
		{`allow_write = ["rel/x"]`, `allow_write entry "rel/x" is not an absolute path`},
		{`pass_env = ["PATH"]`, `pass_env entry "PATH"`},
		{`pass_env = ["HOME"]`, `pass_env entry "HOME"`},
		{`pass_env = ["USER"]`, `pass_env entry "USER"`},
		{`pass_env = ["LD_PRELOAD"]`, `pass_env entry "LD_PRELOAD"`},
		{`pass_env = ["LD_LIBRARY_PATH"]`, `pass_env entry "LD_LIBRARY_PATH"`},
		{`pass_env = ["BASH_ENV"]`, `pass_env entry "BASH_ENV"`},
		{`pass_env = ["ENV"]`, `pass_env entry "ENV"`},
		{`pass_env = ["IFS"]`, `pass_env entry "IFS"`},
		{`pass_env = ["CCO_AGENT"]`, `pass_env entry "CCO_AGENT"`},
		{`pass_env = ["GIT_CONFIG_GLOBAL"]`, `pass_env entry "GIT_CONFIG_GLOBAL"`},
		{`pass_env = ["CLAUDE_CONFIG_DIR"]`, `pass_env entry "CLAUDE_CONFIG_DIR"`},
		{`pass_env = ["OPENCODE_TEST_MANAGED_CONFIG_DIR"]`, `pass_env entry "OPENCODE_TEST_MANAGED_CONFIG_DIR"`},
		{`pass_env = ["OPENCODE_PURE"]`, `pass_env entry "OPENCODE_PURE"`},
		{`pass_env = ["COPILOT_ALLOW_ALL"]`, `pass_env entry "COPILOT_ALLOW_ALL"`},
		{`pass_env = ["COPILOT_TEST_MANAGED_SETTINGS_FILE_PATH"]`, `pass_env entry "COPILOT_TEST_MANAGED_SETTINGS_FILE_PATH"`},
		{`pass_env = ["A=B"]`, `is not a variable name`},
		{`pass_env = ["1A"]`, `is not a variable name`},
		{`pass_env = [""]`, `is not a variable name`},
		{`pass_env = ["A B"]`, `is not a variable name`},
		{`forge = ["sourcehut"]`, `forge "sourcehut" is not known`},
		{`egress = "open"`, `egress "open"`},
		{`pass_env = ["https_proxy"]`, `pass_env entry "https_proxy" is set by the jail itself`},
		{`pass_env = ["NO_PROXY"]`, `pass_env entry "NO_PROXY" is set by the jail itself`},
		{`egress_upstream = "socks5://proxy:1080"`, `egress_upstream: "socks5://proxy:1080": the upstream proxy must be http://`},
		{`egress_upstream = "http://proxy.corp"`, `egress_upstream: "http://proxy.corp" names no port`},
		{`egress_upstream = "http://u:s3cret@proxy.corp/x"`, `egress_upstream: "http://proxy.corp/x": a proxy URL has no path`},
		{`egress_upstream = "proxy.corp:8080"`, `"proxy.corp:8080" is not a proxy URL (write http://host:port`},
		{`host_ports = [0]`, `host_ports[0]: 0 is not a port`},
		{`ssh_hosts = ["github.com"]`, `ssh_hosts is set but ssh_agent is not`},
		{"ssh_agent = true\nssh_hosts = [\"*.corp\"]", `ssh_hosts: "*.corp": name each host`},
		{`pass_env = ["SSH_AUTH_SOCK"]`, `pass_env entry "SSH_AUTH_SOCK" is set by the jail itself, with ssh_agent = true`},
		{`host_ports = [3128]`, `host_ports[0]: 3128 is the jail's own proxy endpoint`},
		{`host_ports = ["4000"]`, `host_ports`},
		{`claude_skip_permissions = "yes"`, `parsing /etc/cco/sandbox.toml`},
	} {
		_, err := ParseConfig([]byte(tc.in), "/etc/cco/sandbox.toml")
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error quotes the upstream's password: %v", tc.in, err)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "/etc/cco/sandbox.toml") {
			t.Errorf("%s: error %v, want %q naming the file", tc.in, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "fix") && !strings.Contains(tc.want, "egress") {
			t.Errorf("%s: error %v names no fix", tc.in, err)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	d := t.TempDir()
	c, err := LoadConfig(filepath.Join(d, "missing.toml"))
	if err != nil || c.WorkspaceRoot != "" {
		t.Fatalf("missing file: %v %+v", err, c)
	}
	p := filepath.Join(d, "s.toml")
	testenv.Must(t, os.WriteFile(p, []byte("forge = [\"gitlab\"]\n"), 0o644))
	if os.Geteuid() == 0 {
		c, err = LoadConfig(p)
		if err != nil || c.Forge[0] != "gitlab" {
			t.Fatalf("load: %v %+v", err, c)
		}
		testenv.Must(t, os.Chmod(p, 0o666))
		if _, err := LoadConfig(p); err == nil || !strings.Contains(err.Error(), "chmod 644 "+p) {
			t.Errorf("world-writable config: %v", err)
		}
		testenv.Must(t, os.Chmod(p, 0o644))
		testenv.Must(t, os.Chown(p, 65534, 65534))
	}
	if _, err := LoadConfig(p); err == nil || !strings.Contains(err.Error(), "must be owned by root") {
		t.Errorf("config not owned by root: %v", err)
	}
}

// TestHomeReadOnlyKey: the default list when unset, the written list when
// set (even empty), and a refusal naming the key and the entry.
func TestHomeReadOnlyKey(t *testing.T) {
	c, err := ParseConfig([]byte(""), "/etc/cco/sandbox.toml")
	if err != nil || len(c.HomeTrees()) < 20 || !slices.Contains(c.HomeTrees(), ".rustup") {
		t.Fatalf("unset: %v %q", err, c.HomeTrees())
	}
	c, err = ParseConfig([]byte("home_read_only = []\n"), "/etc/cco/sandbox.toml")
	if err != nil || len(c.HomeTrees()) != 0 {
		t.Fatalf("empty: %v %q", err, c.HomeTrees())
	}
	c, err = ParseConfig([]byte("home_read_only = [\"~/tools\"]\ncaches = \"session\"\n"), "/etc/cco/sandbox.toml")
	if err != nil || !slices.Equal(c.HomeTrees(), []string{"tools"}) || c.Caches != "session" {
		t.Fatalf("set: %v %q", err, c.HomeTrees())
	}
	for text, want := range map[string]string{
		"home_read_only = [\"~/.ssh\"]\n":       "~/.ssh",
		"home_read_only = [\"~/.claude/x\"]\n":  "~/.claude",
		"home_read_only = [\"~/.cache/pip\"]\n": "~/.cache",
		"home_read_only = [\"/usr/local\"]\n":   "does not start with ~/",
		"home_read_only = [\"~/.local\"]\n":     "~/.local/state/cco",
		"caches = \"forever\"\n":                "caches",
	} {
		_, err := ParseConfig([]byte(text), "/etc/cco/sandbox.toml")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "/etc/cco/sandbox.toml") {
			t.Errorf("%q: %v, want an error naming %q and the file", text, err, want)
		}
	}
}
