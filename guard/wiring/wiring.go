// Package wiring installs the guard's scripts (Steps), reads the vendors'
// managed policy files (ClaudeLayers, ParseCodexPolicy) and tells
// `cco-install status` whether that policy still wires the guard (Wired) and
// what has drifted (Drift). The hooks themselves are package guard's.
package wiring

import (
	"errors"
	"fmt"
	"github.com/cco-dev/cco/guard"
	"io/fs"
	"strings"

	"github.com/cco-dev/cco/provision"
)

// WireState says how an agent's policy wires the guard.
type WireState string

const (
	// WiredOurs: a policy file cco wrote (and nobody edited) wires the guard.
	WiredOurs WireState = "ours"
	// WiredForeign: a file cco does not own wires the guard's commands.
	WiredForeign WireState = "foreign-with-guard"
	// NotWiredForeign: policy files exist, but none wires the guard.
	NotWiredForeign WireState = "foreign-without"
	// NotWiredMissing: no policy file at all.
	NotWiredMissing WireState = "missing"
	// Defeated: the guard is wired, but another setting turns hooks off.
	Defeated WireState = "defeated"
	// Malformed: the file that should wire the guard does not parse.
	Malformed WireState = "malformed"
)

// Wiring is one agent's answer for `cco-install status`.
type Wiring struct {
	Agent  string
	State  WireState
	Active bool   // the agent will run the guard
	Path   string // the file that decides
	Detail string
	Fix    string
}

// Wired reports, for each agent (both when agents is empty), whether the
// vendors' managed policy makes that agent run the guard.
func Wired(root *provision.Root, rc *provision.Receipt, agents []string) []Wiring {
	if len(agents) == 0 {
		agents = guard.Agents
	}
	var out []Wiring
	for _, a := range agents {
		switch a {
		case "claude":
			out = append(out, claudeWiring(root, rc))
		case "codex":
			out = append(out, codexWiring(root, rc))
		default:
			out = append(out, Wiring{Agent: a, State: NotWiredMissing, Detail: fmt.Sprintf("cco has no guard policy for an agent named %q", a), Fix: "name claude or codex"})
		}
	}
	return out
}

// owned reports whether cco wrote target and its bytes are unchanged.
func owned(root *provision.Root, rc *provision.Receipt, target string) bool {
	e := rc.Paths[target]
	if e == nil || e.Kind != provision.KindFile {
		return false
	}
	sum, err := provision.HashFile(root, target)
	return err == nil && sum == e.SHA256
}

func claudeWiring(root *provision.Root, rc *provision.Receipt) Wiring {
	w := Wiring{Agent: "claude"}
	layers := ClaudeLayers(root)
	if len(layers) == 0 {
		w.State, w.Path = NotWiredMissing, ClaudeDropin
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
		w.State, w.Path = NotWiredForeign, ClaudeDropin
		w.Detail = "no Claude Code managed settings file wires the prompt gate " + guard.PromptGateScript
		for _, l := range layers {
			if l.Path == ClaudeDropin && l.Err != nil {
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

func codexWiring(root *provision.Root, rc *provision.Receipt) Wiring {
	w := Wiring{Agent: "codex", Path: CodexRequirements}
	b, err := root.ReadFile(CodexRequirements)
	if errors.Is(err, fs.ErrNotExist) {
		w.State = NotWiredMissing
		w.Detail = CodexRequirements + " does not exist, so codex runs no guard"
		w.Fix = "run `sudo cco-install`"
		return w
	}
	if err != nil {
		w.State, w.Detail, w.Fix = Malformed, err.Error(), "make it readable, then run `sudo cco-install status` again"
		return w
	}
	p, err := ParseCodexPolicy(CodexRequirements, b)
	switch {
	case err != nil:
		w.State, w.Detail = Malformed, err.Error()
		w.Fix = "fix the TOML syntax at that line, then run `sudo cco-install`"
	case !p.Wires():
		w.State = NotWiredForeign
		w.Detail = CodexRequirements + " does not wire cco's guard hooks"
		w.Fix = "merge the snippet that `sudo cco-install` prints into it"
		if rc.Paths[CodexRequirements] != nil {
			w.Detail = CodexRequirements + " was cco's and was edited: it no longer wires the guard"
			w.Fix = "run `sudo cco-install --force` (the edited file is kept under " + provision.StateDir + "/backups)"
		}
	case p.FeatureHooks != nil && !*p.FeatureHooks:
		w.State = Defeated
		w.Detail = CodexRequirements + " sets [features] hooks = false, which turns the guard hooks off"
		w.Fix = "set hooks = true in its [features] table"
	default:
		w.Active = true
		if owned(root, rc, CodexRequirements) {
			w.State, w.Detail = WiredOurs, CodexRequirements+" (cco's) wires the guard"
		} else {
			w.State, w.Detail = WiredForeign, "guard present (foreign file "+CodexRequirements+")"
		}
	}
	return w
}
