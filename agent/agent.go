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
	"slices"
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
	// WorkspaceScratch are WorkspaceDirs the agent writes at start
	// (.opencode, where OpenCode writes its .gitignore and dependency
	// manifest, and stops when it cannot): a missing one is an empty
	// in-memory directory in every jail instead of a read-only one, so that
	// the agent starts and nothing written there outlives the session.
	WorkspaceScratch []string
	// WorkspaceReadOnly are the agent's hook-carrying settings files
	// (workspace-relative), in WorkspaceDirs or at the workspace's top
	// (opencode.json); they are re-bound read-only, and a missing one shows
	// as a stand-in. An entry ending in "/" is a directory read-only as a
	// whole (every file in it names what the agent runs: ".github/hooks/").
	WorkspaceReadOnly []string
	// Env is set inside the jail (KEY=VALUE).
	Env []string
	// RefusedEnv are variables that must never reach the agent from the
	// host (pass_env refuses them): the vendor's switches that move or drop
	// its managed policy and cco's guard, or that trust what the jail
	// protects. Env's and ConfigDirEnv's names are refused too
	// (RefusedEnv()).
	RefusedEnv []string
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
	// Trust are the trust lists in the agent's writable login state
	// (TrustList): the folders, projects and servers it trusts, kept in
	// the file its login refreshes. Each is put back after the session to
	// its value at launch (package sandbox/trust).
	Trust []TrustList
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
	// SettingsEnv are the agent's own settings variables, each a name or a
	// prefix ending in "*" ("CLAUDE_CODE_*"), as its vendor documents them
	// (docs/reference/environment.md names the source of each): set on the
	// host, they pass into this agent's jail and never into another's. A
	// name in RefusedEnv(), ChildEnv or another agent's Credentials never
	// passes, also when a prefix matches it (Setting).
	SettingsEnv []string
	// Clouds map the agent's cloud-provider switches to the cloud whose
	// credentials its jail gets while the switch is on (Cloud, Clouds):
	// sandbox/cloudcreds resolves them on the host.
	Clouds map[string]string
	// ShellDropsGitConfig: the agent's shell tool runs commands with git's
	// config files at /dev/null (Gemini CLI's), so the jail gives the
	// user's git identity in GIT_CONFIG_COUNT's entries, which it keeps.
	ShellDropsGitConfig bool
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
	// Telemetry are the vendor's switches that turn its telemetry off, as
	// KEY=VALUE (or a settings key, "key: value"), for the docs: the jail
	// sets none of them, and the egress allowlist leaves the telemetry
	// hosts out.
	Telemetry []string

	rewrite func(args []string, o Options) []string
	// argsEnv are variables the rewritten arguments need in the jail
	// (ArgsEnv); nil: none.
	argsEnv func(args []string, o Options) []string
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
	// HomeFiles are {home path, what}: a regular file at the path (in
	// HomeBins) is the binary that the vendor's install script copied
	// there, not a link.
	HomeFiles [][2]string
}

// Options are the sandbox.toml settings that change the agent's arguments.
type Options struct {
	// SkipPermissions gives claude --dangerously-skip-permissions.
	SkipPermissions bool
	// Root: the session is uid 0 in the jail.
	Root bool
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
		// A project's trust dialog, its .mcp.json servers enabled (all, or
		// by name, or not disabled), its pre-approved tools and its
		// CLAUDE.md's external includes.
		Trust: []TrustList{{File: ".claude/.claude.json", Keys: []string{"projects.*.hasTrustDialogAccepted",
			"projects.*.enableAllProjectMcpServers", "projects.*.enabledMcpjsonServers", "projects.*.disabledMcpjsonServers",
			"projects.*.allowedTools", "projects.*.hasClaudeMdExternalIncludesApproved"}}},
		Upgrade: "claude",
		Default: true,
		Credentials: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
			"ANTHROPIC_CUSTOM_HEADERS", "AWS_BEARER_TOKEN_BEDROCK"},
		// Claude Code's provider settings: its gateway, its models, and
		// the Bedrock and Vertex switches with their region and project.
		ProviderEnv: []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL",
			"ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL",
			"CLAUDE_CODE_USE_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL", "CLAUDE_CODE_SKIP_BEDROCK_AUTH", "AWS_REGION",
			"CLAUDE_CODE_USE_VERTEX", "ANTHROPIC_VERTEX_BASE_URL", "CLAUDE_CODE_SKIP_VERTEX_AUTH",
			"ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION"},
		// Claude Code's settings variables
		// (code.claude.com/docs/en/settings#environment-variables): its
		// CLAUDE_CODE_* and DISABLE_* switches (nonessential traffic,
		// telemetry, error reporting), its timeouts and token budgets.
		SettingsEnv: []string{"CLAUDE_CODE_*", "DISABLE_*", "API_TIMEOUT_MS", "MAX_THINKING_TOKENS",
			"BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_TIMEOUT_MS", "BASH_MAX_OUTPUT_LENGTH",
			"CLAUDE_BASH_MAINTAIN_PROJECT_WORKING_DIR", "MAX_MCP_OUTPUT_TOKENS", "MCP_TIMEOUT", "MCP_TOOL_TIMEOUT",
			"USE_BUILTIN_RIPGREP", "VERTEX_REGION_CLAUDE_*", "ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION",
			"SLASH_COMMAND_TOOL_CHAR_BUDGET"},
		Clouds: map[string]string{"CLAUDE_CODE_USE_BEDROCK": CloudAWS, "CLAUDE_CODE_USE_VERTEX": CloudGoogle},
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
		// IS_SANDBOX is the shadow's alone to set (ArgsEnv): from the host
		// it would let root skip the permissions where nothing jails it.
		RefusedEnv: []string{claudeSandboxEnv},
		rewrite:    claudeArgs,
		argsEnv:    claudeArgsEnv,
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
		// Codex reads its settings from config.toml; its log filter is the
		// one variable it documents (developers.openai.com/codex/config-advanced).
		SettingsEnv: []string{"RUST_LOG"},
		Secrets:     []string{".codex/auth.json"},
		Egress:      []string{"api.openai.com", "auth.openai.com", "chatgpt.com", "*.chatgpt.com"},
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
		// Its telemetry switches and its system-prompt override
		// (geminicli.com/docs/get-started/configuration, "Environment
		// variables"); GEMINI_CLI_SYSTEM_DEFAULTS_PATH moves the system
		// defaults and GEMINI_CLI_HOME the home its login lives in.
		SettingsEnv: []string{"GEMINI_TELEMETRY_*", "GEMINI_SYSTEM_MD", "GEMINI_WRITE_SYSTEM_MD", "CODE_ASSIST_ENDPOINT"},
		RefusedEnv:  []string{"GEMINI_CLI_SYSTEM_DEFAULTS_PATH", "GEMINI_CLI_HOME"},
		Clouds:      map[string]string{"GOOGLE_GENAI_USE_VERTEXAI": CloudGoogle},
		// Its shell tool's getSafeGitEnv sets GIT_CONFIG_GLOBAL,
		// GIT_CONFIG_SYSTEM and GIT_CONFIG_NOSYSTEM (0.61.0's bundle).
		ShellDropsGitConfig: true,
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
	// OpenCode is a Bun-compiled binary from its platform package. In its
	// config directories (~/.config/opencode, a workspace's .opencode) the
	// config files and the directories it loads code from are read-only;
	// the rest stays writable, since OpenCode stops when it cannot write
	// its .gitignore there. Its dependency install there then fails at
	// once, where it would stall every external plugin (cco's guard among
	// them) while it waits on the network.
	"opencode": {
		Name:              "opencode",
		Binary:            "/usr/libexec/cco/opencode/current/opencode",
		Login:             []string{".config/opencode", ".local/share/opencode", ".local/state/opencode"},
		HomeReadOnly:      opencodeConfig(".config/opencode/"),
		WorkspaceDirs:     []string{".opencode"},
		WorkspaceScratch:  []string{".opencode"},
		WorkspaceReadOnly: append(opencodeConfig(".opencode/"), "opencode.json", "opencode.jsonc"),
		// Its updater reads only the user's global config, not the
		// managed file: the variable is what turns it off.
		Env: []string{"OPENCODE_DISABLE_AUTOUPDATE=1"},
		// The managed directory moves with a test variable, and --pure's
		// variable drops every external plugin, cco's guard among them;
		// OPENCODE_TEST_HOME moves the home.
		RefusedEnv: []string{"OPENCODE_TEST_MANAGED_CONFIG_DIR", "OPENCODE_PURE", "OPENCODE_TEST_HOME"},
		// Its switches (AGENTS-MORE.md, the names in its binary): models
		// fetch, LSP download, share, default plugins, ~/.claude scanning,
		// external skills.
		SettingsEnv: []string{"OPENCODE_DISABLE_*"},
		Upgrade:     "opencode",
		// The providers' keys it reads from the environment; a key also
		// another agent's (ANTHROPIC_API_KEY) passes into both jails.
		Credentials: []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY",
			"GROQ_API_KEY", "XAI_API_KEY", "DEEPSEEK_API_KEY", "MISTRAL_API_KEY", "OPENCODE_API_KEY"},
		Secrets: []string{".local/share/opencode/auth.json", ".local/share/opencode/mcp-auth.json",
			".local/share/opencode/opencode.db"},
		Egress: []string{
			"opencode.ai", "api.opencode.ai", "models.opencode.ai",
			"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "openrouter.ai",
		},
		Installers: Installers{
			HomeBins:   []string{".local/bin", ".npm-global/bin", ".opencode/bin"},
			HomeLinks:  [][2]string{{".opencode/bin/", "OpenCode's install script"}},
			HomeFiles:  [][2]string{{".opencode/bin/opencode", "OpenCode's install script"}},
			NPMPackage: "opencode-ai",
		},
		Policy: "opencode",
		// ChatGPT's loopback login (opencode auth login); the console
		// account's device code needs no port.
		LoginPorts:     []int{1455},
		LoginCommand:   "providers login",
		LoginState:     ".local/share/opencode/auth.json",
		subcommand:     opencodeSubcommand,
		LoginEndpoints: []string{"auth.openai.com", "opencode.ai", "api.opencode.ai"},
		Telemetry:      []string{"OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", `share: "disabled"`},
		rewrite:        opencodeArgs,
	},
	// Factory's Droid is a Bun-compiled binary from its platform package.
	"droid": {
		Name:   "droid",
		Binary: "/usr/libexec/cco/droid/current/droid",
		Login:  []string{".factory"},
		HomeReadOnly: []string{".factory/settings.json", ".factory/settings.local.json", ".factory/hooks.json",
			".factory/mcp.json", ".factory/commands/", ".factory/droids/", ".factory/plugins/"},
		WorkspaceReadOnly: []string{".factory/"},
		// The jail has no keyring service: the login goes to
		// ~/.factory/auth.v2.file.
		Env: []string{"FACTORY_DROID_AUTO_UPDATE_ENABLED=false", "FACTORY_DISABLE_KEYRING=1"},
		// These move the home and the org policy (the latter only when
		// /etc/factory/settings.json is absent).
		RefusedEnv:  []string{"FACTORY_HOME_OVERRIDE", "FACTORY_ORG_MANAGED_SETTINGS_LOCAL_PATH", "FACTORY_ORG_MANAGED_SETTINGS_URL"},
		Upgrade:     "droid",
		Credentials: []string{"FACTORY_API_KEY"},
		// Airgap mode (docs.factory.ai, enterprise network controls).
		SettingsEnv: []string{"FACTORY_AIRGAP_ENABLED"},
		Secrets:     []string{".factory/auth.v2.file", ".factory/auth.v2.key"},
		Egress:      []string{"api.factory.ai", "app.factory.ai", "relay.factory.ai", "api.eu.factory.ai", "app.eu.factory.ai"},
		Installers: Installers{
			HomeBins:   []string{".local/bin", ".npm-global/bin"},
			NPMPackage: "@factory/cli",
		},
		Policy: "droid",
		// Only its hook input carries these (Claude Code's does not).
		HookFields: []string{"CLAUDE_ENV_FILE", "message_id", "has_images"},
		// The device-code login through WorkOS: no loopback port.
		LoginEndpoints: []string{"api.workos.com", "auth.workos.com", "app.factory.ai", "api.factory.ai"},
		Telemetry:      []string{"FACTORY_AIRGAP_ENABLED=1"},
		rewrite:        droidArgs,
	},
	// Pi is a Node program with its dependency tree, installed under the
	// version's node_modules and run by the Node that pi.node names.
	"pi": {
		Name:        "pi",
		Binary:      "/usr/libexec/cco/pi/current/node_modules/@mariozechner/pi-coding-agent/dist/cli.js",
		Interpreter: "/usr/libexec/cco/pi/current/node",
		// ~/.pi holds only the agent directory.
		Login: []string{".pi/agent"},
		// extensions/ and tools/ run in-process; bin/ comes first on its
		// shell's PATH; settings.json names packages, npmCommand and the
		// shell; models.json's "!command" values run at start.
		HomeReadOnly: []string{".pi/agent/settings.json", ".pi/agent/models.json", ".pi/agent/extensions/",
			".pi/agent/tools/", ".pi/agent/bin/", ".pi/agent/git/"},
		WorkspaceReadOnly: []string{".pi/"},
		Env:               []string{"PI_SKIP_VERSION_CHECK=1"},
		// PI_PACKAGE_DIR moves the package it loads; PI_CODING_AGENT_DIR
		// moves the login state out of the jail's view.
		RefusedEnv:  []string{"PI_PACKAGE_DIR", "PI_CODING_AGENT_DIR"},
		Upgrade:     "pi",
		Credentials: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_OAUTH_TOKEN", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "GROQ_API_KEY", "XAI_API_KEY", "MISTRAL_API_KEY"},
		// Its telemetry and offline switches (its README, "Environment").
		SettingsEnv: []string{"PI_TELEMETRY", "PI_OFFLINE"},
		Secrets:     []string{".pi/agent/auth.json"},
		Egress: []string{
			"api.anthropic.com", "api.openai.com", "chatgpt.com", "generativelanguage.googleapis.com", "openrouter.ai",
			"api.individual.githubcopilot.com",
		},
		Installers: Installers{
			HomeBins:   []string{".local/bin", ".npm-global/bin"},
			NPMPackage: "@mariozechner/pi-coding-agent",
		},
		// /login: Claude Pro/Max on 53692 and ChatGPT on 1455 (loopback
		// callbacks), GitHub Copilot by device code.
		// The login is /login in the TUI, no subcommand: a first run
		// (no auth.json yet) carries the ports in.
		LoginPorts:     []int{53692, 1455},
		LoginState:     ".pi/agent/auth.json",
		LoginEndpoints: []string{"claude.ai", "platform.claude.com", "console.anthropic.com", "auth.openai.com", "github.com"},
		Telemetry:      []string{"PI_TELEMETRY=0", "PI_OFFLINE=1", "enableInstallTelemetry: false"},
		rewrite:        piArgs,
	},
	// GitHub Copilot CLI is a Node single-executable from its platform
	// package. On first start it unpacks its JavaScript into
	// ~/.cache/copilot (the jail's in-memory cache).
	"copilot": {
		Name:   "copilot",
		Binary: "/usr/libexec/cco/copilot/current/copilot",
		Login:  []string{".copilot"},
		// pkg/ holds versions its loader runs in place of its own (an
		// update, or --prefer-version); the config files name hooks, MCP
		// and language servers.
		HomeReadOnly: []string{".copilot/settings.json", ".copilot/mcp-config.json", ".copilot/lsp-config.json",
			".copilot/pkg/", ".copilot/installed-plugins/"},
		WorkspaceReadOnly: []string{".github/hooks/", ".github/copilot/", ".github/mcp.json", ".github/lsp.json", ".mcp.json"},
		Env:               []string{"COPILOT_AUTO_UPDATE=false"},
		// COPILOT_ALLOW_ALL=true trusts the workspace, and with it the
		// workspace's hooks (the prompt-mode variables trust its MCP servers
		// and extensions); the test variable moves the managed file; the
		// others run another copy of its JavaScript or move its home.
		RefusedEnv: []string{"COPILOT_ALLOW_ALL", "GITHUB_COPILOT_PROMPT_MODE_WORKSPACE_MCP", "GITHUB_COPILOT_PROMPT_MODE_EXTENSIONS",
			"COPILOT_TEST_MANAGED_SETTINGS_FILE_PATH", "COPILOT_CLI_DIST_DIR", "COPILOT_PKG_CACHE_HOME", "COPILOT_CACHE_HOME", "COPILOT_HOME"},
		Upgrade:     "copilot",
		Credentials: []string{"COPILOT_GITHUB_TOKEN", "COPILOT_PROVIDER_API_KEY"},
		ProviderEnv: []string{"COPILOT_PROVIDER_BASE_URL", "COPILOT_PROVIDER_TYPE", "COPILOT_MODEL", "COPILOT_OFFLINE", "COPILOT_GH_HOST"},
		Secrets:     []string{".copilot/config.json"},
		// config.json holds the login and the trusted folders, whose
		// hooks, MCP servers and plugins load unasked; 1.0.102 migrates
		// trusted_folders to trustedFolders.
		Trust: []TrustList{{File: ".copilot/config.json", Keys: []string{"trustedFolders", "trusted_folders"}}},
		Egress: []string{
			"api.githubcopilot.com", "api.individual.githubcopilot.com", "api.business.githubcopilot.com",
			"api.enterprise.githubcopilot.com",
		},
		Installers: Installers{
			HomeBins:   []string{".local/bin", ".npm-global/bin"},
			HomeFiles:  [][2]string{{".local/bin/copilot", "Copilot CLI's install script (gh.io/copilot-install)"}},
			NPMPackage: "@github/copilot",
		},
		// The device flow: no loopback port.
		LoginEndpoints: []string{"github.com", "api.github.com"},
		Telemetry:      []string{"--disable-client-telemetry", "COPILOT_OFFLINE=true"},
		rewrite:        copilotArgs,
	},
}

// TrustList is one trust list of a profile: a home-relative JSON (or
// JSONC) file and its keys, dotted member paths with "*" for every member
// of an object.
type TrustList struct {
	File string
	Keys []string
}

// opencodeConfig are the entries of an OpenCode config directory dir
// (ending in "/") that name or hold what it runs: the config files, the
// directories it loads plugins, tools, commands, agents and modes from
// (each in its singular and plural spelling), and the package.json and
// node_modules that plugins import from. node_modules is a file entry: a
// missing one shows as a file, on which OpenCode's dependency install
// there fails at once (measured; an empty directory has it retry the
// registry for about 70 s offline first).
func opencodeConfig(dir string) []string {
	out := []string{dir + "opencode.json", dir + "opencode.jsonc", dir + "config.json", dir + "package.json", dir + "node_modules"}
	for _, d := range []string{"plugin", "tool", "command", "agent", "mode"} {
		out = append(out, dir+d+"/", dir+d+"s/")
	}
	return out
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

// OthersCredentials are the credential variables of every profile but p,
// less p's own: what p's jail must not carry. A provider's key that two
// agents read (ANTHROPIC_API_KEY) is each one's own.
func (p *Profile) OthersCredentials() []string {
	var out []string
	for _, o := range All() {
		if o == p {
			continue
		}
		for _, c := range o.Credentials {
			if !slices.Contains(p.Credentials, c) && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// RefusedEnv are the names no pass_env may carry into any jail: every
// profile's RefusedEnv, the names its Env sets and its ConfigDirEnv.
func RefusedEnv() []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for _, p := range All() {
		for _, kv := range p.Env {
			k, _, _ := strings.Cut(kv, "=")
			add(k)
		}
		add(p.ConfigDirEnv)
		for _, n := range p.RefusedEnv {
			add(n)
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

// WorkspaceScratch is every profile's WorkspaceScratch, in table order.
func WorkspaceScratch() []string {
	var out []string
	for _, n := range Names() {
		out = append(out, table[n].WorkspaceScratch...)
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

// ArgsEnv are the variables the jail sets for the arguments Args gave the
// agent (args are Args' answer).
func (p *Profile) ArgsEnv(args []string, o Options) []string {
	if p.argsEnv == nil {
		return nil
	}
	return p.argsEnv(args, o)
}

// Args rewrites the user's arguments for the jail: it strips the flags that
// would weaken or break the jail and injects the profile's own.
func (p *Profile) Args(user []string, o Options) []string {
	return p.rewrite(user, o)
}

// The clouds a profile's Clouds switch on.
const (
	// CloudAWS is Amazon Bedrock: the user's AWS profile's credentials.
	CloudAWS = "aws"
	// CloudGoogle is Vertex AI: the application default credentials file.
	CloudGoogle = "google"
)

// cloudEnv are the variables each cloud's credentials reach a jail in.
var cloudEnv = map[string][]string{
	CloudAWS:    {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"},
	CloudGoogle: {"GOOGLE_APPLICATION_CREDENTIALS"},
}

// CloudVars are the variables that carry cloud's credentials into a jail.
func CloudVars(cloud string) []string { return cloudEnv[cloud] }

// On reports whether a switch's value turns it on, as the vendors read
// theirs: 1, true, yes or on, in any case.
func On(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// Cloud lists the clouds whose switch is on in environ, sorted, each once.
func (p *Profile) Cloud(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if c, found := p.Clouds[k]; ok && found && On(v) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// CloudEnv are every variable p's cloud switches may have set in its jail:
// the verifier takes them for p's own there.
func (p *Profile) CloudEnv() []string {
	var out []string
	for _, c := range p.Clouds {
		for _, n := range cloudEnv[c] {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Setting reports whether k is one of p's settings variables that pass
// into its jail: it matches SettingsEnv by name or prefix, and is none of
// the names no jail takes from the host (RefusedEnv()), none of the
// variables p sets for its children, and no other agent's login.
func (p *Profile) Setting(k string) bool {
	if !p.settingMatch(k) {
		return false
	}
	if slices.Contains(RefusedEnv(), k) || slices.Contains(p.ChildEnv, k) {
		return false
	}
	return slices.Contains(p.Credentials, k) || !slices.Contains(p.OthersCredentials(), k)
}

func (p *Profile) settingMatch(k string) bool {
	for _, s := range p.SettingsEnv {
		if pre, ok := strings.CutSuffix(s, "*"); ok {
			if strings.HasPrefix(k, pre) && len(k) > len(pre) {
				return true
			}
		} else if s == k {
			return true
		}
	}
	return false
}

// SettingsRefused are the names p's SettingsEnv matches that never pass:
// the refused names and p's children's variables, sorted (the reference
// lists them beside the settings).
func (p *Profile) SettingsRefused() []string {
	var out []string
	for _, n := range append(RefusedEnv(), p.ChildEnv...) {
		if p.settingMatch(n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
