package managed

import (
	"encoding/json"

	"github.com/tailscale/hujson"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
)

// Droid's system-managed settings (a target-system path): the org layer,
// which the user's and the project's settings can extend and never
// override; hook lists from every layer are concatenated.
const (
	DroidSettingsDir  = "/etc/factory"
	DroidSettingsPath = DroidSettingsDir + "/settings.json"
)

// droidName is the profile whose policy this file handles.
const droidName = "droid"

func init() { register(droidName, droidPolicy{}) }

// droidPolicy is Droid's handler: the managed settings file, owned or
// refused like Codex's requirements.toml.
type droidPolicy struct{}

func (droidPolicy) steps(cfg Config) []provision.Step {
	return []provision.Step{newDroidStep(cfg)}
}

func (droidPolicy) foreignFile() string { return DroidSettingsPath }

func (droidPolicy) wired(root *provision.Root, rc *provision.Receipt) Wiring {
	return droidWiring(root, rc)
}

// Droid's hook events for the guard. UserPromptSubmit gates the prompt in
// the interactive TUI and on the stream-jsonrpc path; plain `droid exec`
// never runs it, so the gate also answers PreToolUse for every tool: an
// unwrapped droid exec reaches the model, but every tool call it makes is
// denied (exit 2).
const (
	droidStartEvent = "SessionStart"
	droidGateEvent  = "UserPromptSubmit"
	droidToolEvent  = "PreToolUse"
)

// droidAllTools is the PreToolUse matcher for every tool.
const droidAllTools = "*"

// droidSettings is the part of Droid's settings format cco writes and
// reads.
type droidSettings struct {
	Hooks             map[string][]hookGroup `json:"hooks,omitempty"`
	AutoUpdateEnabled *bool                  `json:"autoUpdateEnabled,omitempty"`
	HooksDisabled     *bool                  `json:"hooksDisabled,omitempty"`
}

// droidHooks are the guard's hooks that a file lacks.
func droidHooks(start, gate, tool bool) map[string][]hookGroup {
	h := map[string][]hookGroup{}
	if start {
		h[droidStartEvent] = []hookGroup{{Hooks: []hookHandler{guardHandler(guard.HookSessionStart, droidName, hookTimeout)}}}
	}
	if gate {
		h[droidGateEvent] = []hookGroup{{Hooks: []hookHandler{guardHandler(guard.HookPromptGate, droidName, hookTimeout)}}}
	}
	if tool {
		all := droidAllTools
		h[droidToolEvent] = []hookGroup{{Matcher: &all, Hooks: []hookHandler{guardHandler(guard.HookPromptGate, droidName, hookTimeout)}}}
	}
	return h
}

// DroidSettings is the managed settings file cco writes for Droid: the
// guard's SessionStart verifier, UserPromptSubmit gate and PreToolUse gate,
// and the auto-updater off (Droid installed by cco is updated by
// cco-install).
func DroidSettings() []byte {
	off := false
	return marshalJSON(droidSettings{Hooks: droidHooks(true, true, true), AutoUpdateEnabled: &off})
}

// DroidPolicy is what a Droid settings file says about the guard.
type DroidPolicy struct {
	SessionStart, PromptGate, ToolGate bool
	// AutoUpdate is autoUpdateEnabled, when set (unset: on).
	AutoUpdate *bool
	// HooksDisabled: the file turns hooks off.
	HooksDisabled bool
}

// Wires reports whether the file runs the guard's three hooks and leaves
// hooks on.
func (p DroidPolicy) Wires() bool {
	return p.SessionStart && p.PromptGate && p.ToolGate && !p.HooksDisabled
}

// ParseDroidPolicy parses a Droid settings file (comments and trailing
// commas allowed). A file that does not parse gives a *SyntaxError.
func ParseDroidPolicy(path string, b []byte) (DroidPolicy, error) {
	var p DroidPolicy
	std, err := hujson.Standardize(b)
	if err != nil {
		return p, hujsonError(path, err)
	}
	var f droidSettings
	if err := json.Unmarshal(std, &f); err != nil {
		return p, jsonError(path, std, err)
	}
	p.AutoUpdate = f.AutoUpdateEnabled
	p.HooksDisabled = f.HooksDisabled != nil && *f.HooksDisabled
	p.SessionStart = wiresHook(f.Hooks[droidStartEvent], guard.HookSessionStart, droidName, true)
	p.PromptGate = wiresHook(f.Hooks[droidGateEvent], guard.HookPromptGate, droidName, false)
	var every []hookGroup
	for _, g := range f.Hooks[droidToolEvent] {
		if g.Matcher != nil && (*g.Matcher == droidAllTools || *g.Matcher == ".*") {
			every = append(every, g)
		}
	}
	p.ToolGate = wiresHook(every, guard.HookPromptGate, droidName, false)
	return p, nil
}

// droidSnippet is the JSON to merge into a foreign settings file: only the
// keys it lacks.
func droidSnippet(p DroidPolicy) string {
	var s droidSettings
	if p.AutoUpdate == nil || *p.AutoUpdate {
		off := false
		s.AutoUpdateEnabled = &off
	}
	if p.HooksDisabled {
		f := false
		s.HooksDisabled = &f
	}
	if h := droidHooks(!p.SessionStart, !p.PromptGate, !p.ToolGate); len(h) > 0 {
		s.Hooks = h
	}
	return string(marshalJSON(s))
}

func newDroidStep(cfg Config) *ownedStep {
	return &ownedStep{
		file:      policyFile("policy.droid", "write Droid's managed settings with cco's guard hooks", DroidSettingsPath, DroidSettings()),
		agent:     droidName,
		policy:    cfg.foreign(droidName),
		what:      "wire cco's guard hooks and turn the auto-updater off",
		done:      "guard present",
		syntaxFix: "fix the JSON at that line, then run cco-install again",
		parse: func(path string, b []byte) (bool, string, error) {
			p, err := ParseDroidPolicy(path, b)
			if err != nil {
				return false, droidSnippet(DroidPolicy{}), err
			}
			return p.Wires() && p.AutoUpdate != nil && !*p.AutoUpdate, droidSnippet(p), nil
		},
	}
}

func droidWiring(root *provision.Root, rc *provision.Receipt) Wiring {
	w, b, ok := readWiring(root, droidName, DroidSettingsPath)
	if !ok {
		return w
	}
	p, err := ParseDroidPolicy(DroidSettingsPath, b)
	switch {
	case err != nil:
		w.State, w.Detail = Malformed, err.Error()
		w.Fix = "fix the JSON at that line, then run `sudo cco-install`"
	case !p.SessionStart || !p.PromptGate || !p.ToolGate:
		w.notWired(rc)
	case p.HooksDisabled:
		w.State = Defeated
		w.Detail = DroidSettingsPath + " sets hooksDisabled: true, which turns every hook off, cco's guard among them"
		w.Fix = "remove hooksDisabled from it"
	default:
		w.wired(root, rc)
	}
	return w
}
