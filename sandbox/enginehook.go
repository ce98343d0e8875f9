package sandbox

import (
	"fmt"
	"os"
	"syscall"

	"github.com/cco-dev/cco/sandbox/engine"
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
// the mounts.
func layers(kind string) []string {
	if kind == "" {
		return nil
	}
	return []string{"seccomp"}
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
	var o engine.Options
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
	return engine.Start(SystemRoot+HelperPath, argv[1:], attr, o)
}
