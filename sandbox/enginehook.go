package sandbox

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/cco-dev/cco/sandbox/engine"
	"github.com/cco-dev/cco/sandbox/supervise"
)

// chooseEngine picks the jail engine for l (sandbox/engine.Choose: cco's
// own where the kernel has the mount API, bubblewrap otherwise, or
// CCO_JAIL_ENGINE's) and records it for the marker.
func chooseEngine(l *Launch) (engine.Kind, error) {
	if l.Engine != "" {
		k := engine.Kind(l.Engine)
		if k != engine.CCO && k != engine.Bwrap {
			return "", fmt.Errorf("%q is not a jail engine (cco or bwrap)", l.Engine)
		}
		return k, nil
	}
	k, err := engine.Choose(os.Getenv)
	if err != nil {
		return "", err
	}
	l.Engine = string(k)
	return k, nil
}

// layers are the protections the marker names besides the namespaces and
// the mounts: seccomp, and Landlock where cco's engine runs on a kernel
// that has it.
func layers(kind string) []string {
	if kind == "" {
		return nil
	}
	out := []string{"seccomp"}
	if engine.Kind(kind) == engine.CCO {
		if l := engine.Layer(engine.LandlockABI()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// landlockWritable are the paths the Spec makes writable in the jail: the
// read-write binds (the login state, allow_write, the workspace and its
// trees), the private and scratch tmpfs and the writable masks. The
// Landlock layer is derived from these, never from the mounts, so that a
// mount wider than the Spec means is still held to it.
func landlockWritable(s *Spec) []string {
	var out []string
	s.eachBind(func(b *Bind, rw bool) {
		if rw {
			out = append(out, b.Dst)
		}
	})
	out = append(out, s.Private...)
	out = append(out, s.Scratch...)
	for _, m := range s.Masks {
		if m.Kind == MaskTmpfs {
			out = append(out, m.Path)
		}
	}
	if s.NoWorkspace != "" {
		out = append(out, s.NoWorkspace)
	}
	return out
}

// fork starts the jail's first process: bwrap with argv, or cco's own
// engine's child (the helper) executing the same operations.
func (s *launched) fork(argv []string, attr *syscall.ProcAttr, trees []string, view bool) (int, error) {
	if s.engine != engine.CCO {
		if view {
			return rootView.Start(s.bwrap, argv, attr, trees)
		}
		return syscall.ForkExec(s.bwrap, argv, attr)
	}
	o := engine.Options{Writable: landlockWritable(s.spec), Options: s.opts}
	if view {
		if rootView.Detach == nil {
			return 0, fmt.Errorf("this launcher's root view cannot give cco's jail engine its trees (fix: set %s=bwrap)", engine.EnvVar)
		}
		fds, err := rootView.Detach(trees)
		if err != nil {
			return 0, err
		}
		defer func() {
			for _, fd := range fds {
				syscall.Close(fd)
			}
		}()
		o.HostID = rootView.ID
		for i, t := range trees {
			o.Trees = append(o.Trees, engine.Tree{FD: fds[i], Path: t})
		}
	}
	pid, err := engine.Start(SystemRoot+HelperPath, argv[1:], attr, o)
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOSPC) {
		err = fmt.Errorf("%w: user namespaces are blocked here (on Ubuntu 24.04 AppArmor restricts them; fix: sudo cco-install, "+
			"or allow them with sysctl user.max_user_namespaces=15000, or launch with %s=bwrap where bwrap has an AppArmor profile)", err, engine.EnvVar)
	}
	return pid, err
}

// program is what the launch starts: bwrap, or the helper as the engine's
// child.
func (s *launched) program() string {
	if s.engine == engine.CCO {
		return SystemRoot + HelperPath + " (cco's jail engine)"
	}
	return s.bwrap
}

// exitStatus is the agent's status as the jail's first process reports
// it; a jail that failed before the agent started is diagnosed.
func (s *launched) exitStatus(ws syscall.WaitStatus, ran bool) (int, string) {
	if s.engine != engine.CCO {
		return supervise.ExitStatus(ws, ran, s.bwrap)
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal()), ""
	}
	if code := ws.ExitStatus(); ran || code == 0 {
		return code, ""
	}
	return ExitCannotRun, "cco's jail engine stopped before the agent started (its message is above); fix that, " +
		"or launch with " + engine.EnvVar + "=bwrap and report the message"
}
