package main

import (
	"fmt"
	"os"
	"regexp"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cco-dev/cco/agent"
)

// fixRE is the command a launch's refusal names: "(fix: sudo cco-install ...)".
var fixRE = regexp.MustCompile(`fix: (sudo cco-install[^)]*)\)`)

// cmdShadowFix is the testscript command "shadowfix AGENT": it prints what
// the shadow says when it launches AGENT on $ROOT (agent.Profile.Missing,
// the check sandbox.Start makes first), "ready" when nothing is missing,
// and writes the command the refusal names to $WORK/fix.cmd, so that the
// script can run exactly that command.
func cmdShadowFix(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: shadowfix AGENT")
	}
	p, ok := agent.Lookup(args[0])
	if !ok {
		ts.Fatalf("shadowfix: no agent %q", args[0])
	}
	err := p.Missing(ts.Getenv("ROOT"))
	if err == nil {
		fmt.Fprintln(ts.Stdout(), "ready")
		return
	}
	fmt.Fprintf(ts.Stdout(), "cco: %v\n", err)
	m := fixRE.FindStringSubmatch(err.Error())
	if m == nil {
		ts.Fatalf("the refusal names no sudo cco-install command: %v", err)
	}
	ts.Check(os.WriteFile(ts.MkAbs("fix.cmd"), []byte(m[1]+"\n"), 0o644))
}
