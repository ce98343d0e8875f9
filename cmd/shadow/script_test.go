package main

import (
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestScript runs the scenarios in testdata/scripts: the shadow as claude
// and as codex (this test binary, dispatched on argv[0] by TestMain, with
// the system root of systemRoot), fake vendor binaries in the root, and the
// fake agents' reports of their own jail.
func TestScript(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/scripts",
		// Outside /tmp: the jail refuses workspaces there.
		WorkdirRoot: testenv.WorkDir(t),
		Setup: func(e *testscript.Env) error {
			e.Setenv(rootEnv, root)
			e.Setenv("HOME", e.WorkDir+"/home")
			e.Setenv("USER", "root")
			e.Setenv("ROOT", root)
			e.Setenv("SENTINEL_VAR", "leak")
			return nil
		},
	})
}
