package sandbox

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenBindSources opens the source of every bind that bwrap gets as a
// descriptor, in the order Argv numbers them from Spec.BindFD. A source is
// opened O_PATH without following a link in any of its components, so what
// is bound is what was planned, whatever a session or a user swapped in
// since: a link is refused with the fix, and a missing Try source is
// dropped from the jail. The caller closes the files once bwrap has them.
func OpenBindSources(s *Spec) ([]*os.File, error) {
	var files []*os.File
	var err error
	s.eachBind(func(b *Bind, _ bool) {
		if err != nil || b.Src == "" || b.System {
			return
		}
		var f *os.File
		f, b.skip, err = openSource(b)
		if f != nil {
			files = append(files, f)
		}
	})
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	return files, nil
}

// openSource opens a bind's source with openNoFollow; skip reports a
// missing Try source, which the jail goes without.
func openSource(b *Bind) (f *os.File, skip bool, err error) {
	fd, skip, err := openSourceFD(b)
	if err != nil || skip {
		return nil, skip, err
	}
	return os.NewFile(uintptr(fd), b.Src), false, nil
}

// openSourceFD is openSource's descriptor, which the launcher only hands
// on: no *os.File (whose making asks the kernel for the descriptor's
// flags, a system call for each of a launch's hundreds of sources).
func openSourceFD(b *Bind) (fd int, skip bool, err error) {
	fd, oerr := openNoFollowFD(b.Src)
	switch {
	case oerr == nil:
		return fd, false, nil
	case b.Try && errors.Is(oerr, unix.ENOENT):
		return -1, true, nil
	case errors.Is(oerr, unix.ELOOP) || errors.Is(oerr, unix.EXDEV):
		return -1, false, fmt.Errorf("%s is, or lies below, a symbolic link, which the jail never follows (fix: rm the link, or replace it with what it points to)", b.Src)
	}
	return -1, false, fmt.Errorf("opening %s for the jail: %w", b.Src, oerr)
}

// openNoFollow opens p as an O_PATH descriptor, refusing a link anywhere
// in it (openat2's RESOLVE_NO_SYMLINKS; before Linux 5.6, a walk with
// O_NOFOLLOW at each step).
func openNoFollow(p string) (*os.File, error) {
	fd, err := openNoFollowFD(p)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

func openNoFollowFD(p string) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		fd, err = walkNoFollow(p)
	}
	if err == nil {
		// O_PATH|O_NOFOLLOW opens a link at the last component as the
		// link itself: that is a link too.
		var st unix.Stat_t
		if err = unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = unix.ELOOP
		}
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// walkNoFollow opens p one component at a time, each O_NOFOLLOW.
func walkNoFollow(p string) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	for _, c := range splitPath(p) {
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(next)
			return -1, unix.ELOOP
		}
		fd = next
	}
	return fd, nil
}

func splitPath(p string) []string {
	var out []string
	for len(p) > 0 {
		for len(p) > 0 && p[0] == '/' {
			p = p[1:]
		}
		i := 0
		for i < len(p) && p[i] != '/' {
			i++
		}
		if i > 0 {
			out = append(out, p[:i])
		}
		p = p[i:]
	}
	return out
}
