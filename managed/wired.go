package managed

import (
	"fmt"

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
