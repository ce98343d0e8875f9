// Package rootonly checks that a program root runs (or runs for every user)
// can be changed by root alone: the file, every directory above it, and
// every symlink on the way to it, followed to the file it names. A user who
// can write any of them can make every later run execute code of theirs.
package rootonly

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/cco-dev/cco/internal/safetext"
)

// maxLinks bounds the symlinks followed, as the kernel does (ELOOP).
const maxLinks = 40

// Error names the path that someone other than root can change, and how.
type Error struct {
	Path string // as the host sees it
	Why  string
}

// Error names the path through the one printer: a link a user made may
// lead through names they chose.
func (e *Error) Error() string { return safetext.Escape(e.Path) + " " + e.Why }

// Check walks target from root's "/" down, component by component,
// following each symlink (an absolute one from root again, as a chroot
// would), to the file it ends at. Each directory on the way must be owned
// by one of owners and writable by no one else, except a sticky directory
// owned by one of them (as /tmp): there no one else can rename or remove
// what an owner put. Each symlink must be owned by one of owners; the file
// must be owned by one of them and writable by no one else. root is a host
// directory ("" or "/" for the host itself); target is absolute below it.
func Check(root, target string, owners ...int) error {
	root = path.Clean("/" + root)
	if !path.IsAbs(target) {
		return &Error{Path: target, Why: "is not an absolute path"}
	}
	host := func(p string) string {
		if root == "/" {
			return p
		}
		return root + p
	}
	if err := checkDir(host("/"), owners); err != nil {
		return err
	}
	todo := strings.Split(strings.Trim(path.Clean(target), "/"), "/")
	cur := "/"
	for links := 0; len(todo) > 0; {
		name := todo[0]
		todo = todo[1:]
		next := path.Join(cur, name)
		fi, err := os.Lstat(host(next))
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if err := owned(host(next), fi, owners); err != nil {
				return err
			}
			if links++; links > maxLinks {
				return &Error{Path: host(target), Why: "has too many symlinks on the way"}
			}
			l, err := os.Readlink(host(next))
			if err != nil {
				return err
			}
			if path.IsAbs(l) {
				cur = "/"
			}
			todo = append(strings.Split(strings.Trim(l, "/"), "/"), todo...)
			continue
		case len(todo) > 0:
			if !fi.IsDir() {
				return &Error{Path: host(next), Why: "is not a directory"}
			}
			if err := checkDir(host(next), owners); err != nil {
				return err
			}
		default:
			if err := owned(host(next), fi, owners); err != nil {
				return err
			}
			if m := fi.Mode().Perm(); m&0o022 != 0 {
				return &Error{Path: host(next), Why: fmt.Sprintf("is writable by %s (mode %04o)", whom(m), m)}
			}
		}
		cur = next
	}
	return nil
}

// checkDir checks one directory on the way.
func checkDir(p string, owners []int) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if err := owned(p, fi, owners); err != nil {
		return err
	}
	m := fi.Mode()
	if m.Perm()&0o022 != 0 && m&fs.ModeSticky == 0 {
		return &Error{Path: p, Why: fmt.Sprintf("(a directory on the way) is writable by %s (mode %04o)", whom(m.Perm()), m.Perm())}
	}
	return nil
}

// owned refuses a file whose owner is not one of owners.
func owned(p string, fi fs.FileInfo, owners []int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return &Error{Path: p, Why: "has no owner to check"}
	}
	if !slices.Contains(owners, int(st.Uid)) {
		what := ""
		if fi.IsDir() {
			what = "(a directory on the way) "
		} else if fi.Mode()&fs.ModeSymlink != 0 {
			what = "(a symlink on the way) "
		}
		return &Error{Path: p, Why: fmt.Sprintf("%sis owned by uid %d, who can change it", what, st.Uid)}
	}
	return nil
}

// whom names who a mode lets write besides the owner.
func whom(m fs.FileMode) string {
	switch {
	case m&0o022 == 0o022:
		return "its group and everyone"
	case m&0o002 != 0:
		return "everyone"
	}
	return "its group"
}
