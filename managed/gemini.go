package managed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"

	"github.com/tailscale/hujson"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
)

// Gemini CLI's system settings file (a target-system path). It overrides
// the user's and the workspace's settings.
const (
	GeminiSettingsDir  = "/etc/gemini-cli"
	GeminiSettingsPath = GeminiSettingsDir + "/settings.json"
)

// geminiName is the profile whose policy this file handles.
const geminiName = "gemini"

// geminiTimeout is the hooks' timeout: Gemini CLI counts milliseconds.
const geminiTimeout = hookTimeout * 1000

func init() { register(geminiName, geminiPolicy{}) }

// geminiPolicy is Gemini CLI's handler: the system settings file, owned or
// refused like Codex's requirements.toml, in a directory chain Gemini CLI
// accepts.
type geminiPolicy struct{}

func (geminiPolicy) steps(cfg Config) []provision.Step {
	return []provision.Step{newGeminiStep(cfg)}
}

func (geminiPolicy) foreignFile() string { return GeminiSettingsPath }

func (geminiPolicy) wired(root *provision.Root, rc *provision.Receipt) Wiring {
	return geminiWiring(root, rc)
}

// geminiSettings is the part of Gemini CLI's settings format that cco writes
// and reads.
type geminiSettings struct {
	General     *geminiGeneral         `json:"general,omitempty"`
	HooksConfig *geminiHooksConfig     `json:"hooksConfig,omitempty"`
	Hooks       map[string][]hookGroup `json:"hooks,omitempty"`
}

type geminiGeneral struct {
	EnableAutoUpdate             *bool `json:"enableAutoUpdate,omitempty"`
	EnableAutoUpdateNotification *bool `json:"enableAutoUpdateNotification,omitempty"`
}

type geminiHooksConfig struct {
	Enabled *bool `json:"enabled,omitempty"`
	// Disabled names hooks (by name, else command) that do not run; Gemini
	// CLI unions it over every settings file.
	Disabled []string `json:"disabled,omitempty"`
}

// Gemini CLI's hook events for the guard: BeforeAgent is its
// UserPromptSubmit, whose exit 2 blocks the prompt with stderr as the reason.
const (
	geminiStartEvent = "SessionStart"
	geminiGateEvent  = "BeforeAgent"
)

// geminiHooks are the guard's two hooks, named so that Gemini CLI's /hooks
// list says whose they are.
func geminiHooks(start, gate bool) map[string][]hookGroup {
	h := map[string][]hookGroup{}
	add := func(event, hook string) {
		g := guardHandler(hook, geminiName, geminiTimeout)
		g.Name = "cco-" + hook
		h[event] = []hookGroup{{Hooks: []hookHandler{g}}}
	}
	if start {
		add(geminiStartEvent, guard.HookSessionStart)
	}
	if gate {
		add(geminiGateEvent, guard.HookPromptGate)
	}
	return h
}

// GeminiSettings is the system settings file cco writes for Gemini CLI: the
// guard's SessionStart verifier and BeforeAgent gate with
// hooksConfig.enabled (the system file wins over the user's and the
// workspace's), and the auto-updater and its notice off: Gemini CLI
// installed by cco is updated by cco-install.
func GeminiSettings() []byte {
	off, on := false, true
	return marshalJSON(geminiSettings{
		General:     &geminiGeneral{EnableAutoUpdate: &off, EnableAutoUpdateNotification: &off},
		HooksConfig: &geminiHooksConfig{Enabled: &on},
		Hooks:       geminiHooks(true, true),
	})
}

// GeminiPolicy is what a Gemini CLI settings file says about the guard.
type GeminiPolicy struct {
	SessionStart bool // a SessionStart hook runs our verifier
	PromptGate   bool // a BeforeAgent hook runs our gate
	// HooksEnabled is hooksConfig.enabled, when set (unset: on).
	HooksEnabled *bool
	// AutoUpdate is general.enableAutoUpdate, when set (unset: on).
	AutoUpdate *bool
	// GateDisabled: hooksConfig.disabled names our gate.
	GateDisabled bool
}

// Wires reports whether the file runs both of our hooks and leaves hooks on.
func (p GeminiPolicy) Wires() bool {
	return p.SessionStart && p.PromptGate && (p.HooksEnabled == nil || *p.HooksEnabled) && !p.GateDisabled
}

// ParseGeminiPolicy parses a Gemini CLI settings file, which may carry
// comments and trailing commas as Gemini CLI allows. A file that does not
// parse gives a *SyntaxError with the line and column.
func ParseGeminiPolicy(path string, b []byte) (GeminiPolicy, error) {
	var p GeminiPolicy
	std, err := hujson.Standardize(b)
	if err != nil {
		return p, hujsonError(path, err)
	}
	var f geminiSettings
	// Standardize keeps every offset, so the errors' positions are the file's.
	if err := json.Unmarshal(std, &f); err != nil {
		return p, jsonError(path, std, err)
	}
	if f.HooksConfig != nil {
		p.HooksEnabled = f.HooksConfig.Enabled
		gate := guardHandler(guard.HookPromptGate, geminiName, 0)
		p.GateDisabled = slices.Contains(f.HooksConfig.Disabled, "cco-"+guard.HookPromptGate) || slices.Contains(f.HooksConfig.Disabled, gate.Command)
	}
	if f.General != nil {
		p.AutoUpdate = f.General.EnableAutoUpdate
	}
	p.SessionStart = wiresHook(f.Hooks[geminiStartEvent], guard.HookSessionStart, geminiName, false)
	p.PromptGate = wiresHook(f.Hooks[geminiGateEvent], guard.HookPromptGate, geminiName, false)
	return p, nil
}

// geminiSnippet is the JSON to merge into a foreign settings file: only the
// keys it lacks, as one object.
func geminiSnippet(p GeminiPolicy) string {
	var s geminiSettings
	if p.AutoUpdate == nil || *p.AutoUpdate {
		off := false
		s.General = &geminiGeneral{EnableAutoUpdate: &off}
	}
	if p.HooksEnabled != nil && !*p.HooksEnabled || p.GateDisabled {
		// A key already in the file is changed, not added: the snippet
		// shows the value it must have.
		on := true
		s.HooksConfig = &geminiHooksConfig{Enabled: &on}
	}
	if h := geminiHooks(!p.SessionStart, !p.PromptGate); len(h) > 0 {
		s.Hooks = h
	}
	return string(marshalJSON(s))
}

func newGeminiStep(cfg Config) *geminiStep {
	return &geminiStep{ownedStep{
		file:      policyFile("policy.gemini", "write Gemini CLI's system settings with cco's guard hooks", GeminiSettingsPath, GeminiSettings()),
		agent:     geminiName,
		policy:    cfg.foreign(geminiName),
		what:      "wire cco's guard hooks and turn the auto-updater off",
		done:      "guard present",
		syntaxFix: "fix the JSON at that line (Gemini CLI ignores a settings file that does not parse), then run cco-install again",
		parse: func(path string, b []byte) (bool, string, error) {
			p, err := ParseGeminiPolicy(path, b)
			if err != nil {
				return false, geminiSnippet(GeminiPolicy{}), err
			}
			return p.Wires() && p.AutoUpdate != nil && !*p.AutoUpdate, geminiSnippet(p), nil
		},
	}}
}

// geminiStep is the settings file's ownedStep, which first checks that
// Gemini CLI will read the file at all: it skips a system settings file
// when the file or a directory above it is not root's or is writable by
// group or others. cco creates /etc/gemini-cli 0755; one that someone made
// looser is a conflict, never chmod-ed.
type geminiStep struct{ ownedStep }

func (s *geminiStep) Check(run *provision.View) (provision.Check, error) {
	if why := insecureChain(run.Root, GeminiSettingsPath); why != "" {
		return provision.Check{
			State:  provision.Conflict,
			Paths:  []string{GeminiSettingsPath},
			Detail: why + ", so Gemini CLI would skip " + GeminiSettingsPath + " and run without cco's guard: left as it is",
			Fix:    "make it root's and not writable by group or others (sudo chown root:root <dir> && sudo chmod g-w,o-w <dir>), then run cco-install again",
		}, nil
	}
	return s.ownedStep.Check(run)
}

// insecureChain says why Gemini CLI would skip target: a directory above it
// (or target itself, when it exists) writable by group or others, or, on
// the host, not owned by root. A staged root (--root) is the invoker's, so
// there only the modes count. "" when the chain is sound.
func insecureChain(root provision.FileReader, target string) string {
	for p := target; ; p = path.Dir(p) {
		var fi fs.FileInfo
		var err error
		switch {
		case p != "/":
			fi, err = root.Lstat(p)
			if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				// A link's mode says nothing; Gemini CLI checks what it
				// names, which stays inside the root when opened through it.
				var f *os.File
				if f, err = root.Open(p); err == nil {
					fi, err = f.Stat()
					f.Close()
				}
			}
		case root.IsHost():
			fi, err = os.Stat("/")
		default:
			return "" // a staged root's own directory is the invoker's choice
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err.Error()
		case fi.Mode().Perm()&0o022 != 0:
			return fmt.Sprintf("%s is writable by group or others (mode %04o)", p, fi.Mode().Perm())
		case root.IsHost():
			if uid, ok := guard.Owner(fi); ok && uid != 0 {
				return fmt.Sprintf("%s is owned by uid %d, not root", p, uid)
			}
		}
		if p == "/" {
			return ""
		}
	}
}

func geminiWiring(root *provision.Root, rc *provision.Receipt) Wiring {
	w, b, ok := readWiring(root, geminiName, GeminiSettingsPath)
	if !ok {
		return w
	}
	p, err := ParseGeminiPolicy(GeminiSettingsPath, b)
	switch {
	case err != nil:
		w.State, w.Detail = Malformed, err.Error()
		w.Fix = "fix the JSON at that line, then run `sudo cco-install`"
	case !p.SessionStart || !p.PromptGate:
		w.notWired(rc)
	case p.GateDisabled:
		w.State = Defeated
		w.Detail = GeminiSettingsPath + " names cco's gate in hooksConfig.disabled, so it does not run"
		w.Fix = "remove it from hooksConfig.disabled"
	case !p.Wires():
		w.State = Defeated
		w.Detail = GeminiSettingsPath + " sets hooksConfig.enabled = false, which turns every hook off, cco's guard among them"
		w.Fix = "set hooksConfig.enabled to true in it"
	default:
		if why := insecureChain(root, GeminiSettingsPath); why != "" {
			w.State = Defeated
			w.Detail = why + ", so Gemini CLI skips " + GeminiSettingsPath
			w.Fix = "make it root's and not writable by group or others (chmod g-w,o-w)"
			return w
		}
		w.wired(root, rc)
	}
	return w
}
