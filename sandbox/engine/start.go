package engine

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Options say who the jail runs as on the host.
type Options struct {
	// HostID, for root's view, is the host uid and gid that 0 in the jail
	// maps to (sandbox/rootview's ID); 0 maps the launcher's own ids.
	HostID int
	// Trees are root's view's idmapped trees: detached mounts, each placed
	// at its host path before the tree is built (docs/adr/0018-root-view.md).
	Trees []Tree
	// Writable are the paths in the jail the agent may write below, for
	// the Landlock layer (applied where the kernel has Landlock); nil
	// applies none.
	Writable []string
	// Options are the options of args that begins with --args FD: the
	// child reads them from that descriptor, this side plans with them.
	Options []string
}

// Tree is a detached mount to place at Path.
type Tree struct {
	FD   int
	Path string
}

// setupCaps are what the child needs to build the jail, kept across its
// exec as ambient capabilities (a user other than 0 in the jail would
// lose every one at exec) and dropped before the agent starts.
var setupCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_SYS_RESOURCE, unix.CAP_NET_ADMIN,
	unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER}

// Start starts the engine's child: bin (the helper) in the jail's new
// namespaces, building the jail args describes (sandbox.Argv's operations)
// with attr's files, and returns its pid, which is the jail's pid 1. The
// child carries only the jail's environment from its first instruction on.
// The calling thread must stay until the jail has ended: the child's
// death signal is tied to it.
func Start(bin string, args []string, attr *syscall.ProcAttr, o Options) (int, error) {
	planned := args
	if len(args) > 1 && args[0] == "--args" {
		planned = append(append([]string{}, o.Options...), args[2:]...)
	}
	p, err := parse(planned)
	if err != nil {
		return 0, fmt.Errorf("the jail's operations: %w", err)
	}
	n := len(attr.Files)
	child := []string{"sandbox-helper", HelperMode, "--fds", strconv.Itoa(n)}
	files := append([]uintptr(nil), attr.Files...)
	for _, t := range o.Trees {
		child = append(child, "--tree", strconv.Itoa(len(files)), t.Path)
		files = append(files, uintptr(t.FD))
	}
	for _, w := range o.Writable {
		child = append(child, "--landlock", w)
	}
	child = append(child, args...)
	flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC |
		syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP)
	if p.unshareNet {
		flags |= syscall.CLONE_NEWNET
	}
	sys := &syscall.SysProcAttr{
		Cloneflags: flags,
		// A session of its own: nothing in the jail shares the user's
		// terminal session (bwrap's --new-session).
		Setsid: true,
		// --die-with-parent: tied to the calling thread.
		Pdeathsig:   syscall.SIGKILL,
		AmbientCaps: setupCaps,
	}
	uid, gid := os.Getuid(), os.Getgid()
	if p.rootView {
		if o.HostID <= 0 {
			return 0, fmt.Errorf("root's view needs its host id")
		}
		m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: o.HostID, Size: 1}}
		sys.UidMappings, sys.GidMappings = m, m
		// 0 inside is HostID on the host, with no supplementary groups
		// (root's would still be root's); the launcher, root, may let
		// the child drop them.
		sys.GidMappingsEnableSetgroups = true
		sys.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	} else {
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	env := p.env
	if !p.clearenv {
		env = append(os.Environ(), env...)
	}
	a := &syscall.ProcAttr{Dir: attr.Dir, Env: env, Files: files, Sys: sys}
	return syscall.ForkExec(bin, child, a)
}
