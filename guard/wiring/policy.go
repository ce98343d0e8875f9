package wiring

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cco-dev/cco/guard"
	"io/fs"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/cco-dev/cco/provision"
)

// The vendors' managed policy files (target-system paths).
const (
	ClaudeBase         = "/etc/claude-code/managed-settings.json"
	ClaudeDropinDir    = "/etc/claude-code/managed-settings.d"
	ClaudeDropin       = ClaudeDropinDir + "/50-cco.json"
	CodexRequirements  = "/etc/codex/requirements.toml"
	CodexManagedConfig = "/etc/codex/managed_config.toml"
)

// SyntaxError is a policy file that does not parse, with the parser's line
// and column so an operator can go straight to it.
type SyntaxError struct {
	Path      string
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s does not parse: line %d, column %d: %s", e.Path, e.Line, e.Col, e.Msg)
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

type claudeHandler struct {
	Type    string `json:"type"`
	Command string `json:"command"`
}

type claudeGroup struct {
	Matcher *string         `json:"matcher"`
	Hooks   []claudeHandler `json:"hooks"`
}

type claudeFile struct {
	DisableAllHooks            *bool                    `json:"disableAllHooks"`
	EnableAllProjectMcpServers *bool                    `json:"enableAllProjectMcpServers"`
	Env                        map[string]any           `json:"env"`
	Hooks                      map[string][]claudeGroup `json:"hooks"`
}

// ParseClaudeLayer reads one managed settings file's bytes.
func ParseClaudeLayer(path string, b []byte) ClaudeLayer {
	l := ClaudeLayer{Path: path}
	var f claudeFile
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
	for _, g := range f.Hooks["SessionStart"] {
		if matchesStartup(g.Matcher) && anyCommand(g.Hooks, guard.HookSessionStart, "claude") {
			l.SessionStart = true
		}
	}
	for _, g := range f.Hooks["UserPromptSubmit"] {
		if anyCommand(g.Hooks, guard.HookPromptGate, "claude") {
			l.PromptGate = true
		}
	}
	return l
}

func anyCommand(hs []claudeHandler, hook, agent string) bool {
	for _, h := range hs {
		if (h.Type == "command" || h.Type == "") && IsGuardCommand(h.Command, hook, agent) {
			return true
		}
	}
	return false
}

// IsGuardCommand reports whether a hook command line runs our script for
// hook, with the agent's name or with none (the guard then infers it).
func IsGuardCommand(cmd, hook, agent string) bool {
	f := strings.Fields(cmd)
	if len(f) == 0 || len(f) > 2 {
		return false
	}
	if strings.Trim(f[0], `"'`) != guard.ScriptPath(hook) {
		return false
	}
	return len(f) == 1 || strings.Trim(f[1], `"'`) == agent
}

// matchesStartup: no matcher (or "*") matches every source; otherwise the
// matcher is a regular expression over the source name.
func matchesStartup(m *string) bool {
	if m == nil || *m == "" || *m == "*" {
		return true
	}
	re, err := regexp.Compile("^(?:" + *m + ")$")
	if err != nil {
		return *m == "startup"
	}
	return re.MatchString("startup")
}

func jsonError(path string, b []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(b, se.Offset)
		return &SyntaxError{Path: path, Line: line, Col: col, Msg: se.Error()}
	case errors.As(err, &te):
		line, col := lineCol(b, te.Offset)
		return &SyntaxError{Path: path, Line: line, Col: col, Msg: "the value of " + te.Field + " is a " + te.Value + ", not what Claude Code's settings schema expects"}
	}
	return fmt.Errorf("%s does not parse: %w", path, err)
}

func lineCol(b []byte, off int64) (int, int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	pre := b[:off]
	line := bytes.Count(pre, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(pre, '\n')
	if col < 1 {
		col = 1
	}
	return line, col
}

// ClaudeLayers reads Claude Code's managed settings in merge order: the base
// file, then the drop-ins by name (hidden and non-.json files are ignored, as
// Claude Code ignores them). A missing file or directory is simply absent.
func ClaudeLayers(root *provision.Root) []ClaudeLayer {
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
	read(ClaudeBase)
	for _, name := range dropins(root) {
		read(ClaudeDropinDir + "/" + name)
	}
	return layers
}

func dropins(root *provision.Root) []string {
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

// CodexPolicy is what a Codex requirements.toml or managed_config.toml says
// about the guard.
type CodexPolicy struct {
	SessionStart bool // [[hooks.SessionStart]] runs our verifier for startup
	PromptGate   bool // [[hooks.UserPromptSubmit]] runs our gate
	// Features is set when the file has a [features] table; FeatureHooks
	// when it sets features.hooks.
	Features     bool
	FeatureHooks *bool
	// CheckForUpdate is check_for_update_on_startup, when set.
	CheckForUpdate *bool
}

type codexHandler struct {
	Type    string `toml:"type"`
	Command string `toml:"command"`
}

type codexGroup struct {
	Matcher *string        `toml:"matcher"`
	Hooks   []codexHandler `toml:"hooks"`
}

type codexFile struct {
	Features       map[string]any          `toml:"features"`
	Hooks          map[string][]codexGroup `toml:"hooks"`
	CheckForUpdate *bool                   `toml:"check_for_update_on_startup"`
}

// ParseCodexPolicy parses a Codex policy file. A file that does not parse
// gives a *SyntaxError with the TOML parser's line and column.
func ParseCodexPolicy(path string, b []byte) (CodexPolicy, error) {
	var p CodexPolicy
	var f codexFile
	if _, err := toml.Decode(string(b), &f); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return p, &SyntaxError{Path: path, Line: pe.Position.Line, Col: pe.Position.Col, Msg: pe.Message}
		}
		return p, fmt.Errorf("%s does not parse: %w", path, err)
	}
	p.CheckForUpdate = f.CheckForUpdate
	if f.Features != nil {
		p.Features = true
		if v, ok := f.Features["hooks"].(bool); ok {
			p.FeatureHooks = &v
		}
	}
	for _, g := range f.Hooks["SessionStart"] {
		for _, h := range g.Hooks {
			if (h.Type == "command" || h.Type == "") && matchesStartup(g.Matcher) && IsGuardCommand(h.Command, guard.HookSessionStart, "codex") {
				p.SessionStart = true
			}
		}
	}
	for _, g := range f.Hooks["UserPromptSubmit"] {
		for _, h := range g.Hooks {
			if (h.Type == "command" || h.Type == "") && IsGuardCommand(h.Command, guard.HookPromptGate, "codex") {
				p.PromptGate = true
			}
		}
	}
	return p, nil
}

// Wires reports whether the file runs both of our hooks.
func (p CodexPolicy) Wires() bool { return p.SessionStart && p.PromptGate }
