// Package userns makes sure unprivileged users can create the user
// namespaces bubblewrap needs. Ubuntu 24.04 restricts them through AppArmor
// (kernel.apparmor_restrict_unprivileged_userns=1: "setting up uid map:
// Permission denied"); the fix is an AppArmor profile for /usr/bin/bwrap that
// allows userns, which the step installs (owned, in the receipt) unless the
// operator said --no-apparmor, in which case it refuses with the exact fix.
package userns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/cco-dev/cco/internal/sysbin"
	"github.com/cco-dev/cco/provision"
)

// ProfilePath is cco's AppArmor profile for bwrap.
const ProfilePath = "/etc/apparmor.d/cco-bwrap"

// BwrapPath is the bubblewrap the profile covers and the probe runs: the
// jail's own (sandbox.BwrapPath), by absolute path, never root's PATH.
const BwrapPath = "/usr/bin/bwrap"

// Profile lets /usr/bin/bwrap create user namespaces (the same grant as
// Ubuntu's own bwrap-userns-restrict, without its confinement of the child).
const Profile = `# Written by cco-install: lets bubblewrap create the user namespaces of cco's jail
# where kernel.apparmor_restrict_unprivileged_userns=1. Remove with cco-install --uninstall.
abi <abi/4.0>,
include <tunables/global>

profile cco-bwrap ` + BwrapPath + ` flags=(unconfined) {
  userns,

  include if exists <local/cco-bwrap>
}
`

// Host is what the step asks of the machine; tests replace it.
type Host struct {
	// Restricted reports whether AppArmor restricts unprivileged user namespaces.
	Restricted func() bool
	// Probe runs an unprivileged bwrap; nil error means user namespaces work.
	Probe func() error
	// Load loads the profile into the kernel.
	Load func(hostPath string) error
}

// RealHost asks this machine.
var RealHost = Host{
	Restricted: func() bool {
		b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
		return err == nil && strings.TrimSpace(string(b)) == "1"
	},
	Probe: func() error {
		cmd := exec.Command(BwrapPath, "--unshare-user", "--ro-bind", "/", "/", "true")
		cmd.Env = sysbin.Environ(nil)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
		}
		return nil
	},
	Load: func(p string) error {
		cmd, err := sysbin.Command(context.Background(), "apparmor_parser", "-r", p)
		if err != nil {
			return fmt.Errorf("loading %s: %w (fix: apt-get install apparmor)", p, err)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apparmor_parser -r %s: %v: %s", p, err, strings.TrimSpace(string(out)))
		}
		return nil
	},
}

// Options select the step's behaviour.
type Options struct {
	NoAppArmor bool // refuse instead of installing the profile
	Image      bool // an image build: no probe (the shadow checks at launch)
	// SameKernel is true when the target runs on this machine's kernel (the
	// root is "/"); a staged root is not probed.
	SameKernel bool
	Host       Host
}

// Steps returns the userns.apparmor step when it has work or owns the
// profile; an image build gets a warning instead of a probe.
func Steps(run *provision.View, o Options) ([]provision.Step, []string) {
	if o.Image {
		return nil, []string{"image build: the user-namespace probe is skipped; the shadow checks at launch and names the fix"}
	}
	_, owned := run.Receipt.Paths[ProfilePath]
	if !o.SameKernel && !owned {
		return nil, nil // a staged root's kernel is not this one
	}
	if !owned && !o.Host.Restricted() {
		return nil, nil
	}
	if !owned {
		if err := o.Host.Probe(); err == nil {
			return nil, nil
		}
	}
	return []provision.Step{&step{o: o}}, nil
}

type step struct{ o Options }

func (s *step) ID() string   { return "userns.apparmor" }
func (s *step) Name() string { return "let bwrap create user namespaces under AppArmor" }

func (s *step) file() *provision.File {
	return &provision.File{StepID: s.ID(), StepName: s.Name(), Path: ProfilePath, Mode: 0o644,
		UID: provision.SystemUID(), GID: provision.SystemGID(), Content: []byte(Profile)}
}

func (s *step) Check(run *provision.View) (provision.Check, error) {
	if s.o.NoAppArmor {
		if _, owned := run.Receipt.Paths[ProfilePath]; !owned {
			return provision.Check{State: provision.Conflict, Paths: []string{ProfilePath},
				Detail: "unprivileged user namespaces are blocked by AppArmor (kernel.apparmor_restrict_unprivileged_userns=1), so bwrap cannot build the jail",
				Fix:    "run cco-install without --no-apparmor to install " + ProfilePath + ", or install your own profile granting userns to /usr/bin/bwrap and run apparmor_parser -r on it",
			}, nil
		}
	}
	return s.file().Check(run)
}

func (s *step) Apply(run *provision.Run, c provision.Check) (string, error) {
	detail, err := s.file().Apply(run, c)
	if err != nil {
		return "", err
	}
	if err := s.o.Host.Load(run.Root.HostPath(ProfilePath)); err != nil {
		return "", errors.Join(fmt.Errorf("wrote %s but could not load it", ProfilePath), err)
	}
	return detail + "; loaded it", nil
}
