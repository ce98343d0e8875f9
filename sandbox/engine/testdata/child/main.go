// Command child is the engine's child for the engine's own tests, built
// with CGO_ENABLED=0 as the helper is (AllThreadsSyscall needs it).
package main

import (
	"os"

	"github.com/cco-dev/cco/sandbox/engine"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == engine.HelperMode {
		os.Exit(engine.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(2)
}
