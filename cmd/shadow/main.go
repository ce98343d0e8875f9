// Command shadow is cco's wrapper, installed under each agent's name
// (/usr/local/bin/claude, /usr/local/bin/codex) and as the in-sandbox helper
// (/usr/libexec/cco/sandbox-helper); argv[0] picks the role. Under an agent's
// name it builds that agent's bubblewrap jail and supervises it; as the
// helper it runs inside the jail and refuses to run anywhere else.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/sandbox"
)

// Exit codes of refusals, as a shell reports them.
const (
	exitCannotRun = sandbox.ExitCannotRun // the jail cannot be built, or the role is unknown
	exitNotFound  = sandbox.ExitNotFound  // the vendor binary is missing
)

func main() {
	// Every message the shadow prints goes through the one printer: a
	// path or a value a session chose never reaches the terminal raw.
	os.Exit(run(os.Args, os.Stdin, os.Stdout, safetext.Writer{W: os.Stderr}))
}

func run(argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	base := filepath.Base(argv[0])
	if base == "sandbox-helper" {
		return helper(argv[1:], stdin, stdout, stderr)
	}
	if _, ok := agent.Lookup(base); !ok {
		fmt.Fprintf(stderr, "cco: %q is not a cco agent name (this program runs as one of %v or as sandbox-helper; reinstall with sudo cco-install)\n", base, agent.Names())
		return exitCannotRun
	}
	p, err := agent.Select(base, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "cco: %v\n", err)
		return exitCannotRun
	}
	return launch(p, argv[1:], stderr)
}
