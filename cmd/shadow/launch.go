package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/selftest"

	// Root's jail runs in a remapped view of the host; the launch refuses
	// as root without it.
	_ "github.com/cco-dev/cco/sandbox/rootview"
)

// launch starts the agent p in its jail and returns its exit status: the
// jail's whole protocol (locks, plan, files, supervision, the post-session
// audit) is sandbox.Start's and Session.Wait's.
func launch(p *agent.Profile, args []string, stderr io.Writer) int {
	if _, err := sandbox.ProbeJail(); err == nil {
		return nested(p, args, stderr)
	}
	// CCO_SELFTEST=1 (cco-install verify) starts cco's own probe, a
	// root-owned program, in the agent's jail instead of the vendor binary.
	s, err := sandbox.Start(&sandbox.Launch{Profile: p, Args: args, Messages: stderr, Selftest: os.Getenv(selftest.Env) == "1"})
	if err != nil {
		fmt.Fprintf(stderr, "cco: %s\n", safetext.Escape(err.Error()))
		var le *sandbox.LaunchError
		if errors.As(err, &le) {
			return le.Code
		}
		return exitCannotRun
	}
	return s.Wait()
}

// nested runs the vendor binary (under its interpreter, when the profile
// has one) in the jail this process is already in (decided by
// sandbox.ProbeJail, never by a variable): a second bwrap would only nest
// namespaces, and the jail's flags are the same.
func nested(p *agent.Profile, args []string, stderr io.Writer) int {
	cfg, err := sandbox.LoadNestedConfig(sandbox.SystemRoot + sandbox.ConfigPath)
	if err != nil {
		fmt.Fprintf(stderr, "cco: %s\n", safetext.Escape(err.Error()))
		return exitCannotRun
	}
	if err := p.MissingNested(sandbox.SystemRoot, sandbox.OverflowUID()); err != nil {
		fmt.Fprintf(stderr, "cco: %s\n", safetext.Escape(err.Error()))
		return exitNotFound
	}
	argv := append(p.Command(sandbox.SystemRoot), p.Args(args, agent.Options{SkipPermissions: cfg.ClaudeSkipPermissions})...)
	return execAgent(p.Name, argv, stderr)
}
