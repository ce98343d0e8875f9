// Package guard holds the agents' SessionStart verifier and UserPromptSubmit
// gate, which the vendors' managed policy makes every agent run.
package guard

import (
	"fmt"
	"io"
)

// Run answers one hook invocation ("session-start" or "prompt-gate") for the
// agent that called it; it returns the process's exit code. The gate fails
// closed: any error blocks (exit 2 with a reason on stderr).
func Run(hook string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "cco guard: not built yet; blocking")
	return 2
}
