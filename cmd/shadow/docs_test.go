package main

import (
	"fmt"
	"testing"

	"github.com/cco-dev/cco/internal/docscheck"
	"github.com/cco-dev/cco/sandbox/appserver"
)

// TestDocsExitCodes: the numbered exits of the reference's table are the
// codes the shadow and the helper return of their own.
func TestDocsExitCodes(t *testing.T) {
	var code []string
	for _, c := range []int{exitCannotRun, exitNotFound, appserver.ExitCannotRun, appserver.ExitNotFound, appserver.ExitServerFailed} {
		code = append(code, fmt.Sprint(c))
	}
	docscheck.TableOf(t, "docs/reference/shadow.md", "Exit codes").Check(t, "exit", "exit code", code)
}
