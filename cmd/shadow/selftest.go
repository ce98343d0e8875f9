package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/selftest"
)

// selftestMode is `sandbox-helper selftest -- REQUEST`: cco's probe, which
// the shadow starts in an agent's jail instead of the vendor binary when
// CCO_SELFTEST=1 (cco-install verify). It runs only inside a jail, and
// prints one JSON report.
func selftestMode(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) != 1 {
		fmt.Fprintln(stderr, "cco sandbox-helper: usage: sandbox-helper selftest -- REQUEST (cco-install verify starts this mode)")
		return 2
	}
	if _, err := sandbox.ProbeJail(); err != nil {
		fmt.Fprintf(stderr, "cco sandbox-helper: the selftest runs only inside a cco jail: %v (run `cco-install verify`)\n", err)
		return exitCannotRun
	}
	req, err := selftest.ParseRequest(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "cco sandbox-helper: %v\n", err)
		return 2
	}
	b, err := json.Marshal(selftest.Probe(req))
	if err != nil {
		fmt.Fprintf(stderr, "cco sandbox-helper: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}
