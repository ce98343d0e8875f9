package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cco-dev/cco/internal/testenv"
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
			// Root's jail runs as an unprivileged host uid: like any
			// user's, it must be able to enter the scenario's directory.
			if err := os.Chmod(filepath.Dir(e.WorkDir), 0o711); err != nil {
				return err
			}
			e.Setenv(rootEnv, root)
			e.Setenv("HOME", e.WorkDir+"/home")
			e.Setenv("USER", "root")
			e.Setenv("ROOT", root)
			e.Setenv("SENTINEL_VAR", "leak")
			return nil
		},
	})
}
