package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/BurntSushi/toml"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/sandbox/caches"
	"github.com/cco-dev/cco/sandbox/egress/policy"
	"github.com/cco-dev/cco/sandbox/toolchains"
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

# Home trees bound read-only into the jail where they exist: the user's own
# toolchains, so that the agent builds with them but cannot change them.
# Paths start with ~/. Setting the key replaces the whole list. A tree that
# is, holds or lies in a credential directory (~/.ssh, ~/.aws, ~/.gnupg, an
# agent's login) or cco's own state is refused.
# home_read_only = ["~/.rustup", "~/.cargo/bin", "~/.local/bin", "~/.local/share/uv/python", "~/.local/share/uv/tools", "~/.local/share/pipx", "~/.local/pipx", "~/.nvm", "~/.local/share/fnm", "~/.fnm", "~/.local/state/fnm_multishells", "~/.volta", "~/.pyenv", "~/.local/share/mise", "~/.asdf", "~/.tool-versions", "~/.sdkman", "~/go/bin", "~/sdk", "~/.bun", "~/.deno", "~/.juliaup", "~/.julia/juliaup", "~/.ghcup", "~/.elan", "~/.opam", "~/.dotnet"]

# Dependency caches (~/.cache, ~/.npm, Go's module cache, ~/.cargo/registry,
# ...): "persist" keeps them between sessions in ~/.cache/cco/<agent>, one
# tree per agent that no host tool reads; "session" gives every session
# empty ones in memory.
# caches = "persist"

# Paths hidden in the jail (an empty directory, or an unreadable file): absolute,
# or starting with ~/. Other users' homes are always hidden.
# hide = []

# Give claude --dangerously-skip-permissions (the jail is the boundary).
# claude_skip_permissions = false

# The sum of the sizes of the jail's writable in-memory directories (/tmp,
# /run, /dev/shm, ~/.cache, ...): bytes, or a percentage of RAM ("50%").
# Default: half the machine's RAM.
# tmpfs_size = "50%"

# The most processes the jail's user may have (RLIMIT_NPROC).
# max_procs = 4096

# Network policy (read by the egress proxy): "public", "allowlist" or "off".
# egress = "public"
# egress_allow = []
# allow_host = []
# allow_ip = []
# egress_ports = [80, 443]
# egress_log = "~/.local/state/cco/egress.log"
# The proxy the egress proxy forwards through: "env" (the user's https_proxy,
# http_proxy and no_proxy), "none", or "http://[user:password@]host:port".
# egress_upstream = "env"
# Host loopback ports the jail reaches on its own 127.0.0.1 (a local gateway,
# an MCP server over HTTP); the agent's own base URL's port is added.
# host_ports = []
# The user's ssh-agent in the jail, and ssh to ssh_hosts (default: the forge
# entries' hosts) on port 22 through the egress proxy.
# ssh_agent = false
# ssh_hosts = []
`

// Config is sandbox.toml.
type Config struct {
	WorkspaceRoot         string   `toml:"workspace_root"`
	AllowWrite            []string `toml:"allow_write"`
	PassEnv               []string `toml:"pass_env"`
	Forge                 []string `toml:"forge"`
	ClaudeSkipPermissions bool     `toml:"claude_skip_permissions"`
	// HomeReadOnly is home_read_only as written; HomeTrees is what a
	// launch binds.
	HomeReadOnly []string `toml:"home_read_only"`
	// Caches is caches.Persist (also when empty) or caches.Session.
	Caches string `toml:"caches"`
	// Hide are paths (absolute, or ~/) masked in the jail.
	Hide []string `toml:"hide"`
	// homeTrees are the home-relative trees bound read-only: the parsed
	// home_read_only, or toolchains.Default when the key is not set.
	homeTrees []string
	// TmpfsSize bounds the sum of the jail's writable tmpfs mounts; zero
	// means half the machine's RAM.
	TmpfsSize Size `toml:"tmpfs_size"`
	// MaxProcs bounds the jail's processes (RLIMIT_NPROC); zero means
	// DefaultMaxProcs.
	MaxProcs int `toml:"max_procs"`

	// The egress proxy's keys; parsed here so that unknown keys can be
	// refused in one place.
	Egress      string   `toml:"egress"`
	EgressAllow []string `toml:"egress_allow"`
	AllowHost   []string `toml:"allow_host"`
	AllowIP     []string `toml:"allow_ip"`
	EgressPorts []int    `toml:"egress_ports"`
	EgressLog   string   `toml:"egress_log"`
	// EgressUpstream is "env" (the default), "none" or an http:// proxy
	// URL; HostPorts are host loopback ports carried into the jail.
	EgressUpstream string `toml:"egress_upstream"`
	HostPorts      []int  `toml:"host_ports"`
	// SSHAgent gives the jail the user's ssh-agent and ssh to SSHHosts
	// (default: the forge entries' hosts) through the egress proxy.
	SSHAgent bool     `toml:"ssh_agent"`
	SSHHosts []string `toml:"ssh_hosts"`
}

// SSHHostList is the hosts ssh reaches from the jail: ssh_hosts, or the
// forge entries' hosts; none without ssh_agent.
func (c *Config) SSHHostList() []string {
	if !c.SSHAgent {
		return nil
	}
	if c.SSHHosts != nil {
		return c.SSHHosts
	}
	var out []string
	for _, f := range c.Forge {
		if h := Forges[f].SSHHost; h != "" && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// Forge is one forge CLI's place in the home.
type Forge struct {
	// TokenDir is the CLI's directory (home-relative), bound read-write so
	// that its tokens can be used and refreshed.
	TokenDir string
	// Helper is the git credential helper the CLI provides.
	Helper string
	// HostRun are TokenDir's files that name what the CLI runs on the host
	// (pager, editor, browser, ! aliases): read-only in the jail. glab
	// keeps its tokens in config.yml too, which is then read-only as well.
	HostRun []string
	// SSHHost is the forge's SSH host (ssh_hosts' default).
	SSHHost string
}

// Forges maps a forge name to its CLI.
var Forges = map[string]Forge{
	"github": {TokenDir: ".config/gh", Helper: "!gh auth git-credential", HostRun: []string{"config.yml"}, SSHHost: "github.com"},
	"gitlab": {TokenDir: ".config/glab-cli", Helper: "!glab auth git-credential", HostRun: []string{"config.yml", "aliases.yml"}, SSHHost: "gitlab.com"},
}

// HomeTrees are the home-relative trees bound read-only (home_read_only,
// or its default).
// A Config that was not parsed (a zero Config is the defaults) has them
// worked out here; a bad entry then binds nothing.
func (c *Config) HomeTrees() []string {
	if c.homeTrees != nil {
		return c.homeTrees
	}
	raw := toolchains.Default
	if c.HomeReadOnly != nil {
		raw = c.HomeReadOnly
	}
	t, _ := toolchains.Parse(raw, protectedHome)
	return t
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

// proxyVars are the proxy variables (either case) the jail sets itself.
var proxyVars = []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"}

// refusedEnv reports why a pass_env name is refused, or "".
func refusedEnv(n string) string {
	switch {
	case !envName(n):
		return "is not a variable name"
	case n == "PATH" || n == "HOME" || n == "USER" || n == "LOGNAME" || n == "BASH_ENV" || n == "ENV" || n == "IFS":
		return "is set by the jail itself or changes how programs start"
	case n == "SSH_AUTH_SOCK":
		return "is set by the jail itself, with ssh_agent = true (the agent's socket at a private path), and unset otherwise"
	case slices.Contains(proxyVars, strings.ToUpper(n)):
		return "is set by the jail itself: the agent's proxy is the jail's egress endpoint (an upstream proxy goes in egress_upstream, whose credentials never enter the jail)"
	case strings.HasPrefix(n, "LD_"), strings.HasPrefix(n, "CCO_"), strings.HasPrefix(n, "GIT_CONFIG"):
		return "is refused (LD_*, CCO_* and GIT_CONFIG* never enter the jail)"
	case slices.Contains(agent.RefusedEnv(), n):
		return "is set by the jail itself, or moves or drops an agent's policy or guard (the agent profiles' RefusedEnv)"
	}
	return ""
}

// LoadConfig reads sandbox.toml at path. A missing file means the defaults.
// The file must be owned by root and not writable by group or others: it is
// policy, and a user-writable policy file would be no policy.
func LoadConfig(path string) (*Config, error) { return loadConfig(path, false) }

// LoadNestedConfig is LoadConfig inside a jail. There root's files show as
// the overflow uid (root is not mapped into a user's jail), and the jail
// shows /etc read-only, so either owner is the host's root.
func LoadNestedConfig(path string) (*Config, error) { return loadConfig(path, true) }

func loadConfig(path string, nested bool) (*Config, error) {
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
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ParseConfig(b, path)
	}
	rootOwned := st.Uid == 0 || nested && st.Uid == overflowUID()
	if !rootOwned || fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s must be owned by root and writable only by it (fix, on the host: sudo chown root:root %s && sudo chmod 644 %s)", path, path, path)
	}
	return ParseConfig(b, path)
}

// OverflowUID is the uid the kernel shows for an unmapped owner: inside a
// jail, root's files show as owned by it.
func OverflowUID() int { return int(overflowUID()) }

// overflowUID is the uid the kernel shows for an unmapped owner.
func overflowUID() uint32 {
	b, err := os.ReadFile("/proc/sys/kernel/overflowuid")
	if err != nil {
		return 65534
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 65534
	}
	return uint32(n)
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
	raw := toolchains.Default
	if md.IsDefined("home_read_only") {
		raw = c.HomeReadOnly
	}
	if c.homeTrees, err = toolchains.Parse(raw, protectedHome); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, t := range c.homeTrees {
		if paths.Within(t, caches.Home) {
			return nil, fmt.Errorf("%s: home_read_only entry \"~/%s\" lies in ~/%s, which the jail keeps apart for each agent (fix: remove it from home_read_only)", path, t, caches.Home)
		}
	}
	for _, h := range c.Hide {
		if rel, ok := cutHome(h); ok && rel != "." && !strings.HasPrefix(rel, "..") {
			continue
		}
		if !filepath.IsAbs(h) || filepath.Clean(h) == "/" {
			return nil, fmt.Errorf("%s: hide entry %q is neither an absolute path nor a path below ~/ (fix: write it as /abs/path or ~/path)", path, h)
		}
	}
	if err := caches.Check(c.Caches); err != nil {
		return nil, fmt.Errorf("%s: %w (fix: remove caches, or set it to one of those)", path, err)
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
	if c.MaxProcs < 0 {
		return nil, fmt.Errorf("%s: max_procs %d is negative (fix: a positive number, or remove it for %d)", path, c.MaxProcs, DefaultMaxProcs)
	}
	switch c.Egress {
	case "", "public", "allowlist", "off":
	default:
		return nil, fmt.Errorf("%s: egress %q is not one of public, allowlist, off", path, c.Egress)
	}
	if err := policy.ParseUpstreamSetting(c.EgressUpstream); err != nil {
		return nil, fmt.Errorf("%s: %w (fix that key in %s)", path, err, path)
	}
	if len(c.SSHHosts) > 0 && !c.SSHAgent {
		return nil, fmt.Errorf("%s: ssh_hosts is set but ssh_agent is not: ssh_hosts does nothing without it (fix: set ssh_agent = true, or remove ssh_hosts)", path)
	}
	if c.SSHHosts != nil {
		if _, err := policy.Parse(map[string]any{"ssh_hosts": c.SSHHosts}, agent.Names()[0], "/"); err != nil {
			return nil, fmt.Errorf("%s: %w (fix that key in %s)", path, err, path)
		}
	}
	if c.HostPorts != nil {
		if _, err := policy.HostPortList(c.HostPorts); err != nil {
			return nil, fmt.Errorf("%s: %w (fix that key in %s)", path, err, path)
		}
	}
	return &c, nil
}
