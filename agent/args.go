package agent

import (
	"regexp"
	"strings"
	"sync"
)

// claudeArgs injects --no-chrome (the browser bridge reaches outside the
// jail) and, when sandbox.toml asks, --dangerously-skip-permissions; it strips
// --chrome. Claude's options are global, so the injected flags go first,
// where every subcommand accepts them. Nothing after "--" is touched.
func claudeArgs(user []string, o Options) []string {
	// A lone version request is answered before Claude Code loads
	// anything (its fast path), and only while it is the one argument:
	// nothing is injected, since nothing would run.
	if len(user) == 1 && claudeVersionFlags[user[0]] {
		return []string{user[0]}
	}
	out := make([]string, 0, len(user)+2)
	out = append(out, "--no-chrome")
	if o.SkipPermissions {
		out = append(out, "--dangerously-skip-permissions")
	}
	for i, a := range user {
		if a == "--" {
			return append(out, user[i:]...)
		}
		if a == "--chrome" || strings.HasPrefix(a, "--chrome=") || a == "--no-chrome" {
			continue
		}
		if o.SkipPermissions && a == "--dangerously-skip-permissions" {
			continue
		}
		out = append(out, a)
	}
	return out
}

// claudeSandboxEnv tells Claude Code that it runs in a sandbox: as root it
// refuses --dangerously-skip-permissions without it ("cannot be used with
// root/sudo privileges for security reasons").
const claudeSandboxEnv = "IS_SANDBOX"

// claudeArgsEnv sets IS_SANDBOX=1 where the jail is that sandbox: the
// shadow gave claude --dangerously-skip-permissions (claude_skip_permissions)
// and the session is uid 0 in the jail. Nowhere else: a user's jail keeps
// Claude Code's own check, and a root session without the flag needs none.
func claudeArgsEnv(args []string, o Options) []string {
	if !o.SkipPermissions || !o.Root {
		return nil
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--dangerously-skip-permissions" {
			return []string{claudeSandboxEnv + "=1"}
		}
	}
	return nil
}

// claudeVersionFlags are Claude Code's version flags.
var claudeVersionFlags = map[string]bool{"--version": true, "-v": true, "-V": true}

// codexBypass turns Codex's own sandbox off: inside the jail its bundled
// bwrap cannot work, and the jail is the boundary.
const codexBypass = "--dangerously-bypass-approvals-and-sandbox"

// codexValueFlags take a value in the next argument unless written with "="
// (or glued, for short flags). Knowing them keeps a value such as
// `-m -s` from being mistaken for a flag or a subcommand.
var codexValueFlags = map[string]bool{
	"-c": true, "--config": true, "--enable": true, "--disable": true,
	"-i": true, "--image": true, "-m": true, "--model": true,
	"-p": true, "--profile": true, "-s": true, "--sandbox": true,
	"-a": true, "--ask-for-approval": true, "-C": true, "--cd": true,
	"--add-dir": true, "--local-provider": true, "--remote": true,
	"--remote-auth-token-env": true, "--output-schema": true, "--color": true,
	"-o": true, "--output-last-message": true,
}

// codexAgentCommands run an agent loop and take the bypass flag after their
// own name; for the plain TUI it goes first. Other subcommands (login, mcp,
// app-server, completion, ...) do not accept it and get nothing.
var codexAgentCommands = map[string]bool{
	"exec": true, "e": true, "resume": true, "fork": true, "review": true, "agents": true,
}

// codexPolicyKey matches a -c/--config override that sets sandbox_mode or
// approval_policy in any TOML spelling: bare, quoted, dotted
// (profiles.x.sandbox_mode) or inside an inline table.
// It is compiled on first use: most launches have no -c, and a compile at
// start-up is paid by every launch.
var codexPolicyKey = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(^|[.{,\s"'])(sandbox_mode|approval_policy)["']?\s*(=|$)`)
})

// codexArgs strips every flag that re-enables Codex's own sandbox or
// approvals (-s/--sandbox, -a/--ask-for-approval, --full-auto, which in
// `codex exec` wins over the bypass, and -c/--config overrides of
// sandbox_mode or approval_policy) in every spelling, and injects the bypass
// once where the subcommand accepts it.
func codexArgs(user []string, _ Options) []string {
	out := make([]string, 0, len(user)+1)
	inject := 0 // index in out where the bypass goes; -1 once placed or not wanted
	sub := false
	for i := 0; i < len(user); i++ {
		a := user[i]
		if a == "--" {
			out = append(out, user[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
			if !sub {
				sub = true
				if codexAgentCommands[a] {
					inject = len(out)
				} else if isCodexSubcommand(a) {
					inject = -1
				}
				// Anything else is the prompt of the plain TUI: keep inject=0.
			}
			continue
		}
		name, val, hasVal := splitFlag(a)
		switch name {
		case codexBypass, "--yolo", "--full-auto":
			continue
		case "-s", "--sandbox", "-a", "--ask-for-approval":
			if !hasVal && takesNext(user, i) {
				i++
			}
			continue
		case "-c", "--config":
			if !hasVal {
				if !takesNext(user, i) {
					out = append(out, a)
					continue
				}
				i++
				val = user[i]
				if codexPolicyKey().MatchString(val) {
					continue
				}
				out = append(out, a, val)
				continue
			}
			if codexPolicyKey().MatchString(val) {
				continue
			}
			out = append(out, a)
			continue
		}
		out = append(out, a)
		if codexValueFlags[name] && !hasVal && takesNext(user, i) {
			i++
			out = append(out, user[i])
		}
	}
	if inject < 0 {
		return out
	}
	out = append(out, "")
	copy(out[inject+1:], out[inject:])
	out[inject] = codexBypass
	return out
}

// codexSubcommand is the first argument that is neither an option nor an
// option's value: the subcommand, or the plain TUI's prompt.
func codexSubcommand(user []string) string {
	for i := 0; i < len(user); i++ {
		a := user[i]
		if a == "--" {
			return ""
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return a
		}
		if name, _, hasVal := splitFlag(a); codexValueFlags[name] && !hasVal && takesNext(user, i) {
			i++
		}
	}
	return ""
}

// takesNext reports whether the flag at user[i] can take the next argument
// as its value. "--" is never a value: it ends the flags, and what follows
// it is the user's to keep untouched.
func takesNext(user []string, i int) bool {
	return i+1 < len(user) && user[i+1] != "--"
}

// isCodexSubcommand lists Codex's subcommands that are not agent loops.
func isCodexSubcommand(a string) bool {
	switch a {
	case "login", "logout", "mcp", "mcp-server", "app-server", "completion", "sandbox", "debug",
		"apply", "a", "cloud", "features", "help", "proto", "generate-ts", "responses-api-proxy",
		"stdio-to-uds", "execpolicy":
		return true
	}
	return false
}

// splitFlag separates a flag from an attached value: "--x=v", "-x=v" and
// the glued short form "-xv" (short flags are one letter).
func splitFlag(a string) (name, val string, hasVal bool) {
	if strings.HasPrefix(a, "--") {
		if n, v, ok := strings.Cut(a, "="); ok {
			return n, v, true
		}
		return a, "", false
	}
	if len(a) > 2 {
		v := a[2:]
		return a[:2], strings.TrimPrefix(v, "="), true
	}
	return a, "", false
}

// geminiArgs strips the flags that ask for Gemini CLI's own sandbox
// (-s, --sandbox, --sandbox=...; GEMINI_SANDBOX=false in the jail's env
// overrides them anyway, and a sandbox the jail cannot run is no use) and,
// for a headless run (-p/--prompt), injects --skip-trust: headless Gemini
// refuses an untrusted folder before any hook runs, and the jail confines
// what a workspace's settings run. An interactive run keeps Gemini's own
// trust dialog, as Claude Code's does. Nothing after "--" is touched.
func geminiArgs(user []string, _ Options) []string {
	out := make([]string, 0, len(user)+1)
	headless, trust := false, false
	for i := 0; i < len(user); i++ {
		a := user[i]
		if a == "--" {
			out = append(out, user[i:]...)
			break
		}
		name, _, hasVal := splitFlag(a)
		switch {
		case a == "-s" || name == "--sandbox":
			continue
		case name == "--skip-trust":
			trust = true
		case name == "-p" || name == "--prompt":
			headless = true
		}
		out = append(out, a)
		if geminiValueFlags[name] && !hasVal && takesNext(user, i) {
			i++
			out = append(out, user[i])
		}
	}
	if headless && !trust {
		out = append([]string{"--skip-trust"}, out...)
	}
	return out
}

// geminiValueFlags take a value in the next argument unless written with
// "=" (or glued, for short flags): a value such as `-p -s` is the prompt,
// not a flag. "--" is never a value (takesNext).
var geminiValueFlags = map[string]bool{
	"-m": true, "--model": true, "-p": true, "--prompt": true, "-i": true, "--prompt-interactive": true,
	"--approval-mode": true, "--policy": true, "--admin-policy": true, "--allowed-mcp-server-names": true,
	"--allowed-tools": true, "-e": true, "--extensions": true, "--session-file": true, "--session-id": true,
	"--include-directories": true, "-o": true, "--output-format": true,
}

// opencodeArgs strips --pure in every spelling: it drops every external
// plugin, cco's guard among them. OpenCode has no sandbox of its own, and
// its permission prompts stay (--auto is the user's, as claude's
// --dangerously-skip-permissions is). Nothing after "--" is touched.
func opencodeArgs(user []string, _ Options) []string {
	out := make([]string, 0, len(user))
	skip := false
	for i, a := range user {
		if a == "--" {
			return append(out, user[i:]...)
		}
		if name, _, hasVal := splitFlag(a); name == "--pure" || name == "--no-pure" {
			// yargs takes a following true or false as the flag's value.
			if !hasVal && i+1 < len(user) && (user[i+1] == "true" || user[i+1] == "false") {
				skip = true
			}
			continue
		}
		if skip {
			skip = false
			continue
		}
		out = append(out, a)
	}
	return out
}

// opencodeValueFlags are OpenCode's global options that take the next
// argument as their value.
var opencodeValueFlags = map[string]bool{
	"--log-level": true, "--port": true, "--hostname": true, "--mdns-domain": true, "--cors": true,
	"-m": true, "--model": true, "-s": true, "--session": true, "--prompt": true, "--agent": true,
	"--replay-limit": true,
}

// opencodeSubcommand names the command the user's arguments run: "providers
// login" for `opencode providers login` and its alias `opencode auth
// login`, else the first positional argument (a project directory for the
// TUI, or a subcommand).
func opencodeSubcommand(user []string) string {
	var pos []string
	for i := 0; i < len(user) && len(pos) < 2; i++ {
		a := user[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		if name, _, hasVal := splitFlag(a); opencodeValueFlags[name] && !hasVal && takesNext(user, i) {
			i++
		}
	}
	switch {
	case len(pos) == 0:
		return ""
	case (pos[0] == "providers" || pos[0] == "auth") && len(pos) > 1 && pos[1] == "login":
		return "providers login"
	}
	return pos[0]
}

// droidArgs keeps the user's arguments: Droid's own sandbox is a setting,
// off unless the user's settings turn it on, and its autonomy flags
// (--auto, --skip-permissions-unsafe) are the user's.
func droidArgs(user []string, _ Options) []string {
	return append(make([]string, 0, len(user)), user...)
}

// piArgs keeps the user's arguments: Pi has no sandbox and asks no
// permission.
func piArgs(user []string, _ Options) []string {
	return append(make([]string, 0, len(user)), user...)
}

// copilotArgs strips --prefer-version (with its value): it makes the loader
// run another version out of the package caches, ~/.copilot/pkg among
// them, instead of the installed one. Nothing after "--" is touched.
func copilotArgs(user []string, _ Options) []string {
	out := make([]string, 0, len(user))
	for i := 0; i < len(user); i++ {
		a := user[i]
		if a == "--" {
			return append(out, user[i:]...)
		}
		name, _, hasVal := splitFlag(a)
		if name == "--prefer-version" {
			if !hasVal && takesNext(user, i) {
				i++
			}
			continue
		}
		out = append(out, a)
		if copilotValueFlags[name] && !hasVal && takesNext(user, i) {
			i++
			out = append(out, user[i])
		}
	}
	return out
}

// copilotValueFlags take a value in the next argument unless written with
// "=": a prompt such as `-p --prefer-version` is the prompt.
var copilotValueFlags = map[string]bool{
	"-p": true, "--prompt": true, "-i": true, "--interactive": true, "--model": true, "--agent": true,
	"-n": true, "--name": true, "--session-id": true, "-C": true, "--log-dir": true, "--log-level": true,
	"--add-dir": true, "--attachment": true, "--reasoning-effort": true, "--context": true, "--auto-tier": true,
	"--stream": true, "--output-format": true, "--extension-sdk-path": true,
}
