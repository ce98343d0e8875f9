// Package provisiontest runs provisioning steps over a temporary target
// root, as cco-install does, for the tests of the packages that make steps.
// Its subpackage treehash describes a tree so a test can tell that a run
// changed nothing. That one imports no provision code, so that provision's
// own tests can use it too.
package provisiontest

import (
	"testing"

	"github.com/cco-dev/cco/provision"
)

// Root opens dir as a target root. It is closed when the test ends.
func Root(t testing.TB, dir string) *provision.Root {
	t.Helper()
	r, err := provision.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Run is a run on the target root dir with its receipt read, as
// cco-install starts one.
func Run(t testing.TB, dir string) *provision.Run {
	t.Helper()
	run, err := provision.NewRun(t.Context(), Root(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// Execute runs steps on the target root dir in a fresh run, after opts
// have set the run's flags (Force, DryRun, ...).
func Execute(t testing.TB, dir string, steps []provision.Step, opts ...func(*provision.Run)) *provision.Report {
	t.Helper()
	run := Run(t, dir)
	for _, o := range opts {
		o(run)
	}
	return provision.Execute(run, steps)
}

// Force is the option of a run with --force.
func Force(run *provision.Run) { run.Force = true }

// DryRun is the option of a run with --dry-run.
func DryRun(run *provision.Run) { run.DryRun = true }

// Step is the report's line of the step id. A report without one fails the
// test, naming the steps it has.
func Step(t testing.TB, rep *provision.Report, id string) provision.StepReport {
	t.Helper()
	for _, s := range rep.Steps {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no step %s in the report %+v", id, rep.Steps)
	return provision.StepReport{}
}
