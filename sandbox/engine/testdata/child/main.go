// Command child is the engine's child for the engine's own tests, and the
// jail's pid 1 it replaces itself with (the helper's init mode), built
// with CGO_ENABLED=0 as the helper is.
package main

import (
	"fmt"
	"os"

	"github.com/cco-dev/cco/sandbox/engine"
	"github.com/cco-dev/cco/sandbox/jailinit"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == engine.HelperMode {
		os.Exit(engine.Main(os.Args[2:], os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "init" {
		status, rest, err := jailinit.TakeStatus(os.Args[2:])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		code := jailinit.Run(rest, os.Environ(), os.Stderr)
		status.Exited(code)
		os.Exit(code)
	}
	os.Exit(2)
}
