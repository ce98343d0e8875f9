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

// Prepare readies s for a jail that runs as ID: bwrap maps ID to 0 inside
// (Spec.RootView), and masks that ID cannot reach on the host (below a
// directory it may not enter, outside every tree) are dropped: the jail
// cannot reach them either, and bwrap could not mount over them. It
// returns the trees to map, or why the view cannot be had.
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
	s.RootView = true
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

// Start starts bwrap (argv with argv[0]) as ID, in a mount namespace of
// its own where each of trees is an idmapped mount, and returns its pid.
// The namespace is made on a locked thread that ends with the call: no
// other work of the process ever runs in it.
func Start(bwrap string, argv []string, attr *syscall.ProcAttr, trees []string) (int, error) {
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread's mount namespace is the jail's,
		// so the runtime ends the thread with this goroutine.
		runtime.LockOSThread()
		pid, err := start(bwrap, argv, attr, trees)
		done <- result{pid, err}
	}()
	r := <-done
	return r.pid, r.err
}

// steps are the system calls of start, a test seam for a filesystem that
// cannot be mapped.
var steps = struct {
	setattr func(fd int, attr *unix.MountAttr) error
}{
	setattr: func(fd int, attr *unix.MountAttr) error {
		return unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr)
	},
}

func start(bwrap string, argv []string, attr *syscall.ProcAttr, trees []string) (int, error) {
	ns, err := userns()
	if err != nil {
		return 0, err
	}
	defer unix.Close(ns)
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return 0, fmt.Errorf("a mount namespace for root's jail: %w", err)
	}
	// Nothing mounted here may reach the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return 0, fmt.Errorf("a mount namespace for root's jail: %w", err)
	}
	for _, t := range trees {
		if err := idmap(t, ns); err != nil {
			return 0, err
		}
	}
	a := *attr
	sys := syscall.SysProcAttr{}
	if attr.Sys != nil {
		sys = *attr.Sys
	}
	// No supplementary groups: root's would still be the host's.
	sys.Credential = &syscall.Credential{Uid: ID, Gid: ID, Groups: []uint32{}}
	a.Sys = &sys
	pid, err := syscall.ForkExec(bwrap, argv, &a)
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", bwrap, err)
	}
	return pid, nil
}

// idmap covers tree, in this thread's mount namespace, with a copy of
// itself seen through ns: root's files there are the jail's.
func idmap(tree string, ns int) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, tree, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("root's view of %s: %w (fix: start the agent from an existing directory)", tree, err)
	}
	defer unix.Close(fd)
	if err := steps.setattr(fd, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}); err != nil {
		return fmt.Errorf("root's view of %s: its filesystem cannot be idmapped (%w), so root's jail could not write it "+
			"(fix: keep the workspace, the home and allow_write on a filesystem with idmapped mounts, such as ext4, xfs, btrfs or tmpfs, "+
			"or run the agent as a user other than root)", tree, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, tree, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("root's view of %s: %w", tree, err)
	}
	return nil
}

// userns is a descriptor of a user namespace that maps 0 to ID, uid and
// gid: the one idmapped mounts see root's files through. It comes from a
// child stopped at its exec (under ptrace: it runs nothing), then killed.
// The calling thread must be locked (ptrace ties the child to it).
func userns() (int, error) {
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: ID, Size: 1}}
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"cco-rootview"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m, Ptrace: true, Pdeathsig: syscall.SIGKILL,
	}})
	if err != nil {
		return -1, fmt.Errorf("a user namespace for root's jail: %w (fix: allow user namespaces, e.g. sysctl user.max_user_namespaces=15000)", err)
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	syscall.Kill(pid, syscall.SIGKILL)
	var ws syscall.WaitStatus
	for {
		if _, werr := syscall.Wait4(pid, &ws, 0, nil); werr != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return -1, fmt.Errorf("a user namespace for root's jail: %w", err)
	}
	return fd, nil
}
