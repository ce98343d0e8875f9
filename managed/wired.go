package managed

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/cco-dev/cco/agent"
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
	// JailOnly: the vendor has no admin policy layer that can run a hook
	// (the profile names no policy): the agent has the jail and no guard.
	JailOnly WireState = "jail-only"
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

// Wired reports, for each agent (every known one when agents is empty),
// whether the vendor's managed policy makes that agent run the guard.
func Wired(root *provision.Root, rc *provision.Receipt, agents []string) []Wiring {
	if len(agents) == 0 {
		agents = agent.Names()
	}
	var out []Wiring
	for _, a := range agents {
		h := handlerOf(a)
		if p, ok := agent.Lookup(a); ok && p.Policy == "" {
			out = append(out, Wiring{Agent: a, State: JailOnly, Detail: a + " has no guard: its vendor has no admin policy layer that runs a hook, so it is confined by the jail alone (start it as " + a + ", which is cco's wrapper)"})
			continue
		}
		if h == nil {
			out = append(out, Wiring{Agent: a, State: NotWiredMissing, Detail: fmt.Sprintf("cco has no guard policy for an agent named %q", a), Fix: "name one of " + agent.List(agent.Names(), "or")})
			continue
		}
		out = append(out, h.wired(root, rc))
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

// readWiring reads an agent's one policy file for Wired. ok is false when the
// answer is already in w: the file is missing or unreadable.
func readWiring(root *provision.Root, agent, path string) (w Wiring, b []byte, ok bool) {
	w = Wiring{Agent: agent, Path: path}
	b, err := root.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		w.State = NotWiredMissing
		w.Detail = path + " does not exist, so " + agent + " runs no guard"
		w.Fix = "run `sudo cco-install`"
		return w, nil, false
	}
	if err != nil {
		w.State, w.Detail, w.Fix = Malformed, err.Error(), "make it readable, then run `sudo cco-install status` again"
		return w, nil, false
	}
	return w, b, true
}

// notWired is a file that does not wire the guard: a foreign file to merge
// the snippet into, or cco's own, edited.
func (w *Wiring) notWired(rc *provision.Receipt) {
	w.State = NotWiredForeign
	w.Detail = w.Path + " does not wire cco's guard hooks"
	w.Fix = "merge the snippet that `sudo cco-install` prints into it"
	if rc.Paths[w.Path] != nil {
		w.Detail = w.Path + " was cco's and was edited: it no longer wires the guard"
		w.Fix = "run `sudo cco-install --force` (the edited file is kept under " + provision.StateDir + "/backups)"
	}
}

// wired is a file that wires the guard: cco's, or a foreign one.
func (w *Wiring) wired(root *provision.Root, rc *provision.Receipt) {
	w.Active = true
	if owned(root, rc, w.Path) {
		w.State, w.Detail = WiredOurs, w.Path+" (cco's) wires the guard"
	} else {
		w.State, w.Detail = WiredForeign, "guard present (foreign file "+w.Path+")"
	}
}
