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

// Home is a user's home directory opened for work done as root. Work in
// users' homes is where installers get exploited: a user who makes
// ~/.local/bin a symlink to /etc would have root write there. So every path
// below the home is resolved with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: a
// symlink anywhere on the way is refused, never followed. Only the final
// component may be a symlink, and then it is looked at (Lstat, Readlink) or
// moved, never followed.
type Home struct {
	User *User
	root *Root
	fd   int
}

// OpenHome opens u's home inside the root. The path to the home itself is
// root's to arrange (/home may be a link to /var/home), so it is resolved
// like any target path; below it, nothing is followed.
func (r *Root) OpenHome(u *User) (*Home, error) {
	fd, err := r.openat2(u.Home, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("home of %s: %w", u.Name, err)
	}
	return &Home{User: u, root: r, fd: fd}, nil
}

// Close releases the home's descriptor.
func (h *Home) Close() error { return unix.Close(h.fd) }

// Path names rel (relative to the home) as a target-system path.
func (h *Home) Path(rel string) string { return path.Join(h.User.Home, rel) }

func (h *Home) beneath(rel string, flags uint64) (int, error) {
	rel = path.Clean(rel)
	if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, fmt.Errorf("%q is not a path inside the home", rel)
	}
	for {
		fd, err := unix.Openat2(h.fd, rel, &unix.OpenHow{
			Flags:   flags | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err == unix.ELOOP || err == unix.EXDEV {
			return -1, &fs.PathError{Op: "open", Path: h.root.HostPath(h.Path(rel)), Err: fmt.Errorf("a symlink is on the way; refusing to follow it in a user's home")}
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: h.root.HostPath(h.Path(rel)), Err: err}
		}
		return fd, nil
	}
}

// at opens the parent of rel without following any symlink and names the
// final component through it.
func (h *Home) at(rel string) (string, func(), error) {
	dir, base := path.Split(path.Clean(rel))
	if base == "" || base == "." || base == ".." {
		return "", nil, fmt.Errorf("%q names no file in the home", rel)
	}
	if dir == "" {
		dir = "."
	}
	fd, err := h.beneath(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, base), func() { unix.Close(fd) }, nil
}

func (h *Home) rewrap(rel string, err error) error { return h.root.rewrap(h.Path(rel), err) }

// Lstat describes rel without following it.
func (h *Home) Lstat(rel string) (fs.FileInfo, error) {
	p, done, err := h.at(rel)
	if err != nil {
		return nil, err
	}
	defer done()
	fi, err := os.Lstat(p)
	return fi, h.rewrap(rel, err)
}

// Readlink reads the symlink rel.
func (h *Home) Readlink(rel string) (string, error) {
	p, done, err := h.at(rel)
	if err != nil {
		return "", err
	}
	defer done()
	s, err := os.Readlink(p)
	return s, h.rewrap(rel, err)
}

// ReadFile reads rel; no symlink is followed, not even the last.
func (h *Home) ReadFile(rel string) ([]byte, error) {
	fd, err := h.beneath(rel, unix.O_RDONLY|unix.O_NOFOLLOW)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), h.root.HostPath(h.Path(rel)))
	defer f.Close()
	return io.ReadAll(f)
}

// WriteFile atomically replaces the regular file rel, keeping it the user's.
// A symlink at rel is refused (it may be a dotfile manager's, and it may
// point anywhere): the operator edits such a file by hand.
func (h *Home) WriteFile(rel string, data []byte, mode fs.FileMode) error {
	if fi, err := h.Lstat(rel); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (a symlink?): edit it by hand", h.root.HostPath(h.Path(rel)))
	}
	p, done, err := h.at(rel)
	if err != nil {
		return err
	}
	defer done()
	t, err := renameio.TempFile(filepath.Dir(p), p)
	if err != nil {
		return h.rewrap(rel, err)
	}
	defer t.Cleanup()
	if _, err := t.Write(data); err != nil {
		return h.rewrap(rel, err)
	}
	if err := t.Chmod(mode); err != nil {
		return h.rewrap(rel, err)
	}
	if err := fchown(t.File, h.User.UID, h.User.GID); err != nil {
		return h.rewrap(rel, err)
	}
	return h.rewrap(rel, t.CloseAtomicallyReplace())
}

// MoveOut moves rel (a file or a symlink, never followed) to dst, a target
// path outside the home (under /var/lib/cco/relocated), through descriptors
// held on both parents, so the user cannot swap a directory in between.
func (h *Home) MoveOut(rel, dst string) error {
	src, doneS, err := h.at(rel)
	if err != nil {
		return err
	}
	defer doneS()
	to, doneD, err := h.root.at(dst)
	if err != nil {
		return err
	}
	defer doneD()
	if err := os.Rename(src, to); err != nil {
		if !errors.Is(err, syscall.EXDEV) {
			return fmt.Errorf("moving %s to %s: %w", h.Path(rel), dst, unwrapLink(err))
		}
		if err := copyTree(src, to); err != nil {
			return fmt.Errorf("copying %s to %s: %w", h.Path(rel), dst, err)
		}
		if err := os.Remove(src); err != nil {
			return fmt.Errorf("removing %s after copying it: %w", h.Path(rel), err)
		}
	}
	return nil
}

// MoveIn puts a file that MoveOut moved back at rel in the home (uninstall).
func (h *Home) MoveIn(src, rel string) error {
	from, doneS, err := h.root.at(src)
	if err != nil {
		return err
	}
	defer doneS()
	to, doneD, err := h.at(rel)
	if err != nil {
		return err
	}
	defer doneD()
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("%s exists again: the original stays at %s", h.Path(rel), src)
	}
	if err := os.Rename(from, to); err != nil {
		if !errors.Is(err, syscall.EXDEV) {
			return fmt.Errorf("moving %s back to %s: %w", src, h.Path(rel), unwrapLink(err))
		}
		if err := copyTree(from, to); err != nil {
			return err
		}
		return os.Remove(from)
	}
	return nil
}

// Symlink creates the symlink rel -> target in the home, owned by the user.
func (h *Home) Symlink(target, rel string) error {
	p, done, err := h.at(rel)
	if err != nil {
		return err
	}
	defer done()
	if err := os.Symlink(target, p); err != nil {
		return h.rewrap(rel, err)
	}
	return h.rewrap(rel, chown(p, h.User.UID, h.User.GID))
}
