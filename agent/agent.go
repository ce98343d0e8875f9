// Package agent is the closed table of agent profiles: the only place that
// knows how claude differs from codex. A profile names the vendor binary, the
// home paths that carry the agent's login, what to mask and re-bind read-only,
// the environment the jail sets, and how the user's arguments are rewritten
// (flags stripped and injected). Adding an agent is adding a table entry.
package agent

import (
	"fmt"
	"sort"
	"strings"
)

// Profile describes one agent. Paths under the home are home-relative;
// workspace paths are workspace-relative; Binary is absolute on the target
// system.
type Profile struct {
	Name string
	// Binary is the vendor's real executable, exec'd in place.
	Binary string
	// Login are the home paths bound read-write: the agent's own login state.
	Login []string
	// HomeReadOnly are files inside Login that name commands to run; they are
	// re-bound read-only so that a session cannot plant a persistence hook.
	HomeReadOnly []string
	// Masks are home paths covered by an empty tmpfs (after Login's binds).
	Masks []string
	// WorkspaceDir is the agent's directory in a workspace. Every profile's
	// is protected in every jail, as a tree, because the next agent started
	// in the workspace would run what it holds.
	WorkspaceDir string
	// WorkspaceReadOnly are the agent's hook-carrying settings files in
	// WorkspaceDir (workspace-relative); they are re-bound read-only.
	WorkspaceReadOnly []string
	// Env is set inside the jail (KEY=VALUE).
	Env []string
	// ConfigDirEnv, when set, is a variable pointing at $HOME/<Login[0]>.
	ConfigDirEnv string
	// HomeBinary, when set, is where the vendor binary is bound read-only
	// inside the home (the vendor's conventional path).
	HomeBinary string
	// CarryOver lists {from, to} home paths: a host file at from is copied
	// once to to (when to does not exist yet), keeping the original.
	CarryOver [][2]string
	// Watched are home files that must stay writable and can name commands
	// (mcpServers); the shadow warns about entries a session added.
	Watched []string
	// Upgrade is the agent's name for `cco-install --upgrade`.
	Upgrade string
	// LoginPorts are the loopback ports of the agent's own login callback
	// server: while the jail listens on one, the shadow carries the host's
	// 127.0.0.1 on that port to it (sandbox/loginfwd). None for an agent
	// whose login is a pasted code.
	LoginPorts []int
	// LoginEndpoints are the hosts the agent's login reaches from the jail
	// (token exchange, device code, account lookup); the egress policy's
	// default allowlist carries them.
	LoginEndpoints []string

	rewrite func(args []string, o Options) []string
}

// Options are the sandbox.toml settings that change the agent's arguments.
type Options struct {
	// SkipPermissions gives claude --dangerously-skip-permissions.
	SkipPermissions bool
}

// EnvSelect is the variable that may pick another built-in profile.
const EnvSelect = "CCO_AGENT"

var table = map[string]*Profile{
	"claude": {
		Name:              "claude",
		Binary:            "/usr/libexec/cco/claude/current/claude",
		Login:             []string{".claude"},
		HomeReadOnly:      []string{".claude/settings.json"},
		Masks:             []string{".local/share/claude"},
		WorkspaceDir:      ".claude",
		WorkspaceReadOnly: []string{".claude/settings.json", ".claude/settings.local.json"},
		Env:               []string{"DISABLE_AUTOUPDATER=1", "DISABLE_UPDATES=1"},
		ConfigDirEnv:      "CLAUDE_CONFIG_DIR",
		HomeBinary:        ".local/bin/claude",
		CarryOver:         [][2]string{{".claude.json", ".claude/.claude.json"}},
		Watched:           []string{".claude/.claude.json"},
		Upgrade:           "claude",
		// The paste-code flow: the localhost redirect goes only to a
		// browser the jail cannot open (docs/how-to/first-login.md).
		LoginEndpoints: []string{"platform.claude.com", "api.anthropic.com", "claude.ai"},
		rewrite:        claudeArgs,
	},
	"codex": {
		Name:              "codex",
		Binary:            "/usr/libexec/cco/codex-dist/current/bin/codex",
		Login:             []string{".codex"},
		HomeReadOnly:      []string{".codex/config.toml"},
		Masks:             []string{".codex/packages"},
		WorkspaceDir:      ".codex",
		WorkspaceReadOnly: []string{".codex/config.toml"},
		Env:               []string{"CODEX_UPDATE_DISABLED=1"},
		Upgrade:           "codex",
		// codex login's server: 1455, or 1457 when 1455 is taken.
		LoginPorts:     []int{1455, 1457},
		LoginEndpoints: []string{"auth.openai.com"},
		rewrite:        codexArgs,
	},
}

// Lookup returns the built-in profile of that name.
func Lookup(name string) (*Profile, bool) {
	p, ok := table[name]
	return p, ok
}

// Names lists the built-in profiles, sorted.
func Names() []string {
	n := make([]string, 0, len(table))
	for k := range table {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Select picks the profile for a launch: the base name of argv[0], or the
// value of CCO_AGENT when set, which may only name another built-in profile
// (never a path). getenv is os.LookupEnv in production.
func Select(base string, getenv func(string) (string, bool)) (*Profile, error) {
	if v, ok := getenv(EnvSelect); ok && v != "" {
		p, found := table[v]
		if !found {
			return nil, fmt.Errorf("%s=%q is not a built-in agent (one of %s); unset it or pick one of those",
				EnvSelect, v, strings.Join(Names(), ", "))
		}
		return p, nil
	}
	p, found := table[base]
	if !found {
		return nil, fmt.Errorf("%q is not a built-in agent (one of %s)", base, strings.Join(Names(), ", "))
	}
	return p, nil
}

// WorkspaceDirs is every profile's WorkspaceDir, in table order.
func WorkspaceDirs() []string {
	var out []string
	for _, n := range Names() {
		out = append(out, table[n].WorkspaceDir)
	}
	return out
}

// WorkspaceReadOnly is the union of every profile's WorkspaceReadOnly, in
// table order.
func WorkspaceReadOnly() []string {
	var out []string
	for _, n := range Names() {
		out = append(out, table[n].WorkspaceReadOnly...)
	}
	return out
}

// Args rewrites the user's arguments for the jail: it strips the flags that
// would weaken or break the jail and injects the profile's own.
func (p *Profile) Args(user []string, o Options) []string {
	return p.rewrite(user, o)
}
