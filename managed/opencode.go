package managed

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"

	"github.com/tailscale/hujson"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
)

// OpenCode's managed config (a target-system path). OpenCode reads it as
// the last layer of its configuration; plugins from every layer are
// concatenated, so no other layer can remove the one it lists.
const (
	OpencodeConfigDir  = "/etc/opencode"
	OpencodeConfigPath = OpencodeConfigDir + "/opencode.json"
)

// opencodeName is the profile whose policy this file handles.
const opencodeName = "opencode"

func init() { register(opencodeName, opencodePolicy{}) }

// opencodePolicy is OpenCode's handler: the guard's plugin file, which is
// cco's alone, and the managed opencode.json that lists it, owned or
// refused like Codex's requirements.toml.
type opencodePolicy struct{}

func (opencodePolicy) steps(cfg Config) []provision.Step {
	return []provision.Step{newOpencodePluginStep(), newOpencodeConfigStep(cfg)}
}

func (opencodePolicy) foreignFile() string { return OpencodeConfigPath }

func (opencodePolicy) wired(root *provision.Root, rc *provision.Receipt) Wiring {
	return opencodeWiring(root, rc)
}

// opencodeConfig is the part of OpenCode's config format cco writes and
// reads.
type opencodeConfig struct {
	Schema     string   `json:"$schema,omitempty"`
	Plugin     []string `json:"plugin,omitempty"`
	Autoupdate *bool    `json:"autoupdate,omitempty"`
}

// OpencodeConfig is the managed config cco writes: the guard's plugin and
// the updater off (OpenCode installed by cco is updated by cco-install;
// its updater reads the user's config, so the jail's variable is what
// turns it off, and this says the same to any other reader).
func OpencodeConfig() []byte {
	off := false
	return marshalJSON(opencodeConfig{Schema: "https://opencode.ai/config.json", Plugin: []string{guard.OpencodePluginURL}, Autoupdate: &off})
}

// newOpencodePluginStep installs the plugin: root-owned 0644, readable by
// every user; OpenCode imports it from there.
func newOpencodePluginStep() *provision.File {
	return &provision.File{
		StepID: "policy.opencode.plugin", StepName: "install cco's guard plugin for OpenCode",
		Path: guard.OpencodePluginPath, Mode: 0o644, UID: provision.SystemUID(), GID: provision.SystemGID(),
		Content: guard.OpencodePlugin(),
		Fix:     "move it away; cco's guard plugin must be at " + guard.OpencodePluginPath + " for " + OpencodeConfigPath + " to load it",
	}
}

func newOpencodeConfigStep(cfg Config) *ownedStep {
	return &ownedStep{
		file:      policyFile("policy.opencode", "write OpenCode's managed opencode.json with cco's guard plugin", OpencodeConfigPath, OpencodeConfig()),
		agent:     opencodeName,
		policy:    cfg.foreign(opencodeName),
		what:      "list cco's guard plugin",
		done:      "guard present",
		syntaxFix: "fix the JSON at that line (OpenCode refuses a config that does not parse), then run cco-install again",
		parse: func(path string, b []byte) (bool, string, error) {
			p, err := ParseOpencodePolicy(path, b)
			if err != nil {
				return false, opencodeSnippet(OpencodePolicy{}), err
			}
			return p.Plugin, opencodeSnippet(p), nil
		},
	}
}

// OpencodePolicy is what an OpenCode config file says about the guard.
type OpencodePolicy struct {
	Plugin bool // its plugin list names cco's plugin file
}

// ParseOpencodePolicy parses an OpenCode config, which may carry comments
// and trailing commas. A file that does not parse gives a *SyntaxError.
func ParseOpencodePolicy(path string, b []byte) (OpencodePolicy, error) {
	var p OpencodePolicy
	std, err := hujson.Standardize(b)
	if err != nil {
		return p, hujsonError(path, err)
	}
	var f struct {
		Plugin []json.RawMessage `json:"plugin"`
	}
	if err := json.Unmarshal(std, &f); err != nil {
		return p, jsonError(path, std, err)
	}
	for _, raw := range f.Plugin {
		// A plugin is a spec, or [spec, options].
		var spec string
		if json.Unmarshal(raw, &spec) != nil {
			var pair []json.RawMessage
			if json.Unmarshal(raw, &pair) != nil || len(pair) == 0 || json.Unmarshal(pair[0], &spec) != nil {
				continue
			}
		}
		if spec == guard.OpencodePluginURL || spec == guard.OpencodePluginPath {
			p.Plugin = true
		}
	}
	return p, nil
}

// opencodeSnippet is what to merge into a foreign config: the plugin entry.
func opencodeSnippet(OpencodePolicy) string {
	return string(marshalJSON(opencodeConfig{Plugin: []string{guard.OpencodePluginURL}}))
}

// opencodeWiring is OpenCode's status: the config lists the plugin, and
// the plugin file is cco's, byte for byte (OpenCode only logs a plugin
// that fails to load, and runs on without it).
func opencodeWiring(root *provision.Root, rc *provision.Receipt) Wiring {
	w, b, ok := readWiring(root, opencodeName, OpencodeConfigPath)
	if !ok {
		return w
	}
	p, err := ParseOpencodePolicy(OpencodeConfigPath, b)
	switch {
	case err != nil:
		w.State, w.Detail = Malformed, err.Error()
		w.Fix = "fix the JSON at that line, then run `sudo cco-install`"
		return w
	case !p.Plugin:
		w.notWired(rc)
		return w
	}
	plugin, err := root.ReadFile(guard.OpencodePluginPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.State, w.Path = Defeated, guard.OpencodePluginPath
		w.Detail = guard.OpencodePluginPath + " is missing: OpenCode logs the plugin it cannot load and runs without the guard"
		w.Fix = "run `sudo cco-install`"
	case err != nil:
		w.State, w.Path, w.Detail = Malformed, guard.OpencodePluginPath, err.Error()
		w.Fix = "make it readable, then run `sudo cco-install status` again"
	case !bytes.Equal(plugin, guard.OpencodePlugin()):
		w.State, w.Path = Defeated, guard.OpencodePluginPath
		w.Detail = guard.OpencodePluginPath + " is not cco's plugin any more: what OpenCode loads from it is not the guard"
		w.Fix = "run `sudo cco-install --force` (the edited file is kept under " + provision.StateDir + "/backups)"
	default:
		w.wired(root, rc)
	}
	return w
}
