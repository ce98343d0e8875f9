package userns

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
	"github.com/cco-dev/cco/sandbox"
)

type fakeHost struct {
	restricted bool
	probeErr   error
	probes     int
	loaded     []string
}

func (f *fakeHost) host() Host {
	return Host{
		Restricted: func() bool { return f.restricted },
		Probe:      func() error { f.probes++; return f.probeErr },
		Load:       func(p string) error { f.loaded = append(f.loaded, p); return nil },
	}
}

func TestBlockedUsernsInstallsAndLoadsTheProfile(t *testing.T) {
	dir := t.TempDir()
	f := &fakeHost{restricted: true, probeErr: errors.New("setting up uid map: Permission denied")}
	run := provisiontest.Run(t, dir)
	steps, _ := Steps(&run.View, Options{SameKernel: true, Host: f.host()})
	if len(steps) != 1 || steps[0].ID() != "userns.apparmor" {
		t.Fatalf("want the userns.apparmor step, got %v", steps)
	}
	rep := provision.Execute(run, steps)
	if rep.Changed != 1 || rep.ExitCode() != 0 {
		t.Fatalf("report: %+v", rep.Steps)
	}
	b, err := os.ReadFile(filepath.Join(dir, ProfilePath))
	if err != nil || !strings.Contains(string(b), "userns,") || !strings.Contains(string(b), "/usr/bin/bwrap") {
		t.Fatalf("profile: %q, %v", b, err)
	}
	if len(f.loaded) != 1 || f.loaded[0] != filepath.Join(dir, ProfilePath) {
		t.Fatalf("the profile must be loaded from where it was written: %v", f.loaded)
	}
	if _, owned := run.Receipt.Paths[ProfilePath]; !owned {
		t.Fatal("the profile must be recorded in the receipt")
	}

	// Owned, it stays in the plan (and is kept as written) without a new probe.
	run2 := provisiontest.Run(t, dir)
	f.probes = 0
	steps, _ = Steps(&run2.View, Options{SameKernel: true, Host: f.host()})
	if rep := provision.Execute(run2, steps); len(steps) != 1 || rep.Changed != 0 || rep.Steps[0].Status != "ok" {
		t.Fatalf("second run: %+v", rep.Steps)
	}
	if f.probes != 0 {
		t.Fatalf("an owned profile needs no probe, probed %d times", f.probes)
	}
}

func TestNoAppArmorRefusesWithTheFix(t *testing.T) {
	dir := t.TempDir()
	f := &fakeHost{restricted: true, probeErr: errors.New("denied")}
	run := provisiontest.Run(t, dir)
	steps, _ := Steps(&run.View, Options{SameKernel: true, NoAppArmor: true, Host: f.host()})
	rep := provision.Execute(run, steps)
	if rep.ExitCode() != provision.ExitConflict || !strings.Contains(rep.Steps[0].Detail, "apparmor_parser -r") {
		t.Fatalf("want a conflict naming the fix, got %+v", rep.Steps)
	}
	if _, err := os.Stat(filepath.Join(dir, ProfilePath)); err == nil {
		t.Fatal("--no-apparmor must not write the profile")
	}
	if len(f.loaded) != 0 {
		t.Fatal("--no-apparmor must not load anything")
	}
}

func TestNoStepWhereUsernsWorks(t *testing.T) {
	for name, f := range map[string]*fakeHost{
		"not restricted":         {restricted: false},
		"restricted but allowed": {restricted: true, probeErr: nil},
	} {
		t.Run(name, func(t *testing.T) {
			steps, _ := Steps(provisiontest.Run(t, t.TempDir()).ReadOnly(), Options{SameKernel: true, Host: f.host()})
			if len(steps) != 0 {
				t.Fatalf("no step expected, got %v", steps)
			}
		})
	}
}

func TestImageBuildSkipsTheProbeWithAWarning(t *testing.T) {
	f := &fakeHost{restricted: true, probeErr: errors.New("denied")}
	steps, warnings := Steps(provisiontest.Run(t, t.TempDir()).ReadOnly(), Options{SameKernel: true, Image: true, Host: f.host()})
	if len(steps) != 0 || f.probes != 0 {
		t.Fatalf("an image build must not probe: steps %v, probes %d", steps, f.probes)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "the shadow checks at launch") {
		t.Fatalf("warnings: %v", warnings)
	}
}

func TestStagedRootIsNotProbed(t *testing.T) {
	f := &fakeHost{restricted: true, probeErr: errors.New("denied")}
	steps, _ := Steps(provisiontest.Run(t, t.TempDir()).ReadOnly(), Options{SameKernel: false, Host: f.host()})
	if len(steps) != 0 || f.probes != 0 {
		t.Fatalf("a staged root runs on another kernel: steps %v, probes %d", steps, f.probes)
	}
}

// TestRealHostRunsNothingPlanted: with a bwrap and an apparmor_parser
// planted first on root's PATH, the probe and the load run the system's
// (or report that there is none), never the planted ones.
func TestRealHostRunsNothingPlanted(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	for _, n := range []string{"bwrap", "apparmor_parser"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\necho \"$0\" >> "+ran+"\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	if os.Geteuid() == 0 {
		// As nobody the probe needs bwrap itself; its verdict is the
		// machine's, what matters is which bwrap ran.
		_ = RealHost.Probe()
	}
	err := RealHost.Load(filepath.Join(dir, "no-such-profile"))
	if err == nil {
		t.Errorf("loading a missing profile succeeded: a planted apparmor_parser ran")
	}
	if b, err := os.ReadFile(ran); err == nil {
		t.Errorf("PLANTED: ran %s", b)
	}
	if !strings.Contains(Profile, "profile cco-bwrap "+BwrapPath+" ") {
		t.Errorf("the profile does not name %s", BwrapPath)
	}
}

// TestBwrapPathIsTheJails: the profile covers, and the probe runs, the
// bubblewrap the jail runs.
func TestBwrapPathIsTheJails(t *testing.T) {
	if BwrapPath != sandbox.BwrapPath {
		t.Errorf("userns.BwrapPath %s, the jail's %s", BwrapPath, sandbox.BwrapPath)
	}
}
