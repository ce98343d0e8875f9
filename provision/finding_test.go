package provision

import "testing"

// The install report and the status report exit by the one rule: a failure
// outranks a conflict or a drift, which outranks nothing left to do.
func TestExitFor(t *testing.T) {
	for _, c := range []struct{ failed, unresolved, want int }{
		{0, 0, ExitOK}, {0, 2, ExitConflict}, {1, 0, ExitFailed}, {3, 5, ExitFailed},
	} {
		if got := ExitFor(c.failed, c.unresolved); got != c.want {
			t.Errorf("ExitFor(%d, %d) = %d, want %d", c.failed, c.unresolved, got, c.want)
		}
		install := &Report{Failed: c.failed, Conflicts: c.unresolved}
		status := &StatusReport{Failed: c.failed, Drift: c.unresolved}
		if install.ExitCode() != c.want || status.ExitCode() != c.want {
			t.Errorf("failed %d, unresolved %d: install exits %d, status %d, want %d", c.failed, c.unresolved, install.ExitCode(), status.ExitCode(), c.want)
		}
	}
}

// A step's conflict as a finding carries its fix apart, not twice.
func TestStepReportFinding(t *testing.T) {
	sr := StepReport{ID: "policy.claude", Detail: "/etc/x was edited; run `sudo cco-install --force`", Fix: "run `sudo cco-install --force`", Paths: []string{"/etc/x", "/etc/y"}}
	want := Finding{ID: "policy.claude", Path: "/etc/x", Detail: "/etc/x was edited", Fix: "run `sudo cco-install --force`"}
	if got := sr.Finding(); got != want {
		t.Errorf("Finding() = %+v, want %+v", got, want)
	}
	if got, want := want.String(), "/etc/x was edited: run `sudo cco-install --force`"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (StepReport{ID: "x", Detail: "d"}).Finding(); got != (Finding{ID: "x", Detail: "d"}) || got.String() != "d" {
		t.Errorf("a step without paths or fix: %+v %q", got, got.String())
	}
}
