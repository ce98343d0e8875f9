// Package rootview starts root's jail in a remapped view of the host.
//
// bwrap runs as the unprivileged host uid and gid ID, and maps them to 0
// inside. A file that only root can read (owner root, no read bit for group
// or others) then falls to its "other" bits and is unreadable, wherever it
// is: the rule needs no list of paths and no scan. The trees the jail must
// still own (the home with the login state, the workspace, allow_write and
// forge directories, the egress proxy's socket directory) become idmapped
// mounts in a mount namespace of the launch's own, so that root's files
// there are the jail's, and what the jail creates there is root's on the
// host. See docs/adr/0018-root-view.md.
package rootview

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/sandbox"
)

// ID is the host uid and gid root's jail runs as. It lies in the range
// systemd leaves unused (65536-524287), above the 16-bit ids (nobody is
// 65534) and below useradd's first subordinate id (SUB_UID_MIN 100000), so
// no account, no dynamic or homed user and no container's subuid range
// has it. Start refuses where the host's own files say otherwise (checked
// when the mapping is made, see Pin).
const ID = 93376 // 0x16cc0

// Applies reports whether a launch by uid uses the view: root's only.
// Every other user's jail already reads what that user may read.
func Applies(uid int) bool { return uid == 0 }

// Registered with the launcher, which cannot import this package.
func init() {
	sandbox.UseRootView(&sandbox.RootView{Applies: Applies, Prepare: Prepare, Start: Start, Detach: Detach, ID: ID})
}

// Trees are the host paths the view maps back to root, from the Spec: the
// home (its login state is bound from it, and bwrap, being ID, must enter
// it), the workspace, the read-write binds (with the protected trees: a
// linked worktree's common directory may lie outside the workspace), the
// egress socket's directory and the ssh-agent socket's. A path below another is covered by it.
func Trees(s *sandbox.Spec) []string {
	var cand []string
	add := func(p string) {
		if p != "" {
			cand = append(cand, filepath.Clean(p))
		}
	}
	add(s.Home)
	add(s.Workspace)
	for _, list := range [][]sandbox.Bind{s.HomeBinds, s.Writable, s.Trees} {
		for _, b := range list {
			if b.Src == "" {
				continue
			}
			if _, err := os.Lstat(b.Src); err != nil && b.Try {
				continue // bwrap skips it
			}
			add(b.Src)
		}
	}
	if s.EgressSocket != "" {
		add(filepath.Dir(s.EgressSocket))
	}
	if s.SSHAgentSocket != "" {
		add(filepath.Dir(s.SSHAgentSocket)) // ssh_agent's socket, bound at a private path
	}
	var out []string
	for i, p := range cand {
		covered := false
		for j, q := range cand {
			if (j < i && p == q) || (p != q && within(p, q)) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}

// within reports whether p lies strictly below dir.
func within(p, dir string) bool {
	return dir == "/" || strings.HasPrefix(p, dir+"/")
}

// Prepare readies s for a jail that runs as ID: bwrap maps ID to 0 inside
// (Spec.RootView), and masks that ID cannot reach on the host (below a
// directory it may not enter, outside every tree) are dropped, since the
// jail cannot reach them either and bwrap could not mount over them. It
// returns the trees to map, or why the view cannot be had.
func Prepare(s *sandbox.Spec) ([]string, error) {
	trees := Trees(s)
	for _, t := range trees {
		if d := blocked(t, trees); d != "" {
			return nil, fmt.Errorf("root's jail runs as uid %d on the host and cannot enter %s, above %s (fix: chmod o+x %s, or start the agent from a directory every user can reach)", ID, d, t, d)
		}
	}
	masks := s.Masks[:0:0]
	for _, m := range s.Masks {
		if blocked(m.Path, trees) == "" {
			masks = append(masks, m)
		}
	}
	s.Masks = masks
	s.RootView = true
	return trees, nil
}

// blocked is the first directory above p that ID may not enter (no search
// bit for others), or "": a directory in one of trees is entered through
// the view.
func blocked(p string, trees []string) string {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		inTree := false
		for _, t := range trees {
			if d == t || within(d, t) {
				inTree = true
				break
			}
		}
		if !inTree {
			var st unix.Stat_t
			if err := unix.Stat(d, &st); err == nil && st.Mode&0o001 == 0 {
				return d
			}
		}
		if d == "/" {
			return ""
		}
	}
}

// idFiles are where a local account or subordinate range would take ID.
var idFiles = []string{"/etc/passwd", "/etc/group", "/etc/subuid", "/etc/subgid"}

// free checks that no local account, group or subordinate id range has
// ID: the jail would read and own that account's files.
func free() error {
	for _, f := range idFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // no such file: nothing takes the id there
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			if who := takes(f, string(l)); who != "" {
				return fmt.Errorf("%s gives %s the id %d, which root's jail runs as on the host (fix: move that entry to another id)", f, who, ID)
			}
		}
	}
	return nil
}

// takes names the entry of line (of file f) that has ID, or "".
func takes(f, line string) string {
	fields := strings.Split(line, ":")
	if strings.HasPrefix(line, "#") || len(fields) < 3 {
		return ""
	}
	if strings.HasSuffix(f, "/subuid") || strings.HasSuffix(f, "/subgid") {
		first, err1 := strconv.ParseUint(fields[1], 10, 32)
		n, err2 := strconv.ParseUint(fields[2], 10, 32)
		if err1 == nil && err2 == nil && first <= ID && ID < first+n {
			return fields[0] + "'s range " + fields[1] + ":" + fields[2]
		}
		return ""
	}
	if fields[2] == strconv.Itoa(ID) {
		return fields[0]
	}
	return ""
}

// Start starts bwrap (argv with argv[0]) as ID, in a mount namespace
// where each of trees is an idmapped mount (seen through a user namespace
// that maps 0 to ID), and returns its pid. bwrap is started stopped (under
// ptrace, at its exec) and let go once the mounts are in place: its own
// process holds the mount namespace, so no other process is started for it.
//
// The calling goroutine's thread enters that mount namespace to attach the
// mounts, and comes back before the call returns. Should it fail to come
// back, it stays locked to the goroutine (nothing else ever runs there),
// and the launch is refused.
func Start(bwrap string, argv []string, attr *syscall.ProcAttr, trees []string) (int, error) {
	runtime.LockOSThread()
	home, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return 0, fmt.Errorf("the launcher's mount namespace: %w", err)
	}
	defer unix.Close(home)
	pid, err := start(bwrap, argv, attr, trees, home)
	if err == nil || !errors.Is(err, errStranded) {
		runtime.UnlockOSThread()
	}
	return pid, err
}

// errStranded marks a thread that could not return to the launcher's
// mount namespace.
var errStranded = errors.New("the launcher could not return to its mount namespace")

// steps are the system calls that can fail for a tree, a test seam for a
// filesystem that cannot be idmapped.
var steps = struct {
	setattr func(fd int, attr *unix.MountAttr) error
}{
	setattr: func(fd int, attr *unix.MountAttr) error {
		return unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr)
	},
}

func start(bwrap string, argv []string, attr *syscall.ProcAttr, trees []string, home int) (int, error) {
	userns, err := mapping()
	if err != nil {
		return 0, err
	}
	defer unix.Close(userns)
	// The copies are made from the host's view, before bwrap starts.
	fds := make([]int, 0, len(trees))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, t := range trees {
		fd, err := idmapped(t, userns)
		if err != nil {
			return 0, err
		}
		fds = append(fds, fd)
	}
	a := *attr
	sys := syscall.SysProcAttr{}
	if attr.Sys != nil {
		sys = *attr.Sys
	}
	// ID, with no supplementary groups (root's would still be root's),
	// in a mount namespace of its own; started as a vfork, which is
	// cheap (a new user namespace here would cost a full fork).
	sys.Cloneflags |= syscall.CLONE_NEWNS
	sys.Credential = &syscall.Credential{Uid: ID, Gid: ID, Groups: []uint32{}}
	sys.Ptrace = true
	a.Sys = &sys
	pid, err := syscall.ForkExec(bwrap, argv, &a)
	if err != nil {
		return 0, err
	}
	if err := place(pid, trees, fds, home); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		reap(pid)
		return 0, err
	}
	return pid, nil
}

// place attaches the idmapped copies fds at trees in the mount namespace of
// pid, which is on its way to a stop at its exec, then lets it go once it
// is there; the thread returns to home. bwrap runs none of its code
// before it is let go, so the mounts are in place before it looks.
func place(pid int, trees []string, fds []int, home int) error {
	if err := attach(pid, trees, fds, home); err != nil {
		return err
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		return fmt.Errorf("it did not stop at its start (%v)", err)
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		return fmt.Errorf("letting it go: %w", err)
	}
	return nil
}

func attach(pid int, trees []string, fds []int, home int) (err error) {
	mntns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("root's jail's mount namespace: %w", err)
	}
	defer unix.Close(mntns)
	// The thread has a filesystem context of its own from here on (the
	// same root and directory); the launcher never changes either.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("root's jail's mount namespace: %w", err)
	}
	if err := unix.Setns(mntns, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("root's jail's mount namespace: %w", err)
	}
	defer func() {
		if e := unix.Setns(home, unix.CLONE_NEWNS); e != nil {
			err = fmt.Errorf("%w: %v", errStranded, e)
		}
	}()
	// Nothing attached here may propagate to the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("root's jail's mount namespace: %w", err)
	}
	for i, t := range trees {
		if err := unix.MoveMount(fds[i], "", unix.AT_FDCWD, t, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("root's view of %s: %w", t, err)
		}
	}
	return nil
}

// idmapped is a detached copy of tree seen through userns: root's files
// there are ID's.
func idmapped(tree string, userns int) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, tree, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return -1, fmt.Errorf("root's view of %s: %w (fix: start the agent from an existing directory)", tree, err)
	}
	if err := steps.setattr(fd, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("root's view of %s: its filesystem cannot be idmapped (%w), so root's jail could not write it "+
			"(fix: keep the workspace, the home and allow_write on a filesystem with idmapped mounts, such as ext4, xfs, btrfs or tmpfs, "+
			"or run the agent as a user other than root)", tree, err)
	}
	return fd, nil
}

// Pin is where the user namespace that maps 0 to ID is kept between
// launches (a bind mount of its namespace file, in a directory only root
// may enter; gone at reboot): making one costs a process start, about as
// much as the rest of the view.
var Pin = "/run/cco-rootview/userns-" + strconv.Itoa(ID)

// mapping is a descriptor of the user namespace that maps 0 to ID (uid and
// gid): the pinned one, or a new one, pinned for the next launches.
func mapping() (int, error) {
	if fd, err := unix.Open(Pin, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0); err == nil {
		if pinned(fd) {
			return fd, nil
		}
		unix.Close(fd)
	}
	// Checked as the mapping is made, once a boot: an account given ID
	// later is found at the next boot.
	if err := free(); err != nil {
		return -1, err
	}
	fd, err := newMapping()
	if err == nil {
		pin(fd)
	}
	return fd, err
}

// pinned reports whether fd is a user namespace that root made: only root
// can mount one at Pin, whose directory only root may enter.
func pinned(fd int) bool {
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil || fs.Type != unix.NSFS_MAGIC {
		return false
	}
	if t, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE); err != nil || t != unix.CLONE_NEWUSER {
		return false
	}
	var owner uint32
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.NS_GET_OWNER_UID, uintptr(unsafe.Pointer(&owner)))
	return e == 0 && owner == 0
}

// pin keeps the namespace fd at Pin, if it can: without, the next launch
// makes another.
func pin(fd int) {
	dir := filepath.Dir(Pin)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return
	}
	var st unix.Stat_t
	if unix.Lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Mode&0o077 != 0 {
		return // not root's own directory: nothing is kept there
	}
	f, err := unix.Open(Pin, unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return
	}
	unix.Close(f)
	unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), Pin, "", unix.MS_BIND, "")
}

// newMapping makes the user namespace: a child in it, stopped at its exec
// (under ptrace: it runs nothing), then killed. The calling thread must be
// locked (ptrace ties the child to it).
func newMapping() (int, error) {
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: ID, Size: 1}}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"cco-rootview"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m, Ptrace: true, Pdeathsig: syscall.SIGKILL,
	}})
	if err != nil {
		return -1, fmt.Errorf("a user namespace for root's jail: %w (fix: allow user namespaces, e.g. sysctl user.max_user_namespaces=15000)", err)
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	syscall.Kill(pid, syscall.SIGKILL)
	reap(pid)
	if err != nil {
		return -1, fmt.Errorf("a user namespace for root's jail: %w", err)
	}
	return fd, nil
}

func reap(pid int) {
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			return
		}
	}
}

// Detach is the idmapped copy of each of trees, as detached mounts, for
// cco's own jail engine: its child places them at their paths in the
// jail's mount namespace before it builds the tree. The caller closes them.
func Detach(trees []string) ([]int, error) {
	userns, err := mapping()
	if err != nil {
		return nil, err
	}
	defer unix.Close(userns)
	fds := make([]int, 0, len(trees))
	for _, t := range trees {
		fd, err := idmapped(t, userns)
		if err != nil {
			for _, f := range fds {
				unix.Close(f)
			}
			return nil, err
		}
		fds = append(fds, fd)
	}
	return fds, nil
}
