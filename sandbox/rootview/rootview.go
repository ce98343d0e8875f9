// Package rootview starts root's jail in a remapped view of the host.
//
// bwrap runs as root of a user namespace that maps 0 to the unprivileged
// host uid and gid ID. A file that only root can read (owner root, no read bit for group
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
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/cco-dev/cco/sandbox"
	"golang.org/x/sys/unix"
)

// ID is the host uid and gid root's jail runs as. It lies in the range
// systemd leaves unused (65536-524287), above the 16-bit ids (nobody is
// 65534) and below useradd's first subordinate id (SUB_UID_MIN 100000), so
// no account, no dynamic or homed user and no container's subuid range
// has it. Start refuses where the host's own files say otherwise.
const ID = 93376 // 0x16cc0

// Applies reports whether a launch by uid uses the view: root's only.
// Every other user's jail already reads what that user may read.
func Applies(uid int) bool { return uid == 0 }

// Trees are the host paths the view maps back to root, from the Spec: the
// home (its login state is bound from it, and bwrap, being ID, must enter
// it), the workspace, the read-write binds and the egress socket's
// directory. A path below another is covered by it.
func Trees(s *sandbox.Spec) []string {
	var cand []string
	add := func(p string) {
		if p != "" {
			cand = append(cand, filepath.Clean(p))
		}
	}
	add(s.Home)
	add(s.Workspace)
	for _, list := range [][]sandbox.Bind{s.HomeBinds, s.Writable} {
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

// Prepare readies s for a jail that runs as ID: masks that ID cannot reach
// on the host (below a directory it may not enter, outside every tree) are
// dropped, since the jail cannot reach them either and bwrap could not
// mount over them. It returns the trees to map, or why the view cannot be
// had.
func Prepare(s *sandbox.Spec) ([]string, error) {
	if err := free(); err != nil {
		return nil, err
	}
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

// Start starts bwrap (argv with argv[0]) as root of a user namespace that
// maps 0 to ID, in a mount namespace where each of trees is an idmapped
// mount, and returns its pid. bwrap is started stopped (under ptrace, at
// its exec) and let go once the mounts are in place: its own process is
// the namespaces' holder, so no other process is started for them.
//
// The calling goroutine's thread enters the jail's mount namespace to
// attach the mounts, and comes back before the call returns. Should it
// fail to come back, it stays locked to the goroutine, which then runs
// there (nothing else ever does), and the launch is refused.
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
	a := *attr
	sys := syscall.SysProcAttr{}
	if attr.Sys != nil {
		sys = *attr.Sys
	}
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: ID, Size: 1}}
	sys.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
	sys.UidMappings, sys.GidMappings = m, m
	// Root in the namespace, with no supplementary groups (root's would
	// still be the host's): setgroups stays allowed for that one call;
	// bwrap denies it in the jail's own namespace.
	sys.GidMappingsEnableSetgroups = true
	sys.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	sys.Ptrace = true
	a.Sys = &sys
	pid, err := syscall.ForkExec(bwrap, argv, &a)
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", bwrap, err)
	}
	if err := place(pid, trees, home); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		reap(pid)
		return 0, err
	}
	return pid, nil
}

// place puts the idmapped trees into the mount namespace of pid, stopped at
// its exec, and lets it go; the thread then returns to home.
func place(pid int, trees []string, home int) (err error) {
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		return fmt.Errorf("starting bwrap for root's jail: it did not stop at its start (%v)", err)
	}
	proc := "/proc/" + strconv.Itoa(pid) + "/ns/"
	userns, err := unix.Open(proc+"user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("root's jail's user namespace: %w", err)
	}
	defer unix.Close(userns)
	mntns, err := unix.Open(proc+"mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("root's jail's mount namespace: %w", err)
	}
	defer unix.Close(mntns)
	// The copies are made from the host's view, then attached in the
	// jail's namespace (a copy of the host's, whose changes never
	// propagate back: it belongs to a less privileged user namespace).
	fds := make([]int, 0, len(trees))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, t := range trees {
		fd, err := idmapped(t, userns)
		if err != nil {
			return err
		}
		fds = append(fds, fd)
	}
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("root's jail's mount namespace: %w", err)
	}
	// The thread has a filesystem context of its own from here on (the
	// same root and directory); the launcher never changes either.
	if err := unix.Setns(mntns, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("root's jail's mount namespace: %w", err)
	}
	defer func() {
		if e := unix.Setns(home, unix.CLONE_NEWNS); e != nil {
			err = fmt.Errorf("%w: %v", errStranded, e)
		}
	}()
	for i, t := range trees {
		if err := unix.MoveMount(fds[i], "", unix.AT_FDCWD, t, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("root's view of %s: %w", t, err)
		}
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		return fmt.Errorf("starting bwrap for root's jail: %w", err)
	}
	return nil
}

// idmapped is a detached copy of tree seen through userns: root's files
// there are the namespace's root's.
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

func reap(pid int) {
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			return
		}
	}
}
