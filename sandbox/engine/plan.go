package engine

import (
	"fmt"
	"strconv"
)

// op is one operation of the jail's tree, in the order it is made.
type op struct {
	kind string // the bwrap flag it stands for, e.g. "--bind-fd"
	src  string // a path (ro-bind, bind, symlink target)
	dst  string
	fd   int   // a descriptor (bind-fd, ro-bind-data)
	size int64 // --size before a tmpfs
	mode uint32
	// perms tells that mode was given (--perms).
	perms bool
}

// plan is the jail as the launcher states it.
type plan struct {
	unshareNet, rootView bool
	disableUserns        bool
	clearenv             bool
	env                  []string
	seccompFD, statusFD  int
	blockFD              int
	chdir                string
	ops                  []op
	command              []string
}

// parse reads the operations sandbox.Argv writes. A flag it does not know
// refuses the jail: an operation skipped would be a protection lost.
func parse(args []string) (*plan, error) {
	p := &plan{seccompFD: -1, statusFD: -1, blockFD: -1}
	var size int64
	var mode uint32
	perms := false
	need := func(i, n int) error {
		if i+n >= len(args) {
			return fmt.Errorf("%s needs %d argument(s)", args[i], n)
		}
		return nil
	}
	fdOf := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 3 {
			return 0, fmt.Errorf("%q is not a descriptor", s)
		}
		return n, nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "--":
			p.command = args[i+1:]
			if len(p.command) == 0 {
				return nil, fmt.Errorf("no command after --")
			}
			return p, nil
		case "--die-with-parent", "--new-session", "--unshare-user", "--unshare-pid", "--unshare-ipc",
			"--unshare-uts", "--unshare-cgroup-try", "--unshare-cgroup":
			// Always so here: the namespaces are made at the fork, the
			// session and the parent's death signal with them.
		case "--disable-userns":
			p.disableUserns = true
		case "--unshare-net":
			p.unshareNet = true
		case "--clearenv":
			p.clearenv = true
		case "--uid", "--gid":
			if err := need(i, 1); err != nil {
				return nil, err
			}
			if args[i+1] != "0" {
				return nil, fmt.Errorf("%s %s: only root's view (0) is known", a, args[i+1])
			}
			p.rootView = true
			i++
		case "--cap-drop":
			if err := need(i, 1); err != nil {
				return nil, err
			}
			if args[i+1] != "ALL" {
				return nil, fmt.Errorf("--cap-drop %s: the jail drops ALL", args[i+1])
			}
			i++
		case "--seccomp", "--json-status-fd", "--block-fd":
			if err := need(i, 1); err != nil {
				return nil, err
			}
			fd, err := fdOf(args[i+1])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a, err)
			}
			switch a {
			case "--seccomp":
				p.seccompFD = fd
			case "--json-status-fd":
				p.statusFD = fd
			default:
				p.blockFD = fd
			}
			i++
		case "--setenv":
			if err := need(i, 2); err != nil {
				return nil, err
			}
			p.env = append(p.env, args[i+1]+"="+args[i+2])
			i += 2
		case "--size":
			if err := need(i, 1); err != nil {
				return nil, err
			}
			n, err := strconv.ParseInt(args[i+1], 10, 64)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("--size %q is not a size", args[i+1])
			}
			size = n
			i++
		case "--perms":
			if err := need(i, 1); err != nil {
				return nil, err
			}
			n, err := strconv.ParseUint(args[i+1], 8, 32)
			if err != nil || n > 0o7777 {
				return nil, fmt.Errorf("--perms %q is not a mode", args[i+1])
			}
			mode, perms = uint32(n), true
			i++
		case "--chdir":
			if err := need(i, 1); err != nil {
				return nil, err
			}
			p.chdir = args[i+1]
			i++
		case "--tmpfs", "--remount-ro", "--dir", "--dev", "--proc":
			if err := need(i, 1); err != nil {
				return nil, err
			}
			p.ops = append(p.ops, op{kind: a, dst: args[i+1], size: size, mode: mode, perms: perms})
			size, mode, perms = 0, 0, false
			i++
		case "--ro-bind", "--bind", "--ro-bind-try", "--bind-try", "--symlink":
			if err := need(i, 2); err != nil {
				return nil, err
			}
			p.ops = append(p.ops, op{kind: a, src: args[i+1], dst: args[i+2]})
			i += 2
		case "--bind-fd", "--ro-bind-fd", "--ro-bind-data":
			if err := need(i, 2); err != nil {
				return nil, err
			}
			fd, err := fdOf(args[i+1])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a, err)
			}
			p.ops = append(p.ops, op{kind: a, fd: fd, dst: args[i+2], mode: mode, perms: perms})
			size, mode, perms = 0, 0, false
			i += 2
		default:
			return nil, fmt.Errorf("%q is not an operation cco's jail engine knows", a)
		}
	}
	return nil, fmt.Errorf("no -- before the command")
}
