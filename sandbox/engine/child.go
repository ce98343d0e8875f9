package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/cco-dev/cco/sandbox/supervise"

	"golang.org/x/sys/unix"
)

// Main is the engine's child: the jail's pid 1, already in its namespaces.
// args are what Start passed after the helper's mode. It builds the jail,
// then replaces itself with the jail's pid 1 proper (run), which starts the
// command. It returns only when the jail was not built: 1, with no
// exit-code line on the status stream, so the launcher reports the jail
// unbuilt.
func Main(args []string, stderr io.Writer) int {
	// Nothing in the jail may trace this process, read its memory or take
	// its descriptors, from its first instruction on.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	runtime.LockOSThread()
	j, err := newChild(args)
	if err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return 1
	}
	if err := j.build(); err != nil {
		fmt.Fprintf(stderr, "cco: cannot build the jail: %v\n", err)
		return 1
	}
	return j.run(stderr)
}

type child struct {
	*plan
	inherited int // descriptors 3..inherited-1 came from the launcher
	trees     []Tree
	landlock  []string // the Landlock layer's writable paths
	consumed  map[int]bool
	b         builder
}

func newChild(args []string) (*child, error) {
	c := &child{consumed: map[int]bool{}}
	for len(args) > 0 && (args[0] == "--fds" || args[0] == "--tree" || args[0] == "--landlock") {
		switch {
		case args[0] == "--landlock" && len(args) > 1:
			c.landlock, args = append(c.landlock, args[1]), args[2:]
		case args[0] == "--fds" && len(args) > 1:
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return nil, fmt.Errorf("--fds %q", args[1])
			}
			c.inherited, args = n, args[2:]
		case args[0] == "--tree" && len(args) > 2:
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return nil, fmt.Errorf("--tree %q", args[1])
			}
			c.trees, args = append(c.trees, Tree{FD: n, Path: args[2]}), args[3:]
			c.consumed[n] = true
		default:
			return nil, fmt.Errorf("%s needs its arguments", args[0])
		}
	}
	if len(args) > 1 && args[0] == "--args" {
		// The options came on a descriptor, as bwrap takes them: they
		// hold the jail's environment, which a command line shows to
		// every user of the host.
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 3 {
			return nil, fmt.Errorf("--args %q is not a descriptor", args[1])
		}
		opts, err := readArgs(n)
		if err != nil {
			return nil, err
		}
		c.consumed[n] = true
		args = append(opts, args[2:]...)
	}
	p, err := parse(args)
	if err != nil {
		return nil, err
	}
	c.plan = p
	for _, fd := range []int{p.seccompFD, p.statusFD, p.blockFD} {
		if fd > 0 {
			c.consumed[fd] = true
		}
	}
	for _, o := range p.ops {
		if o.fd > 0 {
			c.consumed[o.fd] = true
		}
	}
	for fd := range c.consumed {
		unix.CloseOnExec(fd)
	}
	return c, nil
}

// build makes the jail around this process; on return it is inside, with
// no capability left, no_new_privs and seccomp in force.
func (c *child) build() error {
	// The launcher learns the jail's pid 1 (its host pid) at once, as from
	// bwrap's --json-status-fd: its endpoint in the jail's network
	// namespace can be made while the tree is built.
	if c.statusFD > 0 {
		self, err := os.Readlink("/proc/self")
		if err != nil {
			return fmt.Errorf("the jail's host pid: %w", err)
		}
		pid, err := strconv.Atoi(self)
		if err != nil {
			return fmt.Errorf("the jail's host pid: %q", self)
		}
		if _, err := unix.Write(c.statusFD, []byte(supervise.ChildPIDLine(pid))); err != nil {
			return fmt.Errorf("the status stream: %w", err)
		}
	}
	b := &c.b
	b.sources = map[int]string{}
	for _, o := range c.ops {
		if o.kind == "--bind-fd" || o.kind == "--ro-bind-fd" {
			// Where the launcher opened it, read from its descriptor:
			// reopened below without following a link, and compared.
			p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(o.fd))
			if err != nil || !strings.HasPrefix(p, "/") {
				return fmt.Errorf("bind source %d: %v", o.fd, err)
			}
			b.sources[o.fd] = p
		}
	}
	// Root's view: its idmapped trees, at their host paths, before
	// anything is bound from them.
	for _, t := range c.trees {
		if err := unix.MoveMount(t.FD, "", unix.AT_FDCWD, t.Path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("root's view of %s: %w", t.Path, err)
		}
		unix.Close(t.FD)
	}
	// Nothing mounted from here on reaches the host's mount namespace.
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Propagation: unix.MS_SLAVE}); err != nil {
		return fmt.Errorf("making the mounts slave: %w", err)
	}
	if err := c.scratch(); err != nil {
		return err
	}
	for i := range c.ops {
		if err := c.do(&c.ops[i]); err != nil {
			return err
		}
	}
	if b.root <= 0 {
		return fmt.Errorf("the jail has no root (no --ro-bind / /)")
	}
	if err := c.pivot(); err != nil {
		return err
	}
	if c.unshareNet {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bringing up the jail's loopback: %w", err)
		}
	}
	if c.clearenv {
		os.Clearenv()
	}
	for _, kv := range c.env {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	if c.chdir != "" {
		if err := os.Chdir(c.chdir); err != nil {
			return fmt.Errorf("the jail's working directory: %w", err)
		}
	}
	// As bwrap: PWD is the directory the command starts in, as --chdir
	// names it (a workspace reached through a link keeps the shell's
	// logical path).
	if c.chdir != "" {
		os.Setenv("PWD", c.chdir)
	} else if wd, err := os.Getwd(); err == nil {
		os.Setenv("PWD", wd)
	}
	return c.lockDown()
}

// scratch makes the process's root a scratch tmpfs holding the host's root
// at /oldroot, the jail's mount point /newroot and /data for files made
// from data. The host's root is then reached only from its descriptor.
func (c *child) scratch() error {
	fd, err := tmpfs(0o755, 1<<20, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("the jail's scratch tmpfs: %w", err)
	}
	defer unix.Close(fd)
	for _, d := range []string{"oldroot", "newroot", "data"} {
		if err := unix.Mkdirat(fd, d, 0o755); err != nil {
			return fmt.Errorf("the jail's scratch tmpfs: %w", err)
		}
	}
	// Attached on /tmp for as long as it takes to pivot into it; the
	// host's /tmp is back under /oldroot/tmp once it has moved.
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, "/tmp", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("the jail's scratch tmpfs: %w", err)
	}
	if err := unix.Chdir("/tmp"); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "oldroot"); err != nil {
		return fmt.Errorf("pivoting into the scratch tmpfs: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	b := &c.b
	if b.host, err = unix.Open("/oldroot", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return err
	}
	if b.scratch, err = unix.Open("/data", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return err
	}
	return nil
}

// do makes one operation.
func (c *child) do(o *op) error {
	b := &c.b
	switch o.kind {
	case "--ro-bind", "--bind", "--ro-bind-try", "--bind-try":
		rw := o.kind == "--bind" || o.kind == "--bind-try"
		src, err := b.hostPath(o.src)
		if err != nil {
			if strings.HasSuffix(o.kind, "-try") && os.IsNotExist(err) {
				return nil
			}
			return err
		}
		defer unix.Close(src)
		if o.dst == "/" {
			return c.rootBind(src)
		}
		return b.cover(o.dst, !rw && o.src == "/dev/null", b.bind(src, o.dst, rw, false))
	case "--bind-fd", "--ro-bind-fd":
		src, _, err := b.source(o.fd)
		if err != nil {
			return err
		}
		defer unix.Close(src)
		return b.bind(src, o.dst, o.kind == "--bind-fd", true)
	case "--ro-bind-data":
		mode := uint32(0o444)
		if o.perms {
			mode = o.mode
		}
		return b.dataFile(o.fd, o.dst, mode)
	case "--tmpfs":
		mode := uint32(0o755)
		if o.perms {
			mode = o.mode
		}
		t, err := tmpfs(mode, o.size, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
		if err != nil {
			return fmt.Errorf("a tmpfs at %s: %w", o.dst, err)
		}
		defer unix.Close(t)
		return b.cover(o.dst, true, b.attach(t, o.dst, false))
	case "--remount-ro":
		if b.skipped[o.dst] {
			return nil
		}
		t, err := b.target(o.dst, false)
		if err != nil {
			return err
		}
		defer unix.Close(t)
		// Not recursive, as bwrap's: the binds inside keep their own.
		if err := unix.MountSetattr(t, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("making %s read-only: %w", o.dst, err)
		}
		return nil
	case "--dir":
		t, err := b.target(o.dst, false)
		if err != nil {
			return err
		}
		unix.Close(t)
		return nil
	case "--symlink":
		return b.symlink(o.src, o.dst)
	case "--dev":
		return b.dev(o.dst)
	case "--proc":
		return b.proc(o.dst, c.disableUserns)
	}
	return fmt.Errorf("%s: not an operation", o.kind)
}

// cover is err, but for a cover (a tmpfs, or /dev/null bound read-only)
// whose mount point is absent from a read-only tree: there is nothing to
// hide, and the jail cannot make it, so the cover is left out.
func (b *builder) cover(p string, isCover bool, err error) error {
	if err != nil && isCover && errors.Is(err, errAbsent) {
		if b.skipped == nil {
			b.skipped = map[string]bool{}
		}
		b.skipped[p] = true
		return nil
	}
	return err
}

// rootBind binds the host's root read-only as the jail's root.
func (c *child) rootBind(src int) error {
	b := &c.b
	t, err := clone(src, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("binding the host's root: %w", err)
	}
	defer unix.Close(t)
	if err := unix.MoveMount(t, "", unix.AT_FDCWD, "/newroot", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("binding the host's root: %w", err)
	}
	b.root, err = unix.Open("/newroot", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	return err
}

// symlink makes a link at p (in a tree of the jail's own: a scratch dir).
func (b *builder) symlink(target, p string) error {
	dir, rel, how := b.base(p)
	parent, err := b.dir(dir, dirOf(rel), how, p)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	if err := unix.Symlinkat(target, parent, baseOf(rel)); err != nil && !os.IsExist(err) {
		return pathErr(p, err)
	}
	return nil
}

func dirOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

func baseOf(rel string) string { return rel[strings.LastIndexByte(rel, '/')+1:] }

// pivot makes the jail's tree the root and detaches the scratch tmpfs, the
// host's root with it.
func (c *child) pivot() error {
	old, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(old)
	if err := unix.Fchdir(c.b.root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivoting into the jail: %w", err)
	}
	if err := unix.Fchdir(old); err != nil {
		return err
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	for _, fd := range []int{c.b.host, c.b.scratch, c.b.root} {
		unix.Close(fd)
	}
	for _, t := range c.b.writable {
		unix.Close(t.fd)
	}
	c.b.writable = nil
	return nil
}

// run waits until the launcher's endpoint is up, then replaces this
// process with the jail's pid 1, on this thread, the one lockDown sealed:
// the in-jail helper itself where the command is the helper's exec mode
// (the terminal, the proxy endpoint, the egress bridge: one program
// between the launcher and the agent), else the helper's init running the
// command. Either reaps the jail's orphans and writes the status stream's
// exit-code line (sandbox/jailinit). It returns only when the exec failed.
func (c *child) run(stderr io.Writer) int {
	if c.blockFD > 0 {
		// The launcher's endpoint in the jail's network namespace is up
		// once it writes or closes this.
		var one [1]byte
		for {
			if _, err := unix.Read(c.blockFD, one[:]); err != unix.EINTR {
				break
			}
		}
		unix.Close(c.blockFD)
	}
	argv := c.pid1Argv()
	if c.statusFD > 0 {
		// The status stream goes on to pid 1, which writes its end.
		if _, err := unix.FcntlInt(uintptr(c.statusFD), unix.F_SETFD, 0); err != nil {
			fmt.Fprintf(stderr, "cco: cannot build the jail: the status stream: %v\n", err)
			return 1
		}
	}
	err := unix.Exec(self(), argv, os.Environ())
	fmt.Fprintf(stderr, "cco: cannot build the jail: starting its pid 1: %v\n", err)
	return 1
}

// self is this program's path in the jail, where it is there and the same
// file, so that pid 1's name (comm, which the guard reads) is the helper's;
// else /proc/self/exe. Nothing else runs in the jail yet, and the path lies
// in a tree the jail shows read-only.
func self() string {
	if p, err := os.Readlink("/proc/self/exe"); err == nil && strings.HasPrefix(p, "/") && sameFile(p, "/proc/self/exe") {
		return p
	}
	return "/proc/self/exe"
}

// pid1Argv is what the jail's pid 1 runs: the helper's exec mode itself
// when the command is this program's (sandbox.Spec's helper paths), else
// its init in front of the command.
func (c *child) pid1Argv() []string {
	var status []string
	if c.statusFD > 0 {
		status = []string{"--status-fd", strconv.Itoa(c.statusFD)}
	}
	if len(c.command) > 1 && c.command[1] == "exec" && sameFile(c.command[0], "/proc/self/exe") {
		return append(append([]string{"sandbox-helper", "exec"}, status...), c.command[2:]...)
	}
	return append(append(append([]string{"sandbox-helper", "init"}, status...), "--"), c.command...)
}

// sameFile tells whether a and b name one file.
func sameFile(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// readArgs reads NUL-separated options from descriptor n, as bwrap's
// --args does, and closes it.
func readArgs(n int) ([]string, error) {
	f := os.NewFile(uintptr(n), "args")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the options on descriptor %d: %w", n, err)
	}
	s := strings.TrimSuffix(string(b), "\x00")
	if s == "" {
		return nil, nil
	}
	return strings.Split(s, "\x00"), nil
}
