// Package guard holds the agents' SessionStart verifier and UserPromptSubmit
// gate, which the vendors' managed policy makes every agent run, and the
// /bin/sh scripts that call them. Installing the scripts and telling
// `cco-install status` whether the policy still wires them is package
// guard/wiring's: the in-jail helper, which runs the hooks, links none of the
// installer's code.
//
// Inside a cco jail the gate lets prompts through and the verifier reports
// what it checked; outside one the gate blocks every prompt and names the fix.
// "Inside" is decided by sandbox.ProbeJail alone, never by anything the user
// or the agent can set.
package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/sandbox"
)

// Target-system paths of the guard.
const (
	// Dir holds the guard scripts: off PATH, root-owned, read-only in a jail.
	Dir = "/usr/libexec/cco/guard"
	// SessionStartScript is the SessionStart verifier's script.
	SessionStartScript = Dir + "/session-start"
	// PromptGateScript is the UserPromptSubmit gate's script.
	PromptGateScript = Dir + "/prompt-gate"
	// HelperPath is the shadow binary's helper name; the scripts run
	// `HelperPath guard <hook> <agent>`.
	HelperPath = "/usr/libexec/cco/sandbox-helper"
	// ShadowDir is where the shadow is installed under every agent's name.
	ShadowDir = "/usr/local/bin"
	// AllowUnwrappedPath is the operator's escape hatch: when this root-owned
	// file exists, the gate warns instead of blocking.
	AllowUnwrappedPath = "/etc/cco/allow-unwrapped"
)

// Hook names, as the scripts pass them to the helper.
const (
	HookSessionStart = "session-start"
	HookPromptGate   = "prompt-gate"
)

// maxInput bounds what the hook reads from stdin: a prompt may be large, but
// not unbounded.
const maxInput = 32 << 20

// Command is the hook command line a policy file names for hook and agent.
// The agent's name travels as an argument so that the guard answers in the
// form that agent understands; both agents run hook commands through a shell.
func Command(hook, agent string) string {
	return ScriptPath(hook) + " " + agent
}

// ScriptPath is the target-system path of hook's script.
func ScriptPath(hook string) string {
	return Dir + "/" + hook
}

// hookInput is the part of the agents' hook JSON that the guard uses. Every
// agent sends session_id, cwd and hook_event_name; the keys only one agent
// sends (its profile's HookFields) tell an argument-less call apart.
type hookInput struct {
	SessionID     string `json:"session_id"`
	HookEventName string `json:"hook_event_name"`
	Cwd           string `json:"cwd"`
	Source        string `json:"source"`
	Prompt        string `json:"prompt"`
}

// Test seams: where the guard looks. Production never changes them; no
// environment variable can.
var (
	probeJail = sandbox.ProbeJail
	sysRoot   = "/"
	hatchPath = AllowUnwrappedPath
)

// Run answers one hook invocation ("session-start" or "prompt-gate") for the
// agent named in args[0] (inferred from the input when absent); it returns
// the process's exit code. The gate fails closed: any error, even a panic,
// blocks (exit 2 with a reason on stderr), because both agents let a prompt
// through on any other failure.
func Run(hook string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	code := 2
	func() {
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(stderr, "cco guard: internal error (%v): blocking; run `sudo cco-install status` and report this\n", r)
				code = 2
			}
		}()
		code = run(hook, args, stdin, stdout, stderr)
	}()
	return code
}

func run(hook string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch hook {
	case HookPromptGate, HookSessionStart:
	default:
		fmt.Fprintf(stderr, "cco guard: unknown hook %q (want %s or %s): blocking; the policy file names the wrong command, run `sudo cco-install`\n", hook, HookSessionStart, HookPromptGate)
		return 2
	}
	in, agent, err := readInput(args, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "cco guard: %v: blocking; run `sudo cco-install status`\n", err)
		return 2
	}
	if hook == HookPromptGate {
		return gate(agent, stdout, stderr)
	}
	return verify(in, agent, stdout, stderr)
}

func readInput(args []string, stdin io.Reader) (hookInput, string, error) {
	var in hookInput
	if len(args) > 1 {
		return in, "", fmt.Errorf("too many arguments %q (want one agent name)", args)
	}
	if stdin == nil {
		return in, "", errors.New("no hook input on stdin")
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxInput+1))
	if err != nil {
		return in, "", fmt.Errorf("reading the hook input: %w", err)
	}
	if len(b) > maxInput {
		return in, "", fmt.Errorf("the hook input is larger than %d bytes", maxInput)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return in, "", fmt.Errorf("the hook input is not the JSON object the agents send (%v)", err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, "", fmt.Errorf("the hook input is not the JSON object the agents send (%v)", err)
	}
	name := ""
	if len(args) == 1 {
		name = args[0]
	} else {
		name = inferAgent(keys)
	}
	if !agent.Known(name) {
		return in, "", fmt.Errorf("unknown agent %q (want %s)", name, agent.List(agent.Names(), "or"))
	}
	return in, name, nil
}

// inferAgent names the agent whose HookFields the input carries, else the
// profile that has none.
func inferAgent(keys map[string]json.RawMessage) string {
	fallback := ""
	for _, p := range agent.All() {
		if len(p.HookFields) == 0 {
			if fallback == "" {
				fallback = p.Name
			}
			continue
		}
		for _, f := range p.HookFields {
			if v, ok := keys[f]; ok && string(v) != "null" && string(v) != `""` {
				return p.Name
			}
		}
	}
	return fallback
}

// systemMessage writes the JSON form every agent shows to the user.
func systemMessage(w io.Writer, msg string) {
	b, _ := json.Marshal(struct {
		SystemMessage string `json:"systemMessage"`
	}{msg})
	fmt.Fprintf(w, "%s\n", b)
}
