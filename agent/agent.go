// Package agent is the closed table of agent profiles: the only place that
// knows how one agent differs from another. A profile names the vendor
// binary, the home paths that carry the agent's login, what to mask and
// re-bind read-only, the environment the jail sets, the agent's credential
// variables and endpoints, how its vendor's installers are recognised, which
// policy handler wires the guard for it, and how the user's arguments are
// rewritten (flags stripped and injected). Every other package iterates
// Names() and reads the profile: adding an agent is adding a table entry
// (and its vendor source and policy handler).
package agent

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/cco-dev/cco/rootonly"
)

// Profile describes one agent. Paths under the home are home-relative;
// workspace paths are workspace-relative; Binary is absolute on the target
// system.
type Profile struct {
	Name string
	// Binary is the vendor's real executable, exec'd in place, or the
	// script that Interpreter runs.
	Binary string
	// Interpreter, when set, is the program that runs Binary: the jail's
	// command is the interpreter, then the script. It is a link that the
	// vendor step makes in the version's directory to the interpreter it
	// checked, so that the jail never takes one off its PATH.
	Interpreter string
	// Login are the home paths bound read-write: the agent's own login state.
	Login []string
	// HomeReadOnly are the paths inside Login that the vendor loads at
	// start and that can name commands to run (settings, env files, hook,
	// MCP and extension config, trusted-folder lists); they are re-bound
	// read-only so that a session cannot plant a persistence hook. An
	// entry ending in "/" is a directory (a missing one shows empty).
	HomeReadOnly []string
	// Masks are home paths covered by an empty tmpfs (after Login's binds).
	Masks []string
	// WorkspaceDirs are the agent's directories in a workspace
	// (workspace-relative, ".github/hooks" may be nested). Every profile's
	// are protected in every jail, as trees, because the next agent started
	// in the workspace would run what they hold.
	WorkspaceDirs []string
	// WorkspaceReadOnly are the agent's hook-carrying settings files
	// (workspace-relative), in WorkspaceDirs or at the workspace's top
	// (opencode.json); they are re-bound read-only, and a missing one shows
	// as a stand-in.
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
	// Default: the agent is in the `agents` key's default.
	Default bool
	// Credentials are the environment variables that carry this agent's
	// login. The verifier accepts them in this agent's jail and reports them
	// in any other's.
	Credentials []string
	// ProviderEnv are the agent's non-secret provider variables (base URL,
	// model, the cloud-provider switches). They and Credentials pass into
	// this agent's jail from the host by default, and never into another's.
	ProviderEnv []string
	// ChildEnv are variables the agent itself sets for the processes it
	// starts, its hooks among them (never passed in from the host: the
	// jail's environment is an allow-list). The verifier does not take
	// them for host tokens.
	ChildEnv []string
	// Secrets are the home files that hold this agent's login: no other
	// agent's jail may read them.
	Secrets []string
	// Egress are the vendor's endpoints, the agent's part of the egress
	// allowlist (host rules as egress_allow takes them).
	Egress []string
	// Installers are the vendor's own installs that take-over moves out of
	// the shadow's way.
	Installers Installers
	// AppServer: some invocations need the in-jail app-server helper
	// (appserver.Applies decides which).
	AppServer bool
	// Policy names the handler that writes and reads the vendor's managed
	// policy files (package policy).
	Policy string
	// HookFields are keys of the hook JSON that only this agent sends: the
	// guard, called without an agent name, tells the agents apart by them
	// (the profile with none is the fallback).
	HookFields []string
	// PathComment is a word that the vendor installer's comment line
	// carries before the ~/.local/bin PATH line it adds to a shell rc file
	// ("" when the vendor marks its block otherwise, or adds none).
	PathComment string
	// PathVendor is the vendor's name as take-over reports its PATH block.
	PathVendor string
	// LoginPorts are the loopback ports of the agent's own login callback
	// server: while a login flow runs (LoginFlow) and the jail listens on
	// one, the shadow carries the invoking user's connections to the
	// host's 127.0.0.1 on that port to it (sandbox/loginfwd). None for an
	// agent whose login is a pasted code.
	LoginPorts []int
	// LoginCommand is the subcommand that runs the login ("login" for
	// `codex login`); LoginState is the home file the login writes, whose
	// absence makes any run a first run that offers the login.
	LoginCommand string
	LoginState   string
	// LoginEndpoints are the hosts the agent's login reaches from the jail
	// (token exchange, device code, account lookup); the egress policy's
	// default allowlist carries them.
	LoginEndpoints []string

	rewrite func(args []string, o Options) []string
	// subcommand is the subcommand the user's arguments name ("": none).
	subcommand func(args []string) string
}

// Installers describes where a vendor's own installers put the agent's
// command and how to tell their work from anything else.
type Installers struct {
	// HomeBins are home directories (home-relative) where an installer
	// puts the command: ~/.local/bin for the native installers and for
	// npm with prefix ~/.local, ~/.npm-global/bin for npm's usual per-user
	// prefix.
	HomeBins []string
	// HomeLinks are {substring, what}: a command in HomeBins that links to
	// a target containing substring is that installer's ("what" names it).
	HomeLinks [][2]string
	// NPMPackage is the vendor's npm package: a command linking into
	// node_modules/<NPMPackage> is an npm install of it.
	NPMPackage string
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
		Name:   "claude",
		Binary: "/usr/libexec/cco/claude/current/claude",
		Login:  []string{".claude"},
		// What Claude Code loads at start that can run a command: its
		// settings (hooks, statusLine, apiKeyHelper, env), plugins (their
		// hooks and MCP servers), custom commands (! shell lines), skills
		// and subagents (their hooks). ADR 43 gives each reason.
		HomeReadOnly: []string{".claude/settings.json", ".claude/plugins/", ".claude/commands/", ".claude/skills/",
			".claude/agents/"},
		Masks:             []string{".local/share/claude"},
		WorkspaceDirs:     []string{".claude"},
		WorkspaceReadOnly: []string{".claude/settings.json", ".claude/settings.local.json"},
		Env:               []string{"DISABLE_AUTOUPDATER=1", "DISABLE_UPDATES=1"},
		ConfigDirEnv:      "CLAUDE_CONFIG_DIR",
		HomeBinary:        ".local/bin/claude",
		CarryOver:         [][2]string{{".claude.json", ".claude/.claude.json"}},
		Watched:           []string{".claude/.claude.json"},
		Upgrade:           "claude",
		Default:           true,
		Credentials: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
			"ANTHROPIC_CUSTOM_HEADERS", "AWS_BEARER_TOKEN_BEDROCK"},
		// Claude Code's provider settings: its gateway, its models, and
		// the Bedrock and Vertex switches with their region and project.
		ProviderEnv: []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL",
			"ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL",
			"CLAUDE_CODE_USE_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL", "CLAUDE_CODE_SKIP_BEDROCK_AUTH", "AWS_REGION",
			"CLAUDE_CODE_USE_VERTEX", "ANTHROPIC_VERTEX_BASE_URL", "CLAUDE_CODE_SKIP_VERTEX_AUTH",
			"ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION"},
		// Claude Code hands its messaging inbox's token to its children.
		ChildEnv: []string{"CLAUDE_CODE_MESSAGING_TOKEN"},
		Secrets:  []string{".claude/.credentials.json", ".claude.json", ".claude/.claude.json"},
		Egress: []string{
			"api.anthropic.com", "console.anthropic.com", "statsig.anthropic.com",
			"claude.ai", "platform.claude.com",
		},
		Installers: Installers{
			HomeBins:   []string{".local/bin"},
			HomeLinks:  [][2]string{{".local/share/claude/versions/", "Claude Code's native installer"}},
			NPMPackage: "@anthropic-ai/claude-code",
		},
		Policy:      "claude",
		PathComment: "claude",
		PathVendor:  "Claude Code",
		// The paste-code flow: the localhost redirect goes only to a
		// browser the jail cannot open (docs/how-to/first-login.md).
		LoginEndpoints: []string{"platform.claude.com", "api.anthropic.com", "claude.ai"},
		rewrite:        claudeArgs,
	},
	"codex": {
		Name:   "codex",
		Binary: "/usr/libexec/cco/codex-dist/current/bin/codex",
		Login:  []string{".codex"},
		// Codex's config (MCP servers, notify, shell environment), the
		// .env it loads before anything else (PATH, BROWSER), its hooks,
		// execpolicy rules (which commands run unasked), plugins and
		// skills. ADR 43 gives each reason.
		HomeReadOnly: []string{".codex/config.toml", ".codex/.env", ".codex/hooks.json", ".codex/rules/", ".codex/plugins/",
			".codex/skills/"},
		Masks:             []string{".codex/packages"},
		WorkspaceDirs:     []string{".codex"},
		WorkspaceReadOnly: []string{".codex/config.toml"},
		Env:               []string{"CODEX_UPDATE_DISABLED=1"},
		Upgrade:           "codex",
		Default:           true,
		Credentials:       []string{"OPENAI_API_KEY", "CODEX_API_KEY"},
		ProviderEnv:       []string{"OPENAI_BASE_URL", "OPENAI_ORGANIZATION", "OPENAI_PROJECT"},
		Secrets:           []string{".codex/auth.json"},
		Egress:            []string{"api.openai.com", "auth.openai.com", "chatgpt.com", "*.chatgpt.com"},
		Installers: Installers{
			HomeBins:   []string{".local/bin"},
			HomeLinks:  [][2]string{{".codex/packages/standalone/", "Codex's standalone installer"}},
			NPMPackage: "@openai/codex",
		},
		AppServer:  true,
		Policy:     "codex",
		HookFields: []string{"turn_id", "model"},
		// codex login's server: 1455, or 1457 when 1455 is taken.
		LoginPorts:     []int{1455, 1457},
		LoginCommand:   "login",
		LoginState:     ".codex/auth.json",
		LoginEndpoints: []string{"auth.openai.com"},
		rewrite:        codexArgs,
		subcommand:     codexSubcommand,
	},
	// Gemini CLI is a bundled Node program. Its script's #!/usr/bin/env
	// node would take the first node on the jail's PATH: the jail runs the
	// Node that gemini.node names instead, linked beside the version.
	"gemini": {
		Name:        "gemini",
		Binary:      "/usr/libexec/cco/gemini/current/bundle/gemini.js",
		Interpreter: "/usr/libexec/cco/gemini/current/node",
		Login:       []string{".gemini"},
		// Gemini CLI's settings (hooks, MCP servers, tool discovery), the
		// .env it loads at start, extensions (MCP servers, hooks,
		// commands), the trust lists for folders and hooks, policies
		// (which tools run unasked), custom commands (!{shell}), skills,
		// subagents and the MCP enablement list. ADR 43 gives each reason.
		HomeReadOnly: []string{".gemini/settings.json", ".gemini/.env", ".gemini/extensions/", ".gemini/trustedFolders.json",
			".gemini/trusted_hooks.json", ".gemini/policies/", ".gemini/commands/", ".gemini/skills/", ".gemini/agents/",
			".gemini/mcp-server-enablement.json"},
		WorkspaceDirs:     []string{".gemini"},
		WorkspaceReadOnly: []string{".gemini/settings.json"},
		// GEMINI_SANDBOX=false wins over --sandbox and the settings (its
		// docker/podman sandbox cannot run in the jail, which is the
		// boundary); the system settings file cannot be used in a user's
		// jail, where root's files are not root's (Gemini CLI skips it with
		// a warning), so it is pointed at a path that does not exist.
		// NO_BROWSER (any value) makes its login the user-code flow even
		// with DISPLAY passed in: the loopback flow's random port is never
		// forwarded.
		Env: []string{"GEMINI_SANDBOX=false", "GEMINI_CLI_SYSTEM_SETTINGS_PATH=/nonexistent/cco/gemini-settings.json",
			"NO_BROWSER=true"},
		Upgrade:     "gemini",
		Credentials: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_ACCESS_TOKEN"},
		// Vertex AI and Code Assist switches, the project and the model.
		ProviderEnv: []string{"GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI",
			"GOOGLE_GENAI_USE_GCA", "GEMINI_MODEL", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL"},
		Secrets: []string{".gemini/oauth_creds.json", ".gemini/google_accounts.json", ".gemini/gemini-credentials.json",
			".gemini/mcp-oauth-tokens.json"},
		Egress: []string{
			"generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com",
			"oauth2.googleapis.com", "accounts.google.com", "www.googleapis.com",
			"aiplatform.googleapis.com",
		},
		Installers: Installers{
			HomeBins:   []string{".local/bin", ".npm-global/bin"},
			NPMPackage: "@google/gemini-cli",
		},
		Policy:     "gemini",
		HookFields: []string{"timestamp"},
		// The user-code flow: NO_BROWSER above, and the jail clears
		// DISPLAY, so the loopback flow never starts
		// (docs/how-to/first-login.md).
		LoginEndpoints: []string{"oauth2.googleapis.com", "www.googleapis.com", "cloudcode-pa.googleapis.com"},
		rewrite:        geminiArgs,
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

// All is every profile, in Names order.
func All() []*Profile {
	out := make([]*Profile, 0, len(table))
	for _, n := range Names() {
		out = append(out, table[n])
	}
	return out
}

// Defaults are the agents the `agents` key names when unset.
func Defaults() []string {
	var out []string
	for _, p := range All() {
		if p.Default {
			out = append(out, p.Name)
		}
	}
	return out
}

// Known reports whether name is a built-in profile.
func Known(name string) bool {
	_, ok := table[name]
	return ok
}

// List is the names joined for a message with conj ("or", "and"):
// "a, b or c".
func List(names []string, conj string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// OthersCredentials are the credential variables of every profile but p:
// what p's jail must not carry.
func (p *Profile) OthersCredentials() []string {
	var out []string
	for _, o := range All() {
		if o != p {
			out = append(out, o.Credentials...)
		}
	}
	return out
}

// OthersSecrets are the login files of every profile but p that p's jail
// must not show.
func (p *Profile) OthersSecrets() []string {
	var out []string
	for _, o := range All() {
		if o != p {
			out = append(out, o.Secrets...)
		}
	}
	return out
}

// LoginDirs is every profile's Login, in Names order: the home trees that
// hold some agent's login.
func LoginDirs() []string {
	var out []string
	for _, p := range All() {
		out = append(out, p.Login...)
	}
	return out
}

// WorkspaceDirs is every profile's WorkspaceDirs, in table order.
func WorkspaceDirs() []string {
	var out []string
	for _, n := range Names() {
		out = append(out, table[n].WorkspaceDirs...)
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

// Command is the start of the jail's command, each path under root (the
// shadow's system root, "" in production): the interpreter, when the
// profile has one, then the binary.
func (p *Profile) Command(root string) []string {
	if p.Interpreter == "" {
		return []string{root + p.Binary}
	}
	return []string{root + p.Interpreter, root + p.Binary}
}

// Missing is an error naming the first program of Command(root) that is
// not there (an interpreter link that points nowhere counts), or an
// interpreter that someone but root can change, with the fix; nil when both
// are in place.
func (p *Profile) Missing(root string) error { return p.missing(root, 0) }

// MissingNested is Missing inside a jail, where root's files show owned by
// the overflow uid: those owners are root's too.
func (p *Profile) MissingNested(root string, overflow int) error { return p.missing(root, 0, overflow) }

func (p *Profile) missing(root string, owners ...int) error {
	if fi, err := os.Stat(root + p.Binary); err != nil || fi.IsDir() {
		return fmt.Errorf("the %s binary %s is missing (fix: sudo cco-install --upgrade %s)", p.Name, root+p.Binary, p.Upgrade)
	}
	if p.Interpreter == "" {
		return nil
	}
	if fi, err := os.Stat(root + p.Interpreter); err != nil || fi.IsDir() {
		// The vendor step links the interpreter the configuration names,
		// and refuses, naming what to install, when there is none.
		return fmt.Errorf("the %s interpreter %s is missing or points nowhere (fix: sudo cco-install --upgrade %s links it again, or says what to install)", p.Name, root+p.Interpreter, p.Upgrade)
	}
	// It runs as every user of the agent, with their login.
	var ro *rootonly.Error
	if err := rootonly.Check("", root+p.Interpreter, owners...); errors.As(err, &ro) {
		return fmt.Errorf("the %s interpreter %s is not root's alone: %v: any user who can change it runs code as you, with your login (fix: an administrator makes it root's and writable by root alone, chown root:root and chmod go-w, or sets %s.node to a Node that is and runs sudo cco-install --upgrade %s)", p.Name, root+p.Interpreter, ro, p.Name, p.Upgrade)
	}
	return nil
}

// LoginFlow reports whether a launch with the user's arguments may run the
// agent's loopback login flow, the only time its LoginPorts are carried in
// from the host (docs/adr/0054-login-callback-forwarding.md): the login
// subcommand, or a first run, while the login state is missing. exists
// tells whether a home-relative file exists.
func (p *Profile) LoginFlow(args []string, exists func(rel string) bool) bool {
	if len(p.LoginPorts) == 0 {
		return false
	}
	if p.LoginCommand != "" && p.subcommand != nil && p.subcommand(args) == p.LoginCommand {
		return true
	}
	return p.LoginState != "" && !exists(p.LoginState)
}

// Args rewrites the user's arguments for the jail: it strips the flags that
// would weaken or break the jail and injects the profile's own.
func (p *Profile) Args(user []string, o Options) []string {
	return p.rewrite(user, o)
}
