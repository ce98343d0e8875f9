package provision

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// Home is a user's home directory opened for work done as root. Work in
// users' homes is where installers get exploited: a user who makes
// ~/.local/bin a symlink to /etc would have root write there. So every path
// below the home is resolved with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: a
// symlink anywhere on the way is refused, never followed. Only the final
// component may be a symlink, and then it is looked at (Lstat, Readlink) or
// moved, never followed. Paths given to its methods are relative to the home.
type Home struct {
	User *User
	root *Root
	tree *Root // the home as a tree of its own, resolved with no symlinks
}

// OpenHome opens u's home inside the root. The path to the home itself is
// root's to arrange (/home may be a link to /var/home), so it is resolved
// like any target path; below it, nothing is followed.
func (r *Root) OpenHome(u *User) (*Home, error) {
	fd, err := r.openat2(u.Home, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("home of %s: %w", u.Name, err)
	}
	tree := &Root{dir: r.HostPath(u.Home), fd: fd, resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	return &Home{User: u, root: r, tree: tree}, nil
}

// Close releases the home's descriptor.
func (h *Home) Close() error { return h.tree.Close() }

// Path names rel (relative to the home) as a target-system path.
func (h *Home) Path(rel string) string { return path.Join(h.User.Home, rel) }

// Lstat describes rel without following it.
func (h *Home) Lstat(rel string) (fs.FileInfo, error) { return h.tree.Lstat(rel) }

// Readlink reads the symlink rel.
func (h *Home) Readlink(rel string) (string, error) { return h.tree.Readlink(rel) }

// ReadFile reads rel through ReadCapped: no symlink is followed, not even
// the last, and only a regular file of at most MaxHomeFile bytes is read.
func (h *Home) ReadFile(rel string) ([]byte, error) { return ReadCapped(h.tree, rel) }

// WriteFile atomically replaces the regular file rel, keeping it the user's.
// A symlink at rel is refused (it may be a dotfile manager's, and it may
// point anywhere): the operator edits such a file by hand.
func (h *Home) WriteFile(rel string, data []byte, mode fs.FileMode) error {
	if fi, err := h.Lstat(rel); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (a symlink?): edit it by hand", h.tree.HostPath(rel))
	}
	return h.tree.WriteFile(rel, bytes.NewReader(data), mode, h.User.UID, h.User.GID)
}

// Symlink creates the symlink rel -> target in the home, owned by the user.
func (h *Home) Symlink(target, rel string) error {
	if err := h.tree.Symlink(target, rel); err != nil {
		return err
	}
	return h.tree.Lchown(rel, h.User.UID, h.User.GID)
}

// MkdirAll makes the directory rel and its missing parents in the home,
// the user's, with mode; nothing on the way is followed.
func (h *Home) MkdirAll(rel string, mode fs.FileMode) error {
	_, err := h.tree.MkdirAll(rel, mode, h.User.UID, h.User.GID)
	return err
}

// MoveOut moves rel (a file or a symlink, never followed) to dst, a target
// path outside the home (under /var/lib/cco/relocated), through descriptors
// held on both parents, so the user cannot swap a directory in between.
func (h *Home) MoveOut(rel, dst string) error { return move(h.tree, rel, h.root, dst) }

// MoveIn puts a file that MoveOut moved back at rel in the home (uninstall).
func (h *Home) MoveIn(src, rel string) error {
	if _, err := h.Lstat(rel); err == nil {
		return fmt.Errorf("%s exists again: the original stays at %s", h.Path(rel), src)
	}
	return move(h.root, src, h.tree, rel)
}

// OpenNoFollow opens rel for reading; no symlink is followed, not even the last.
func (h *Home) OpenNoFollow(rel string) (*os.File, error) { return h.tree.OpenNoFollow(rel) }
