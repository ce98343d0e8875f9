package engine

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// builder makes the jail's tree. Until the final pivot the process's root
// is a scratch tmpfs holding the host's root at /oldroot and the jail's at
// /newroot; every operation works on descriptors from there.
type builder struct {
	host    int // O_PATH of the host's root (/oldroot)
	root    int // O_PATH of the jail's root (/newroot), once bound
	scratch int // O_PATH of the scratch tmpfs's /data, for files made from data
	ndata   int
	// writable are the trees whose contents someone other than this launch
	// may change while the jail is built (every bind of a host path a user
	// owns): a path in one is resolved from its mount, never by following
	// a link, and each mount point there is opened once.
	writable []tree
	// sources are the launcher's checked bind sources, by descriptor: the
	// host path each had when it was opened.
	sources map[int]string
	// skipped are covers left out because what they cover is not there
	// and cannot be made (errAbsent).
	skipped map[string]bool
}

// errAbsent is a mount point that does not exist in a read-only tree: a
// cover (a mask) there has nothing to hide, and nothing in the jail can
// make it. A host path a mask names can go away while the jail is built
// (another user's home, a socket): bwrap fails the launch then.
var errAbsent = errors.New("absent from a read-only tree")

// tree is a mount the builder made, held open.
type tree struct {
	dst string
	fd  int
}

const resolveSafe = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// base is where p is resolved from: the innermost writable tree holding it
// (no link followed, nothing above it), or the jail's root (links followed
// inside the jail's root, as bwrap does: those trees are root's).
func (b *builder) base(p string) (fd int, rel string, how uint64) {
	best := -1
	for i, t := range b.writable {
		if within(p, t.dst) && (best < 0 || len(t.dst) > len(b.writable[best].dst)) {
			best = i
		}
	}
	if best >= 0 {
		t := b.writable[best]
		rel = strings.TrimPrefix(strings.TrimPrefix(p, t.dst), "/")
		return t.fd, rel, resolveSafe
	}
	return b.root, strings.TrimPrefix(p, "/"), unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS
}

func openHow(dir int, rel string, flags uint64, how uint64) (int, error) {
	if rel == "" {
		rel = "."
	}
	for {
		fd, err := unix.Openat2(dir, rel, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: how})
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

// target opens p in the jail's tree as a mount point, making it (a
// directory, or an empty file when file) where it is missing.
func (b *builder) target(p string, file bool) (int, error) {
	dir, rel, how := b.base(p)
	flags := uint64(unix.O_PATH)
	if how&unix.RESOLVE_NO_SYMLINKS != 0 {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := openHow(dir, rel, flags, how)
	if err == nil {
		if how&unix.RESOLVE_NO_SYMLINKS != 0 {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
				unix.Close(fd)
				return -1, fmt.Errorf("%s is a symbolic link, which the jail never follows", p)
			}
		}
		return fd, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return -1, pathErr(p, err)
	}
	// Made one component at a time, each opened from its parent's
	// descriptor: nothing made here is looked up by name again.
	parent, err := b.dir(dir, path.Dir("/"+rel), how, p)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	name := path.Base("/" + rel)
	if file {
		f, err := unix.Openat(parent, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			if errors.Is(err, unix.EROFS) {
				return -1, fmt.Errorf("%s: %w: %w", p, errAbsent, err)
			}
			return -1, pathErr(p, err)
		}
		if err == nil {
			unix.Close(f)
		}
	} else if err := unix.Mkdirat(parent, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		if errors.Is(err, unix.EROFS) {
			return -1, fmt.Errorf("%s: %w: %w", p, errAbsent, err)
		}
		return -1, pathErr(p, err)
	}
	fd, err = unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, pathErr(p, err)
	}
	return fd, nil
}

// dir opens the directory rel below from, making what is missing.
func (b *builder) dir(from int, rel string, how uint64, p string) (int, error) {
	rel = strings.TrimPrefix(rel, "/")
	fd, err := openHow(from, rel, unix.O_PATH|unix.O_DIRECTORY, how)
	if err == nil || !errors.Is(err, unix.ENOENT) || rel == "" {
		if err != nil {
			return -1, pathErr(p, err)
		}
		return fd, nil
	}
	parent, err := b.dir(from, path.Dir("/"+rel), how, p)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	name := path.Base("/" + rel)
	if err := unix.Mkdirat(parent, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		if errors.Is(err, unix.EROFS) {
			return -1, fmt.Errorf("%s: %w: %w", p, errAbsent, err)
		}
		return -1, pathErr(p, err)
	}
	fd, err = unix.Openat(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, pathErr(p, err)
	}
	return fd, nil
}

func pathErr(p string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("%s is, or lies below, a symbolic link in a tree the session can write, which the jail never follows (fix: rm the link, or replace it with what it points to)", p)
	}
	return &os.PathError{Op: "jail", Path: p, Err: err}
}

// attach moves the detached mount src onto p (made like its source: a file
// or a directory) and forgets any writable tree it covers.
func (b *builder) attach(src int, p string, file bool) error {
	t, err := b.target(p, file)
	if err != nil {
		return err
	}
	defer unix.Close(t)
	if err := unix.MoveMount(src, "", t, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting on %s: %w", p, err)
	}
	b.forget(p)
	return nil
}

// forget drops the writable trees at p: a mount covers them.
func (b *builder) forget(p string) {
	w := b.writable[:0]
	for _, t := range b.writable {
		if t.dst == p {
			unix.Close(t.fd)
			continue
		}
		w = append(w, t)
	}
	b.writable = w
}

// isFile reports whether fd is not a directory.
func isFile(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR
}

// clone is a recursive detached copy of the tree at fd, with attr set.
func clone(fd int, attr uint64) (int, error) {
	t, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, err
	}
	if attr != 0 {
		if err := unix.MountSetattr(t, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
			unix.Close(t)
			return -1, err
		}
	}
	return t, nil
}

// bind binds the host tree src (opened) at dst.
func (b *builder) bind(src int, dst string, rw, hostWritable bool) error {
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if !rw {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	t, err := clone(src, attr)
	if err != nil {
		return fmt.Errorf("binding %s: %w", dst, err)
	}
	if err := b.attach(t, dst, isFile(src)); err != nil {
		unix.Close(t)
		return err
	}
	if hostWritable {
		b.writable = append(b.writable, tree{dst: dst, fd: t})
	} else {
		unix.Close(t)
	}
	return nil
}

// hostPath opens a root-owned host path (a System bind, /dev/null, the
// egress socket): links are followed inside the host's root.
func (b *builder) hostPath(p string) (int, error) {
	fd, err := openHow(b.host, strings.TrimPrefix(p, "/"), unix.O_PATH, unix.RESOLVE_IN_ROOT|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// source reopens the launcher's checked source fd in this mount namespace
// (a mount of another namespace cannot be cloned): its path, resolved from
// the host's root without following any link, must still be the very file
// the launcher opened, or the jail is refused.
func (b *builder) source(fd int) (int, string, error) {
	p, ok := b.sources[fd]
	if !ok {
		return -1, "", fmt.Errorf("descriptor %d is not a bind source", fd)
	}
	nfd, err := openHow(b.host, strings.TrimPrefix(p, "/"), unix.O_PATH|unix.O_NOFOLLOW, resolveSafe)
	if err != nil {
		return -1, p, pathErr(p, err)
	}
	var a, c unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		unix.Close(nfd)
		return -1, p, err
	}
	if err := unix.Fstat(nfd, &c); err != nil || a.Dev != c.Dev || a.Ino != c.Ino {
		unix.Close(nfd)
		return -1, p, fmt.Errorf("%s was replaced while the jail was built (fix: launch again)", p)
	}
	return nfd, p, nil
}

// tmpfs is a new detached tmpfs.
func tmpfs(mode uint32, size int64, attr uint64) (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", "0"+strconv.FormatUint(uint64(mode), 8)); err != nil {
		return -1, err
	}
	if size > 0 {
		if err := unix.FsconfigSetString(fs, "size", strconv.FormatInt(size, 10)); err != nil {
			return -1, err
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, err
	}
	return unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, int(attr))
}

// dataFile is a read-only file holding the contents of the pipe fd, bound
// at dst: written in the scratch tmpfs (gone with it at the pivot), then
// cloned.
func (b *builder) dataFile(fd int, dst string, mode uint32) error {
	f := os.NewFile(uintptr(fd), "data")
	data, err := readAll(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("the contents of %s: %w", dst, err)
	}
	b.ndata++
	name := strconv.Itoa(b.ndata)
	w, err := unix.Openat(b.scratch, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, mode)
	if err != nil {
		return fmt.Errorf("the contents of %s: %w", dst, err)
	}
	for rest := data; len(rest) > 0; {
		n, err := unix.Write(w, rest)
		if err != nil {
			unix.Close(w)
			return fmt.Errorf("the contents of %s: %w", dst, err)
		}
		rest = rest[n:]
	}
	unix.Fchmod(w, mode)
	unix.Close(w)
	src, err := openHow(b.scratch, name, unix.O_PATH|unix.O_NOFOLLOW, resolveSafe)
	if err != nil {
		return err
	}
	defer unix.Close(src)
	t, err := clone(src, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("binding %s: %w", dst, err)
	}
	if err := b.attach(t, dst, true); err != nil {
		unix.Close(t)
		return err
	}
	unix.Close(t)
	return nil
}

func readAll(f *os.File) ([]byte, error) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(int(f.Fd()), buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

func fileOf(fd int) *os.File { return os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)) }
