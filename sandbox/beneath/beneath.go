// Package beneath makes and removes files in a tree a session can write
// without resolving any name by path: the tree's top is opened once, with no
// link in any component, and every name below it is resolved from that
// descriptor with openat2's RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_MAGICLINKS, then made, checked or removed with the *at calls
// relative to its parent's descriptor. A directory on the way that a
// session swapped for a link (rename-exchange, at any moment) fails the
// call with ELOOP or EXDEV; nothing is ever made or removed outside the
// tree (CVE-2026-87766's class, docs/adr/0120-mount-points-on-descriptors.md).
package beneath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is an opened tree top.
type Dir struct {
	fd   int
	path string
}

// resolve is how every name below a Dir is resolved.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Open opens the directory top, refusing a link in any of its components.
func Open(top string) (*Dir, error) {
	if !filepath.IsAbs(top) {
		return nil, &fs.PathError{Op: "open", Path: top, Err: errors.New("not an absolute path")}
	}
	fd, err := openat2(unix.AT_FDCWD, top, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC,
		unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: top, Err: err}
	}
	return &Dir{fd: fd, path: filepath.Clean(top)}, nil
}

// Close closes the tree's descriptor.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// Path is the tree's top as it was opened.
func (d *Dir) Path() string { return d.path }

// FD is the tree's descriptor (O_PATH), for a caller that binds onto it.
func (d *Dir) FD() int { return d.fd }

// Rel is p relative to the tree's top, or an error when p is not below it.
func (d *Dir) Rel(p string) (string, error) {
	p = filepath.Clean(p)
	if p == d.path {
		return ".", nil
	}
	prefix := d.path + "/"
	if d.path == "/" {
		prefix = "/"
	}
	rel, ok := strings.CutPrefix(p, prefix)
	if !ok || rel == "" {
		return "", &fs.PathError{Op: "resolve", Path: p, Err: fmt.Errorf("not below %s", d.path)}
	}
	return rel, nil
}

// openat2 retries EAGAIN (a rename anywhere on the system during a
// RESOLVE_BENEATH walk) and EINTR.
func openat2(dirfd int, name string, flags uint64, res uint64) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{Flags: flags, Resolve: res})
		if (err == unix.EAGAIN || err == unix.EINTR) && i < 64 {
			continue
		}
		return fd, err
	}
}

// OpenDir opens the directory rel below the top (O_PATH), "." for the top
// itself. The caller closes it.
func (d *Dir) OpenDir(rel string) (int, error) {
	if rel == "." || rel == "" {
		return unix.Dup(d.fd)
	}
	return openat2(d.fd, rel, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, resolve)
}

// OpenPath opens rel below the top as an O_PATH descriptor of what is
// there (a file or a directory; a link there is ELOOP): a mount point an
// engine mounts onto through its descriptor. The caller closes it.
func (d *Dir) OpenPath(rel string) (int, error) {
	if rel == "." || rel == "" {
		return unix.Dup(d.fd)
	}
	fd, err := openat2(d.fd, rel, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, resolve)
	if err != nil {
		return -1, err
	}
	// O_PATH|O_NOFOLLOW opens a link at the last name as the link.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		if err == nil {
			err = unix.ELOOP
		}
		return -1, err
	}
	return fd, nil
}

// parent opens the directory that holds p and returns it with p's last
// name.
func (d *Dir) parent(p string) (int, string, error) {
	rel, err := d.Rel(p)
	if err != nil {
		return -1, "", err
	}
	if rel == "." {
		return -1, "", &fs.PathError{Op: "resolve", Path: p, Err: errors.New("is the tree's top")}
	}
	fd, err := d.OpenDir(filepath.Dir(rel))
	if err != nil {
		return -1, "", &fs.PathError{Op: "open", Path: filepath.Dir(p), Err: err}
	}
	return fd, filepath.Base(rel), nil
}

// Inode is a file's identity.
type Inode struct{ Dev, Ino uint64 }

func inodeOf(st *unix.Stat_t) Inode { return Inode{Dev: uint64(st.Dev), Ino: st.Ino} }

// Lstat is p's status, p itself never followed.
func (d *Dir) Lstat(p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	rel, err := d.Rel(p)
	if err != nil {
		return st, err
	}
	if rel == "." {
		return st, unix.Fstat(d.fd, &st)
	}
	pfd, name, err := d.parent(p)
	if err != nil {
		return st, err
	}
	defer unix.Close(pfd)
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	return st, nil
}

// Mkdir makes the directory p (its parent must exist) and returns its
// inode.
func (d *Dir) Mkdir(p string, mode uint32) (Inode, error) {
	pfd, name, err := d.parent(p)
	if err != nil {
		return Inode{}, err
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, name, mode); err != nil {
		return Inode{}, &fs.PathError{Op: "mkdir", Path: p, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Inode{}, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	return inodeOf(&st), nil
}

// Create makes the regular file p with data (it must not exist) and
// returns its inode; a partial file is removed.
func (d *Dir) Create(p string, data []byte, mode uint32) (Inode, error) {
	pfd, name, err := d.parent(p)
	if err != nil {
		return Inode{}, err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return Inode{}, &fs.PathError{Op: "create", Path: p, Err: err}
	}
	defer unix.Close(fd)
	for b := data; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Unlinkat(pfd, name, 0)
			return Inode{}, &fs.PathError{Op: "write", Path: p, Err: err}
		}
		b = b[n:]
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Inode{}, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	return inodeOf(&st), nil
}

// ReadSmall reads the regular file p, at most max bytes; a file that is
// not regular, or larger, is an error. O_NONBLOCK: a FIFO never holds it.
func (d *Dir) ReadSmall(p string, max int) ([]byte, error) {
	pfd, name, err := d.parent(p)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > int64(max) {
		return nil, &fs.PathError{Op: "read", Path: p, Err: errors.New("not a small regular file")}
	}
	b := make([]byte, fi.Size()+1)
	n, _ := f.Read(b)
	if n > int(fi.Size()) {
		return nil, &fs.PathError{Op: "read", Path: p, Err: errors.New("grew while read")}
	}
	return b[:n], nil
}

// ErrNotAsMade is Remove's answer for a file that is no longer the one
// made, or no longer holds what it was made with: it is left alone.
var ErrNotAsMade = errors.New("not as it was made")

// Remove removes p when it is still the inode in: a directory only when
// empty, a file only while it holds data. Anything else there is left
// alone (ErrNotAsMade).
func (d *Dir) Remove(p string, in Inode, dir bool, data string) error {
	pfd, name, err := d.parent(p)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	if inodeOf(&st) != in {
		return ErrNotAsMade
	}
	if dir {
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return ErrNotAsMade
		}
		if err := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); err != nil {
			return &fs.PathError{Op: "remove", Path: p, Err: err}
		}
		return nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != int64(len(data)) {
		return ErrNotAsMade
	}
	if data != "" && !holds(pfd, name, in, data) {
		return ErrNotAsMade
	}
	if err := unix.Unlinkat(pfd, name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: p, Err: err}
	}
	return nil
}

// holds reports whether the regular file name in the directory pfd is
// the inode in and holds exactly data (read on the parent's descriptor:
// nothing is resolved again).
func holds(pfd int, name string, in Inode, data string) bool {
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || inodeOf(&st) != in || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	b := make([]byte, len(data)+1)
	n, _ := unix.Read(fd, b)
	return n == len(data) && string(b[:n]) == data
}

// Within reports whether p is top or below it.
func Within(p, top string) bool {
	p, top = filepath.Clean(p), filepath.Clean(top)
	return p == top || top == "/" || strings.HasPrefix(p, top+"/")
}
