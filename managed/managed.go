// Package managed writes and reads the vendors' admin policy files that make
// every agent run cco's guard. Each agent's profile names its handler
// (agent.Profile.Policy); a handler, in its own file, owns one file format's
// types and both directions: the steps that write the files, and the status
// read (Wired) that says whether the policy on disk still wires the guard.
//
// Owned-or-refuse: a file is written only where cco owns it (absent, or
// recorded in the receipt with the bytes cco wrote). A file someone else
// wrote is never modified; it is read, and the report says whether it
// already wires the guard or carries the snippet to merge by hand.
package managed

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
)

// Values of Config.ClaudeManagedFile and of Config.ForeignPolicy's entries.
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
	// ForeignPolicy is, per agent (the <agent>.foreign_policy key), what a
	// foreign policy file without the guard is: "conflict" (the default,
	// exit 3) or "warn" (skipped, with a warning: the site's own policy is
	// deliberate).
	ForeignPolicy map[string]string
	// Agents are the agents to write policy for (profile names); an agent
	// not listed gets no step.
	Agents []string
}

// handler is one policy file format's writer and reader.
type handler interface {
	// steps are the agent's policy steps.
	steps(cfg Config) []provision.Step
	// wired is the agent's status: does its policy wire the guard.
	wired(root *provision.Root, rc *provision.Receipt) Wiring
	// foreignFile names the files whose foreign copy the agent's
	// foreign_policy decides about; "" when a foreign file is always a
	// conflict (Claude Code's drop-in is cco's alone).
	foreignFile() string
}

// ForeignFile is, for an agent whose policy files are owned or refused, the
// files its <agent>.foreign_policy key is about; "" for others.
func ForeignFile(agent string) string {
	if h := handlerOf(agent); h != nil {
		return h.foreignFile()
	}
	return ""
}

// handlers are keyed by agent.Profile.Policy; each handler's file
// registers itself.
var handlers = map[string]handler{}

func register(name string, h handler) { handlers[name] = h }

// handlerOf is the handler of the agent's profile, or nil.
func handlerOf(name string) handler {
	p, ok := agent.Lookup(name)
	if !ok {
		return nil
	}
	return handlers[p.Policy]
}

// Marker is the first line of every TOML file cco writes. Ownership is the
// receipt's; the marker tells a person (and a lost receipt's operator) whose
// file it is.
const Marker = "# Managed by cco (cco-install). Edits are reported by `cco-install status`; do not edit."

// Validate checks the config and names the key and the fix for a bad value.
func (c Config) Validate() error {
	if err := validateClaudeManagedFile(c.ClaudeManagedFile); err != nil {
		return err
	}
	for _, a := range agent.Names() {
		if v := c.ForeignPolicy[a]; v != "" && ForeignFile(a) == "" {
			return fmt.Errorf("%s.foreign_policy: %s has no foreign policy file to decide about", a, a)
		}
		switch v := c.ForeignPolicy[a]; v {
		case "", ForeignConflict, ForeignWarn:
		default:
			return fmt.Errorf("%s.foreign_policy = %q is not valid: use %q (the default) or %q", a, v, ForeignConflict, ForeignWarn)
		}
	}
	for a := range c.ForeignPolicy {
		if !agent.Known(a) {
			return fmt.Errorf("a foreign policy for %q: no such agent (known: %s)", a, agent.List(agent.Names(), "and"))
		}
	}
	for _, a := range c.Agents {
		if p, ok := agent.Lookup(a); !ok || p.Policy != "" && handlerOf(a) == nil {
			return fmt.Errorf("agent %q has no managed policy: use %s", a, agent.List(agent.Names(), "or"))
		}
	}
	return nil
}

// foreign is the agent's foreign_policy, "conflict" when unset.
func (c Config) foreign(agent string) string {
	if v := c.ForeignPolicy[agent]; v != "" {
		return v
	}
	return ForeignConflict
}

// Steps are the policy steps for the agents in cfg.Agents, in table order
// (ids policy.<agent>...). A bad config gives one failing step that names
// the problem and writes nothing.
func Steps(cfg Config) []provision.Step {
	if err := cfg.Validate(); err != nil {
		return []provision.Step{&failStep{id: "policy.config", err: err}}
	}
	var steps []provision.Step
	for _, a := range agent.Names() {
		// An agent whose vendor has no admin layer for a hook (its
		// profile names no policy) is jail only.
		if h := handlerOf(a); h != nil && slices.Contains(cfg.Agents, a) {
			steps = append(steps, h.steps(cfg)...)
		}
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
func (s *failStep) Check(*provision.View) (provision.Check, error) {
	return provision.Check{}, s.err
}
func (s *failStep) Apply(*provision.Run, provision.Check) (string, error) { return "", s.err }

// hookTimeout is the hooks' timeout in seconds. Every agent lets a prompt
// through on a timeout, so it is generous; the gate answers in milliseconds.
const hookTimeout = 10

// hookHandler and hookGroup are the hook entries every vendor's format
// shares (Claude Code's and Gemini CLI's JSON, Codex's TOML): a group with
// an optional matcher, and its command handlers.
type hookHandler struct {
	Type    string `json:"type" toml:"type"`
	Command string `json:"command" toml:"command"`
	// Name labels the hook in Gemini CLI's /hooks list.
	Name    string `json:"name,omitempty" toml:"name"`
	Timeout int    `json:"timeout,omitempty" toml:"timeout"`
}

type hookGroup struct {
	Matcher *string       `json:"matcher,omitempty" toml:"matcher"`
	Hooks   []hookHandler `json:"hooks" toml:"hooks"`
}

// guardHandler is the command handler that runs hook's script for agent.
func guardHandler(hook, agent string, timeout int) hookHandler {
	return hookHandler{Type: "command", Command: guard.Command(hook, agent), Timeout: timeout}
}

// wiresHook reports whether some group runs our hook script for agent
// (startup: the group's matcher must match the startup source).
func wiresHook(groups []hookGroup, hook, agent string, startup bool) bool {
	for _, g := range groups {
		if startup && !matchesStartup(g.Matcher) {
			continue
		}
		for _, h := range g.Hooks {
			if (h.Type == "command" || h.Type == "") && IsGuardCommand(h.Command, hook, agent) {
				return true
			}
		}
	}
	return false
}

// marshalJSON is the indented JSON cco writes, with a final newline.
func marshalJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // a fixed value always marshals
	}
	return append(b, '\n')
}
