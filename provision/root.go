package provision

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// Root is the target system: every path the installer touches is a
// target-system absolute path ("/usr/local/bin/claude") resolved inside Root.
// Resolution uses openat2(RESOLVE_IN_ROOT), so a symlink in the target tree
// (absolute or "..") can never lead a write out of it: under --root the root
// is a jail for the installer too, exactly as it will be a chroot later.
//
// Operations open the parent directory through openat2 and then act on the
// final name through /proc/self/fd/N/<name>; the final component is never
// followed unless the operation says so (Open, ReadFile).
type Root struct {
	dir string
	fd  int
	// resolve is how paths below the root are resolved: RESOLVE_IN_ROOT for
	// a target system; RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS for a user's home
	// (see Home).
	resolve uint64
}

// OpenRoot opens dir as the target system's "/". The directory must exist.
func OpenRoot(dir string) (*Root, error) {
	if dir == "" {
		dir = "/"
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("root %q: %w", dir, err)
	}
	fd, err := unix.Open(abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening root %s: %w (create it first, or pass an existing directory to --root)", abs, err)
	}
	return &Root{dir: abs, fd: fd, resolve: unix.RESOLVE_IN_ROOT}, nil
}

// Close releases the root's directory descriptor.
func (r *Root) Close() error { return unix.Close(r.fd) }

// Dir is the host directory that is the target system's "/".
func (r *Root) Dir() string { return r.dir }

// IsHost reports whether the root is the machine's own "/".
func (r *Root) IsHost() bool { return r.dir == "/" }

// HostPath names a target path as it is seen from the host, for messages and
// for tools that need a plain path. Never use it for a write: it does not
// stop a symlink out of the root.
func (r *Root) HostPath(target string) string {
	return filepath.Join(r.dir, clean(target))
}

// clean turns a target path into its canonical absolute form.
func clean(target string) string {
	return path.Clean("/" + target)
}

func (r *Root) openat2(target string, flags uint64, resolve uint64) (int, error) {
	rel := strings.TrimPrefix(clean(target), "/")
	if rel == "" {
		rel = "."
	}
	for {
		fd, err := unix.Openat2(r.fd, rel, &unix.OpenHow{
			Flags:   flags | unix.O_CLOEXEC,
			Mode:    0,
			Resolve: r.resolve | unix.RESOLVE_NO_MAGICLINKS | resolve,
		})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if (err == unix.ELOOP || err == unix.EXDEV) && (r.resolve|resolve)&unix.RESOLVE_NO_SYMLINKS != 0 {
			return -1, &fs.PathError{Op: "open", Path: r.HostPath(target), Err: fmt.Errorf("a symlink is on the way; refusing to follow it in a user's home: %w", unix.ELOOP)}
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: r.HostPath(target), Err: err}
		}
		return fd, nil
	}
}

// at resolves the parent of target inside the root and returns a path that
// names target's final component relative to that directory. The returned
// closer must be called when the path is no longer used.
func (r *Root) at(target string) (p string, done func(), err error) {
	t := clean(target)
	if t == "/" {
		return "", nil, fmt.Errorf("refusing to operate on the root itself")
	}
	fd, err := r.openat2(path.Dir(t), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, path.Base(t)), func() { unix.Close(fd) }, nil
}

// rewrap makes an error from a /proc/self/fd path name the target instead.
func (r *Root) rewrap(target string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: r.HostPath(target), Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return &fs.PathError{Op: le.Op, Path: r.HostPath(target), Err: le.Err}
	}
	return err
}

// Lstat describes target without following a final symlink.
func (r *Root) Lstat(target string) (fs.FileInfo, error) {
	p, done, err := r.at(target)
	if err != nil {
		return nil, err
	}
	defer done()
	fi, err := os.Lstat(p)
	return fi, r.rewrap(target, err)
}

// Open opens target for reading, following symlinks only inside the root.
// It opens with O_NONBLOCK: a FIFO where a file was expected cannot hold
// the open (and the run, and its lock) until someone writes to it.
func (r *Root) Open(target string) (*os.File, error) {
	fd, err := r.openat2(target, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), r.HostPath(target)), nil
}

// OpenNoFollow opens target for reading and refuses a symlink anywhere on the
// path: used in directories a user controls, such as homes. It opens with
// O_NONBLOCK and refuses, by name, anything but a regular file (a FIFO, a
// device, a socket): nothing a user plants can hold or flood the read.
func (r *Root) OpenNoFollow(target string) (*os.File, error) {
	fd, err := r.openat2(target, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, unix.RESOLVE_NO_SYMLINKS)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), r.HostPath(target))
	if err := regularOnly(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads target whole. Use it only for small files (configuration).
func (r *Root) ReadFile(target string) ([]byte, error) {
	f, err := r.Open(target)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Readlink returns the target of the symlink at target.
func (r *Root) Readlink(target string) (string, error) {
	p, done, err := r.at(target)
	if err != nil {
		return "", err
	}
	defer done()
	s, err := os.Readlink(p)
	return s, r.rewrap(target, err)
}

// MkdirAll creates target and its missing parents with mode and owner, and
// returns the directories it created (outermost first) so that a step can
// record them and an uninstall can remove exactly those.
func (r *Root) MkdirAll(target string, mode fs.FileMode, uid, gid int) ([]string, error) {
	t := clean(target)
	if t == "/" {
		return nil, nil
	}
	fi, err := r.Lstat(t)
	if err == nil {
		if fi.IsDir() {
			return nil, nil
		}
		// A symlink to a directory is acceptable: resolution stays inside the root.
		if fi.Mode()&fs.ModeSymlink != 0 {
			if fd, err := r.openat2(t, unix.O_PATH|unix.O_DIRECTORY, 0); err == nil {
				unix.Close(fd)
				return nil, nil
			}
		}
		return nil, fmt.Errorf("%s exists and is not a directory: move it away, then run again", r.HostPath(t))
	}
	// ENOTDIR: a parent is not a directory; the parent's turn below names
	// it and says what to do.
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return nil, err
	}
	created, err := r.MkdirAll(path.Dir(t), mode, uid, gid)
	if err != nil {
		return created, err
	}
	p, done, err := r.at(t)
	if err != nil {
		return created, err
	}
	defer done()
	if err := os.Mkdir(p, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return created, r.rewrap(t, err)
	} else if err == nil {
		created = append(created, t)
		// Owner first: a chown clears set-id bits that a chmod had set.
		if err := chown(p, uid, gid); err != nil {
			return created, r.rewrap(t, err)
		}
		if err := os.Chmod(p, mode); err != nil { // umask must not decide the mode
			return created, r.rewrap(t, err)
		}
	}
	return created, nil
}

// WriteFile atomically replaces target with the bytes of src, with mode and
// owner set explicitly before the rename, so that no reader ever sees a
// partial file or a file with the wrong mode. The parent must exist.
func (r *Root) WriteFile(target string, src io.Reader, mode fs.FileMode, uid, gid int) error {
	p, done, err := r.at(target)
	if err != nil {
		return err
	}
	defer done()
	t, err := renameio.TempFile(filepath.Dir(p), p)
	if err != nil {
		return r.rewrap(target, err)
	}
	defer t.Cleanup()
	if _, err := io.Copy(t, src); err != nil {
		return fmt.Errorf("writing %s: %w", r.HostPath(target), err)
	}
	// Owner first: a chown clears the setuid and setgid bits.
	if err := fchown(t.File, uid, gid); err != nil {
		return r.rewrap(target, err)
	}
	if err := t.Chmod(mode); err != nil {
		return r.rewrap(target, err)
	}
	if err := t.CloseAtomicallyReplace(); err != nil {
		return r.rewrap(target, err)
	}
	return nil
}

// Symlink atomically points target at linkTarget (a new link renamed over
// the old name, so the name is never missing).
func (r *Root) Symlink(linkTarget, target string) error {
	p, done, err := r.at(target)
	if err != nil {
		return err
	}
	defer done()
	if err := renameio.Symlink(linkTarget, p); err != nil {
		return r.rewrap(target, err)
	}
	return nil
}

// Remove removes target (a file, a link, or an empty directory).
func (r *Root) Remove(target string) error {
	p, done, err := r.at(target)
	if err != nil {
		return err
	}
	defer done()
	return r.rewrap(target, os.Remove(p))
}

// RemoveAll removes target and everything below it, never following a link.
func (r *Root) RemoveAll(target string) error {
	p, done, err := r.at(target)
	if err != nil {
		return err
	}
	defer done()
	return r.rewrap(target, os.RemoveAll(p))
}

// Rename moves from to to inside the root. Where rename crosses devices (an
// overlayfs lower layer in an image build, a bind-mounted directory), it
// copies to a temporary name beside the destination, renames that into place
// and only then removes the source, so nothing is lost if it is interrupted.
func (r *Root) Rename(from, to string) error { return move(r, from, r, to) }

// move renames from (in tree a) to to (in tree b) through descriptors held
// on both parents, with the copy fallback across devices.
func move(a *Root, from string, b *Root, to string) error {
	pf, doneF, err := a.at(from)
	if err != nil {
		return err
	}
	defer doneF()
	pt, doneT, err := b.at(to)
	if err != nil {
		return err
	}
	defer doneT()
	err = os.Rename(pf, pt)
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EXDEV) {
		return fmt.Errorf("moving %s to %s: %w", a.HostPath(from), b.HostPath(to), unwrapLink(err))
	}
	if err := copyTreeAt(pf, pt); err != nil {
		return fmt.Errorf("copying %s to %s across devices: %w", a.HostPath(from), b.HostPath(to), err)
	}
	if err := os.RemoveAll(pf); err != nil {
		return fmt.Errorf("removing %s after copying it: %w", a.HostPath(from), err)
	}
	return nil
}

// Lchown sets the owner of target itself (a link is not followed).
func (r *Root) Lchown(target string, uid, gid int) error {
	p, done, err := r.at(target)
	if err != nil {
		return err
	}
	defer done()
	return r.rewrap(target, chown(p, uid, gid))
}

func unwrapLink(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// chown sets an owner, tolerating EPERM only when the file already has the
// wanted owner (an unprivileged run under --root cannot chown at all, and the
// owner it wants is then its own).
func chown(p string, uid, gid int) error {
	if uid < 0 && gid < 0 {
		return nil
	}
	err := os.Lchown(p, uid, gid)
	if err != nil && errors.Is(err, fs.ErrPermission) {
		if fi, serr := os.Lstat(p); serr == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && (uid < 0 || int(st.Uid) == uid) && (gid < 0 || int(st.Gid) == gid) {
				return nil
			}
		}
	}
	return err
}

func fchown(f *os.File, uid, gid int) error {
	if uid < 0 && gid < 0 {
		return nil
	}
	err := f.Chown(uid, gid)
	if err != nil && errors.Is(err, fs.ErrPermission) {
		if fi, serr := f.Stat(); serr == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && (uid < 0 || int(st.Uid) == uid) && (gid < 0 || int(st.Gid) == gid) {
				return nil
			}
		}
	}
	return err
}
