package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"
)

// ConfigPath is the jail's configuration on the target system. It is
// root-owned and never read from the workspace.
const ConfigPath = "/etc/cco/sandbox.toml"

// DefaultConfigTOML is the sandbox.toml that cco-install puts in place when
// none exists. Every key is shown with its default, commented out.
const DefaultConfigTOML = `# cco sandbox configuration. Root-owned; read by the shadow at every launch.
# Never read from the workspace. Every key below shows its default. An unknown
# key makes every launch refuse (exit 126), so that a typo never weakens the jail.

# The directory bound read-write. Empty: the current directory. When set, it
# must contain the current directory.
# workspace_root = ""

# Extra absolute paths bound read-write into every jail (missing ones are
# skipped). The same refusals as for the workspace apply.
# allow_write = []

# Names of environment variables passed into the jail (PATH, HOME, USER,
# LOGNAME, LD_*, BASH_ENV, ENV, IFS, GIT_CONFIG*, CCO_* and the jail's own
# variables are refused).
# pass_env = []

# Forge CLIs whose token directory is bound in and whose credential helper
# git may use: "github" (~/.config/gh, gh) and "gitlab" (~/.config/glab-cli, glab).
# forge = []

# Give claude --dangerously-skip-permissions (the jail is the boundary).
# claude_skip_permissions = false

# Network policy (read by the egress proxy): "public", "allowlist" or "off".
# egress = "public"
# egress_allow = []
# allow_host = []
# allow_ip = []
# egress_ports = [80, 443]
# egress_log = "~/.local/state/cco/egress.log"
`

// Config is sandbox.toml.
type Config struct {
	WorkspaceRoot         string   `toml:"workspace_root"`
	AllowWrite            []string `toml:"allow_write"`
	PassEnv               []string `toml:"pass_env"`
	Forge                 []string `toml:"forge"`
	ClaudeSkipPermissions bool     `toml:"claude_skip_permissions"`

	// The egress proxy's keys; parsed here so that unknown keys can be
	// refused in one place.
	Egress      string   `toml:"egress"`
	EgressAllow []string `toml:"egress_allow"`
	AllowHost   []string `toml:"allow_host"`
	AllowIP     []string `toml:"allow_ip"`
	EgressPorts []int    `toml:"egress_ports"`
	EgressLog   string   `toml:"egress_log"`
}

// Forges maps a forge name to its CLI's token directory (home-relative)
// and the git credential helper that CLI provides.
var Forges = map[string]struct{ TokenDir, Helper string }{
	"github": {".config/gh", "!gh auth git-credential"},
	"gitlab": {".config/glab-cli", "!glab auth git-credential"},
}

// envName reports whether n is a shell variable name.
func envName(n string) bool {
	for i, c := range n {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return n != ""
}

// refusedEnv reports why a pass_env name is refused, or "".
func refusedEnv(n string) string {
	switch {
	case !envName(n):
		return "is not a variable name"
	case n == "PATH" || n == "HOME" || n == "USER" || n == "LOGNAME" || n == "BASH_ENV" || n == "ENV" || n == "IFS":
		return "is set by the jail itself or changes how programs start"
	case strings.HasPrefix(n, "LD_"), strings.HasPrefix(n, "CCO_"), strings.HasPrefix(n, "GIT_CONFIG"):
		return "is refused (LD_*, CCO_* and GIT_CONFIG* never enter the jail)"
	case n == "CLAUDE_CONFIG_DIR" || n == "DISABLE_AUTOUPDATER" || n == "DISABLE_UPDATES" || n == "CODEX_UPDATE_DISABLED":
		return "is set by the jail itself"
	}
	return ""
}

// LoadConfig reads sandbox.toml at path. A missing file means the defaults.
// The file must be owned by root and not writable by group or others: it is
// policy, and a user-writable policy file would be no policy.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Uid != 0 || fi.Mode().Perm()&0o022 != 0) {
		return nil, fmt.Errorf("%s must be owned by root and writable only by it (fix: sudo chown root:root %s && sudo chmod 644 %s)", path, path, path)
	}
	return ParseConfig(b, path)
}

// ParseConfig parses and validates sandbox.toml's text; path names it in
// errors.
func ParseConfig(data []byte, path string) (*Config, error) {
	var c Config
	md, err := toml.Decode(string(data), &c)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w (fix the file or restore it with sudo cco-install)", path, err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		keys := make([]string, len(u))
		for i, k := range u {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("%s: unknown key %s (fix: remove it or correct its spelling; known keys are listed in the default file)", path, strings.Join(keys, ", "))
	}
	if c.WorkspaceRoot != "" && !filepath.IsAbs(c.WorkspaceRoot) {
		return nil, fmt.Errorf("%s: workspace_root %q is not an absolute path (fix: write it as /abs/path)", path, c.WorkspaceRoot)
	}
	for _, p := range c.AllowWrite {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%s: allow_write entry %q is not an absolute path (fix: write it as /abs/path)", path, p)
		}
	}
	for _, n := range c.PassEnv {
		if why := refusedEnv(n); why != "" {
			return nil, fmt.Errorf("%s: pass_env entry %q %s (fix: remove it from pass_env)", path, n, why)
		}
	}
	for _, f := range c.Forge {
		if _, ok := Forges[f]; !ok {
			return nil, fmt.Errorf("%s: forge %q is not known (fix: use one of github, gitlab)", path, f)
		}
	}
	switch c.Egress {
	case "", "public", "allowlist", "off":
	default:
		return nil, fmt.Errorf("%s: egress %q is not one of public, allowlist, off", path, c.Egress)
	}
	return &c, nil
}
