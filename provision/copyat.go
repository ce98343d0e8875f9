package provision

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// copyTreeAt copies a file, link or directory tree from src to dst across
// devices (staged under a temporary name and renamed into place), keeping
// modes, owners and times. The source may be a user's home, where the user
// can swap any path for a symlink while root copies: so every entry is
// opened relative to a held directory descriptor with O_NOFOLLOW, its kind
// is taken from fstat of the opened descriptor (never from an earlier
// lstat of the name), and a name that changed kind in between is refused.
// What a swapper gets is an error, never a byte from where the link points.
func copyTreeAt(src, dst string) error {
	sdir, err := openDir(filepath.Dir(src))
	if err != nil {
		return err
	}
	defer unix.Close(sdir)
	ddir, err := openDir(filepath.Dir(dst))
	if err != nil {
		return err
	}
	defer unix.Close(ddir)
	name, tmp := filepath.Base(dst), filepath.Base(dst)+".cco-copy"
	removeAt(ddir, tmp)
	if err := copyAt(sdir, filepath.Base(src), ddir, tmp); err != nil {
		removeAt(ddir, tmp)
		return fmt.Errorf("%s: %w", src, err)
	}
	if err := unix.Renameat(ddir, tmp, ddir, name); err != nil {
		removeAt(ddir, tmp)
		return err
	}
	return nil
}

func openDir(p string) (int, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// removeAt removes name below dirfd, never following a link (RemoveAll
// through the descriptor's /proc name uses *at calls below it).
func removeAt(dirfd int, name string) {
	os.RemoveAll(fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name))
}

// copyAt copies sdir/sname to ddir/dname, which must not exist.
func copyAt(sdir int, sname string, ddir int, dname string) error {
	pfd, err := unix.Openat(sdir, sname, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", sname, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return err
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := readlinkFd(pfd)
		if err != nil {
			return fmt.Errorf("%s: %w", sname, err)
		}
		if err := unix.Symlinkat(target, ddir, dname); err != nil {
			return err
		}
		if err := lchownAt(ddir, dname, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		return unix.UtimesNanoAt(ddir, dname, ts, unix.AT_SYMLINK_NOFOLLOW)
	case unix.S_IFDIR:
		in, err := reopen(sdir, sname, unix.O_RDONLY|unix.O_DIRECTORY, &st)
		if err != nil {
			return err
		}
		defer in.Close()
		if err := unix.Mkdirat(ddir, dname, 0o700); err != nil {
			return err
		}
		out, err := unix.Openat(ddir, dname, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(out)
		names, err := in.Readdirnames(-1)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := copyAt(int(in.Fd()), n, out, n); err != nil {
				return err
			}
		}
		return finish(out, &st, ts)
	case unix.S_IFREG:
		in, err := reopen(sdir, sname, unix.O_RDONLY, &st)
		if err != nil {
			return err
		}
		defer in.Close()
		ofd, err := unix.Openat(ddir, dname, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		out := os.NewFile(uintptr(ofd), dname)
		defer out.Close()
		if _, err := io.Copy(out, in); err != nil {
			return err
		}
		if err := out.Sync(); err != nil {
			return err
		}
		return finish(ofd, &st, ts)
	}
	return fmt.Errorf("%s: refusing to copy a special file (%s)", sname, kindName(st.Mode))
}

// reopen opens sdir/sname for reading with O_NOFOLLOW and checks that it is
// still the entry first opened (same device and inode): a swap in between
// is refused.
func reopen(sdir int, sname string, flags int, want *unix.Stat_t) (*os.File, error) {
	fd, err := unix.Openat(sdir, sname, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sname, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != want.Dev || st.Ino != want.Ino {
		unix.Close(fd)
		return nil, fmt.Errorf("%s changed while it was copied: refusing it", sname)
	}
	return os.NewFile(uintptr(fd), sname), nil
}

// finish gives a copied file or directory its original's owner, mode and
// times, through its descriptor. Owner first: a chown clears set-id bits.
func finish(fd int, st *unix.Stat_t, ts []unix.Timespec) error {
	if err := fchownFd(fd, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
		return err
	}
	return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
}

func readlinkFd(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// fchownFd and lchownAt tolerate EPERM where the owner already is the
// wanted one (an unprivileged run cannot chown at all).
func fchownFd(fd, uid, gid int) error {
	err := unix.Fchown(fd, uid, gid)
	if errors.Is(err, unix.EPERM) {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
	}
	return err
}

func lchownAt(dirfd int, name string, uid, gid int) error {
	err := unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.EPERM) {
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
	}
	return err
}

func kindName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a fifo"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	}
	return "an unknown kind"
}
