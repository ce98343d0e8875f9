package managed

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/provision"
)

// Claude Code's managed settings files (target-system paths).
const (
	ClaudeBasePath   = "/etc/claude-code/managed-settings.json"
	ClaudeDropinDir  = "/etc/claude-code/managed-settings.d"
	ClaudeDropinPath = ClaudeDropinDir + "/50-cco.json"
)

// claudeName is the profile whose policy this file handles.
const claudeName = "claude"

func init() { register(claudeName, claudePolicy{}) }

// claudePolicy is Claude Code's handler: one step for the drop-in (or the
// base file), and the status read over every managed settings layer.
type claudePolicy struct{}

func (claudePolicy) steps(cfg Config) []provision.Step { return []provision.Step{newClaudeStep(cfg)} }

func (claudePolicy) foreignFile() string { return "" }

func (claudePolicy) wired(root *provision.Root, rc *provision.Receipt) Wiring {
	return claudeWiring(root, rc)
}

// claudeSettings is the part of Claude Code's settings file format that cco
// writes and reads.
type claudeSettings struct {
	Env                        map[string]any         `json:"env"`
	EnableAllProjectMcpServers *bool                  `json:"enableAllProjectMcpServers"`
	DisableAllHooks            *bool                  `json:"disableAllHooks,omitempty"`
	Hooks                      map[string][]hookGroup `json:"hooks"`
}

// ClaudeSettings is the managed settings cco writes for Claude Code: the two
// guard hooks (UserPromptSubmit takes no matcher), the env that stops
// Claude Code from updating itself around the shadow, and
// enableAllProjectMcpServers = false: a workspace's .mcp.json is written
// freely in the jail, and this keeps an unwrapped launch from starting its
// servers on the host unasked (each still runs once the user approves it;
// ADR 43).
func ClaudeSettings() []byte {
	startup, off := "startup", false
	return marshalJSON(claudeSettings{
		Env:                        map[string]any{"DISABLE_AUTOUPDATER": "1", "DISABLE_UPDATES": "1"},
		EnableAllProjectMcpServers: &off,
		Hooks: map[string][]hookGroup{
			"SessionStart":     {{Matcher: &startup, Hooks: []hookHandler{guardHandler(guard.HookSessionStart, claudeName, hookTimeout)}}},
			"UserPromptSubmit": {{Hooks: []hookHandler{guardHandler(guard.HookPromptGate, claudeName, hookTimeout)}}},
		},
	})
}

// claudeStep writes cco's Claude Code managed settings (the drop-in, or in
// the legacy mode the base file) and reads, never writes, every other
// managed settings file to report what would defeat the guard.
type claudeStep struct {
	file *provision.File
	base bool
}

func newClaudeStep(cfg Config) *claudeStep {
	s := &claudeStep{base: cfg.ClaudeManagedFile == ClaudeBase}
	f := &provision.File{
		StepID:   "policy.claude",
		StepName: "write Claude Code's managed settings drop-in with cco's guard hooks",
		Path:     ClaudeDropinPath,
		Mode:     0o644,
		UID:      provision.SystemUID(),
		GID:      provision.SystemGID(),
		Content:  ClaudeSettings(),
		Fix:      "move it away: cco owns " + ClaudeDropinPath + " entirely",
	}
	if s.base {
		f.StepName = "write Claude Code's managed-settings.json with cco's guard hooks"
		f.Path = ClaudeBasePath
		f.Fix = fmt.Sprintf("merge the snippet below into it by hand, or set claude.managed_file = %q (the default) so that cco writes its own drop-in instead", ClaudeDropin)
	}
	s.file = f
	return s
}

func (s *claudeStep) ID() string   { return s.file.StepID }
func (s *claudeStep) Name() string { return s.file.StepName }

func (s *claudeStep) Check(run *provision.View) (provision.Check, error) {
	c, err := s.file.Check(run)
	if err != nil {
		return c, err
	}
	if c.State == provision.Conflict && !c.Forceable && s.base {
		c.Snippet = string(ClaudeSettings())
	}
	c.Warnings = append(c.Warnings, s.defeats(run.Root)...)
	return c, nil
}

func (s *claudeStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	return s.file.Apply(run, c)
}

// defeats reads the other managed settings files in Claude Code's merge
// order and names those that would turn the guard off or replace our
// values: disableAllHooks (a scalar: the last file that sets it wins), an env
// key of ours or enableAllProjectMcpServers set differently by a file merged
// after ours, a file that does not parse.
func (s *claudeStep) defeats(root provision.FileReader) []string {
	ours := s.file.Path
	var warns []string
	var disable, mcp *ClaudeLayer
	layers := ClaudeLayers(root)
	for i := range layers {
		l := &layers[i]
		if l.Path == ours {
			continue
		}
		// The base file is merged first, then the drop-ins by name.
		after := l.Path != ClaudeBasePath && (s.base || path.Base(l.Path) > path.Base(ours))
		if l.Err != nil {
			warns = append(warns, fmt.Sprintf("%v: Claude Code cannot use it; fix it or move it away", l.Err))
			continue
		}
		if l.DisableAllHooks != nil {
			disable = l
		}
		if !after {
			continue
		}
		if l.EnableAllProjectMcpServers != nil {
			mcp = l
		}
		var keys []string
		for k := range l.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if (k == "DISABLE_AUTOUPDATER" || k == "DISABLE_UPDATES") && l.Env[k] != "1" {
				warns = append(warns, fmt.Sprintf("%s is merged after %s and sets env.%s = %q, replacing cco's \"1\": Claude Code may update itself around the shadow; remove that key", l.Path, ours, k, l.Env[k]))
			}
		}
	}
	if mcp != nil && *mcp.EnableAllProjectMcpServers {
		warns = append(warns, fmt.Sprintf("%s is merged after %s and sets enableAllProjectMcpServers: true, so an unwrapped claude starts the servers of any .mcp.json a session wrote, unasked; remove that key", mcp.Path, ours))
	}
	if disable != nil && *disable.DisableAllHooks {
		warns = append(warns, fmt.Sprintf("%s sets disableAllHooks: true, which turns off managed hooks too, so claude runs without cco's guard; remove that key", disable.Path))
	}
	return warns
}

// ClaudeLayer is what one Claude Code managed settings file says about the
// guard. Claude merges the base file and then the drop-ins in name order:
// hook arrays concatenate, so a later file cannot remove our hooks, but a
// scalar such as disableAllHooks, and each env key, is taken from the last
// file that sets it.
type ClaudeLayer struct {
	Path            string
	Err             error // the file does not parse (a *SyntaxError) or cannot be read
	SessionStart    bool  // it wires our verifier for startup
	PromptGate      bool  // it wires our gate
	DisableAllHooks *bool
	Env             map[string]string
	// EnableAllProjectMcpServers is the file's enableAllProjectMcpServers
	// (nil: unset), a scalar like disableAllHooks.
	EnableAllProjectMcpServers *bool
}

// ParseClaudeLayer reads one managed settings file's bytes.
func ParseClaudeLayer(path string, b []byte) ClaudeLayer {
	l := ClaudeLayer{Path: path}
	var f claudeSettings
	if err := json.Unmarshal(b, &f); err != nil {
		l.Err = jsonError(path, b, err)
		return l
	}
	l.DisableAllHooks = f.DisableAllHooks
	l.EnableAllProjectMcpServers = f.EnableAllProjectMcpServers
	if len(f.Env) > 0 {
		l.Env = map[string]string{}
		for k, v := range f.Env {
			l.Env[k] = fmt.Sprint(v)
		}
	}
	l.SessionStart = wiresHook(f.Hooks["SessionStart"], guard.HookSessionStart, claudeName, true)
	l.PromptGate = wiresHook(f.Hooks["UserPromptSubmit"], guard.HookPromptGate, claudeName, false)
	return l
}

// ClaudeLayers reads Claude Code's managed settings in merge order: the base
// file, then the drop-ins by name (hidden and non-.json files are ignored, as
// Claude Code ignores them). A missing file or directory is simply absent.
func ClaudeLayers(root provision.FileReader) []ClaudeLayer {
	var layers []ClaudeLayer
	read := func(p string) {
		b, err := root.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			layers = append(layers, ClaudeLayer{Path: p, Err: err})
		default:
			layers = append(layers, ParseClaudeLayer(p, b))
		}
	}
	read(ClaudeBasePath)
	for _, name := range dropins(root) {
		read(ClaudeDropinDir + "/" + name)
	}
	return layers
}

func dropins(root provision.FileReader) []string {
	d, err := root.Open(ClaudeDropinDir)
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var out []string
	for _, n := range names {
		if !strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".json") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func claudeWiring(root *provision.Root, rc *provision.Receipt) Wiring {
	w := Wiring{Agent: claudeName}
	layers := ClaudeLayers(root)
	if len(layers) == 0 {
		w.State, w.Path = NotWiredMissing, ClaudeDropinPath
		w.Detail = "no Claude Code managed settings exist, so claude runs no guard"
		w.Fix = "run `sudo cco-install`"
		return w
	}
	var gate, start *ClaudeLayer
	var broken []string
	var disable *ClaudeLayer
	for i := range layers {
		l := &layers[i]
		if l.Err != nil {
			broken = append(broken, l.Err.Error())
			continue
		}
		if l.PromptGate && (gate == nil || owned(root, rc, l.Path)) {
			gate = l
		}
		if l.SessionStart && start == nil {
			start = l
		}
		if l.DisableAllHooks != nil {
			disable = l // the last file that sets it wins
		}
	}
	switch {
	case gate == nil:
		w.State, w.Path = NotWiredForeign, ClaudeDropinPath
		w.Detail = "no Claude Code managed settings file wires the prompt gate " + guard.PromptGateScript
		for _, l := range layers {
			if l.Path == ClaudeDropinPath && l.Err != nil {
				w.State, w.Detail = Malformed, l.Err.Error()
			}
		}
		w.Fix = "run `sudo cco-install` (with --force if cco's drop-in was edited)"
	case disable != nil && *disable.DisableAllHooks:
		w.State, w.Path = Defeated, disable.Path
		w.Detail = disable.Path + " sets disableAllHooks: true, which turns off managed hooks too, cco's guard among them"
		w.Fix = "remove disableAllHooks from " + disable.Path
	default:
		w.Path, w.Active = gate.Path, true
		if owned(root, rc, gate.Path) {
			w.State, w.Detail = WiredOurs, gate.Path+" (cco's) wires the guard"
		} else {
			w.State, w.Detail = WiredForeign, "guard present (foreign file "+gate.Path+")"
		}
		if start == nil {
			w.Detail += "; no file wires the SessionStart verifier, so sessions start unverified"
		}
	}
	if len(broken) > 0 {
		w.Detail += "; " + strings.Join(broken, "; ")
	}
	return w
}

// validateClaudeManagedFile refuses a claude.managed_file that names
// neither file.
func validateClaudeManagedFile(v string) error {
	switch v {
	case "", ClaudeDropin, ClaudeBase:
		return nil
	}
	return fmt.Errorf("claude.managed_file = %q is not valid: use %q (the default) or %q", v, ClaudeDropin, ClaudeBase)
}
