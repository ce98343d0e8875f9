// Package engine is cco's own jail engine: it executes the launch's jail
// (the Spec, in the one ordered form both engines read: the operations
// sandbox.Argv writes, a later mount covering an earlier one) without
// bubblewrap. The launcher starts the helper binary in new user, mount, pid,
// ipc, uts, cgroup (and, when the spec cuts it, net) namespaces; that child,
// already inside them, builds the whole tree with the new mount API on
// descriptors (open_tree, mount_setattr, move_mount, fsopen/fsmount), never
// reading the mount table, pivots into it, drops every capability on every
// thread, sets no_new_privs and the seccomp program, and stays the jail's
// pid 1 while the agent runs. See docs/adr/0145-cco-jail-engine.md.
//
// bubblewrap remains the engine on kernels without mount_setattr (Linux
// 5.12): Choose decides, and EnvVar overrides it for tests and for a host
// that must keep bwrap.
package engine

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Kind names a jail engine, as the marker and `cco-install status` show it.
type Kind string

const (
	// CCO is this package: the jail built by cco itself.
	CCO Kind = "cco"
	// Bwrap is bubblewrap, the fallback.
	Bwrap Kind = "bwrap"
)

// EnvVar picks the engine for one launch: "cco", "bwrap", or "" / "auto"
// for the kernel's choice. Another value refuses the launch.
const EnvVar = "CCO_JAIL_ENGINE"

// HelperMode is the helper's argument that runs the engine's child.
const HelperMode = "jail"

// Default is the engine a build picks when EnvVar is unset, set at link
// time (-X github.com/cco-dev/cco/sandbox/engine.Default=bwrap): the test
// system roots pass their run's CCO_JAIL_ENGINE through it, since every
// launch in a test gets an environment of its own. "" is auto.
var Default string

// LinkFlag is the -ldflags fragment that builds Default in: the test roots'
// builds add it for the engine their run asks for ("" adds nothing).
func LinkFlag(kind string) string {
	if kind == "" {
		return ""
	}
	return " -X github.com/cco-dev/cco/sandbox/engine.Default=" + kind
}

// ownByDefault makes cco's own engine the kernel's choice where it has the
// mount API: the jail suites pass on it (docs/adr/0145-cco-jail-engine.md).
var ownByDefault = true

// hasMountAPI is the kernel probe, a test seam.
var hasMountAPI = probeMountAPI

// probeMountAPI reports whether the kernel has mount_setattr (Linux 5.12),
// the newest of the calls the engine needs: on a bad descriptor a kernel
// that has it says EBADF (or EINVAL), one that lacks it ENOSYS.
func probeMountAPI() bool {
	err := unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{})
	return !errors.Is(err, unix.ENOSYS)
}

// Choose is the engine for a launch: EnvVar's when set, otherwise cco's
// own where the kernel has the mount API and bubblewrap elsewhere.
func Choose(getenv func(string) string) (Kind, error) {
	v := getenv(EnvVar)
	if v == "" {
		v = Default
	}
	switch v {
	case "", "auto":
		if ownByDefault && hasMountAPI() {
			return CCO, nil
		}
		return Bwrap, nil
	case string(CCO):
		if !hasMountAPI() {
			return "", fmt.Errorf("%s=cco, but this kernel has no mount_setattr (Linux 5.12), which cco's jail engine needs (fix: unset %s, or set it to bwrap)", EnvVar, EnvVar)
		}
		return CCO, nil
	case string(Bwrap):
		return Bwrap, nil
	default:
		return "", fmt.Errorf("%s=%q is not an engine (fix: set it to cco, bwrap or auto, or unset it)", EnvVar, v)
	}
}

// Auto is the kernel's choice, for `cco-install status`.
func Auto() Kind {
	k, err := Choose(func(string) string { return "" })
	if err != nil {
		return Bwrap
	}
	return k
}

// Getenv is os.Getenv, for Choose's callers.
func Getenv(k string) string { return os.Getenv(k) }
