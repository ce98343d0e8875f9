// Package managed writes the vendors' admin policy files that make every
// agent run cco's guard: Claude Code's managed settings drop-in and Codex's
// requirements.toml and managed_config.toml.
//
// Owned-or-refuse: a file is written only where cco owns it (absent, or
// recorded in the receipt with the bytes cco wrote). A file someone else
// wrote is never modified; it is read, and the report says whether it
// already wires the guard or carries the snippet to merge by hand.
package managed

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
)

// Values of Config.ClaudeManagedFile and Config.CodexForeignPolicy.
const (
	ClaudeDropin    = "dropin"
	ClaudeBase      = "base"
	ForeignConflict = "conflict"
	ForeignWarn     = "warn"
)

// Config selects how the policy files are written. The installer maps
// claude.managed_file and codex.foreign_policy onto it.
type Config struct {
	// ClaudeManagedFile is "dropin" (the default: our own file in
	// managed-settings.d) or "base" (the legacy managed-settings.json, written
	// only when it is absent or cco's).
	ClaudeManagedFile string
	// CodexForeignPolicy is what a foreign Codex policy file without the
	// guard is: "conflict" (the default, exit 3) or "warn" (skipped, with a
	// warning: the site's own policy is deliberate).
	CodexForeignPolicy string
	// Agents are the agents to write policy for ("claude", "codex"); an
	// agent not listed gets no step.
	Agents []string
}

// Marker is the first line of every TOML file cco writes. Ownership is the
// receipt's; the marker tells a person (and a lost receipt's operator) whose
// file it is.
const Marker = "# Managed by cco (cco-install). Edits are reported by `cco-install status`; do not edit."

// Validate checks the config and names the key and the fix for a bad value.
func (c Config) Validate() error {
	switch c.ClaudeManagedFile {
	case "", ClaudeDropin, ClaudeBase:
	default:
		return fmt.Errorf("claude.managed_file = %q is not valid: use %q (the default) or %q", c.ClaudeManagedFile, ClaudeDropin, ClaudeBase)
	}
	switch c.CodexForeignPolicy {
	case "", ForeignConflict, ForeignWarn:
	default:
		return fmt.Errorf("codex.foreign_policy = %q is not valid: use %q (the default) or %q", c.CodexForeignPolicy, ForeignConflict, ForeignWarn)
	}
	for _, a := range c.Agents {
		if a != "claude" && a != "codex" {
			return fmt.Errorf("agent %q has no managed policy: use claude or codex", a)
		}
	}
	return nil
}

func (c Config) has(agent string) bool {
	for _, a := range c.Agents {
		if a == agent {
			return true
		}
	}
	return false
}

// Steps are the policy steps for the agents in cfg.Agents, with ids
// policy.claude, policy.codex.requirements and policy.codex.managed-config.
// A bad config gives one failing step that names the problem and writes
// nothing.
func Steps(cfg Config) []provision.Step {
	if err := cfg.Validate(); err != nil {
		return []provision.Step{&failStep{id: "policy.config", err: err}}
	}
	var steps []provision.Step
	if cfg.has("claude") {
		steps = append(steps, newClaudeStep(cfg))
	}
	if cfg.has("codex") {
		steps = append(steps, newRequirementsStep(cfg), newManagedConfigStep(cfg))
	}
	return steps
}

// failStep reports a configuration error as a failed step.
type failStep struct {
	id  string
	err error
}

func (s *failStep) ID() string   { return s.id }
func (s *failStep) Name() string { return "check the managed policy configuration" }
func (s *failStep) Check(*provision.Run) (provision.Check, error) {
	return provision.Check{}, s.err
}
func (s *failStep) Apply(*provision.Run, provision.Check) (string, error) { return "", s.err }

// hookTimeout is the hooks' timeout in seconds. Both agents let a prompt
// through on a timeout, so it is generous; the gate answers in milliseconds.
const hookTimeout = 10

type claudeHandler struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int    `json:"timeout"`
}

type claudeGroup struct {
	Matcher string          `json:"matcher,omitempty"`
	Hooks   []claudeHandler `json:"hooks"`
}

// ClaudeSettings is the managed settings cco writes for Claude Code: the two
// guard hooks (UserPromptSubmit takes no matcher), the env that stops
// Claude Code from updating itself around the shadow, and
// enableAllProjectMcpServers = false: a workspace's .mcp.json is written
// freely in the jail, and this keeps an unwrapped launch from starting its
// servers on the host unasked (each still runs once the user approves it;
// ADR 43).
func ClaudeSettings() []byte {
	v := struct {
		Env                        map[string]string        `json:"env"`
		EnableAllProjectMcpServers bool                     `json:"enableAllProjectMcpServers"`
		Hooks                      map[string][]claudeGroup `json:"hooks"`
	}{
		Env: map[string]string{"DISABLE_AUTOUPDATER": "1", "DISABLE_UPDATES": "1"},
		Hooks: map[string][]claudeGroup{
			"SessionStart":     {{Matcher: "startup", Hooks: []claudeHandler{{"command", guard.Command(guard.HookSessionStart, "claude"), hookTimeout}}}},
			"UserPromptSubmit": {{Hooks: []claudeHandler{{"command", guard.Command(guard.HookPromptGate, "claude"), hookTimeout}}}},
		},
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // a fixed value always marshals
	}
	return append(b, '\n')
}

// codexHooks is the [[hooks.*]] part of requirements.toml, also the bulk of
// the snippet for a foreign file.
func codexHooks(start, gate bool) string {
	var b strings.Builder
	if start {
		fmt.Fprintf(&b, "[[hooks.SessionStart]]\nmatcher = \"startup\"\n[[hooks.SessionStart.hooks]]\ntype = \"command\"\ncommand = %q\ntimeout = %d\n",
			guard.Command(guard.HookSessionStart, "codex"), hookTimeout)
	}
	if start && gate {
		b.WriteString("\n")
	}
	if gate {
		fmt.Fprintf(&b, "[[hooks.UserPromptSubmit]]\n[[hooks.UserPromptSubmit.hooks]]\ntype = \"command\"\ncommand = %q\ntimeout = %d\n",
			guard.Command(guard.HookPromptGate, "codex"), hookTimeout)
	}
	return b.String()
}

// CodexRequirements is the requirements.toml cco writes. It pins
// features.hooks so that no lower layer (a user's or a project's
// config.toml) can switch the hooks off, and it sets no allowed_sandbox_modes
// or allowed_approval_policies: the wrapper needs danger-full-access
// (--dangerously-bypass-approvals-and-sandbox), since the jail is the sandbox.
func CodexRequirements() []byte {
	return []byte(Marker + "\n" +
		"# Makes codex run cco's guard; the jail, not codex's own sandbox, confines it.\n\n" +
		"[features]\nhooks = true\n\n" + codexHooks(true, true))
}

// CodexManagedConfig is the managed_config.toml cco writes: codex installed
// by cco is updated by cco-install, never by itself.
func CodexManagedConfig() []byte {
	return []byte(Marker + "\n" + "check_for_update_on_startup = false\n")
}
