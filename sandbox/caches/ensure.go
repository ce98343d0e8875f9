package caches

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Mode is the mode of ~/.cache/cco and of each agent's tree: what one
// agent builds with is no other user's to read or change.
const Mode = 0o700

// Ensure makes, or checks, the agent's cache tree dirs[0]
// (home/Root/<agent>) and its directories dirs[1:], at every launch.
// ~/.cache/cco and the agent's tree must be directories owned by the user
// (uid), mode 0700, reached without a link. Walked on descriptors from the
// home down, nothing is followed: a link, a non-directory or a directory
// of another owner refuses the launch, naming the path and a command that
// clears it; a directory of the user's with another mode is made 0700 on
// its descriptor, and a note says so. A link or file a session left in
// the tree in place of one of dirs[1:] is removed and the directory made
// again (the tree is cco's; nothing else belongs there).
// config names the sandbox.toml whose caches key a fix may name.
func Ensure(home string, uid int, dirs []string, config string) (notes []string, err error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	root := dirs[0]
	rel, err := filepath.Rel(home, root)
	if err != nil || !strings.HasPrefix(rel, Root+"/") || strings.Contains(strings.TrimPrefix(rel, Root+"/"), "/") {
		return nil, fmt.Errorf("the cache tree %s is not %s/<agent> in %s", root, Root, home)
	}
	fd, err := unix.Open(home, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the home %s: %w", home, err)
	}
	defer func() { unix.Close(fd) }()
	p := home
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		p = filepath.Join(p, c)
		if err := unix.Mkdirat(fd, c, Mode); err != nil && !errors.Is(err, unix.EEXIST) {
			return notes, fmt.Errorf("creating the cache directory %s: %w (fix: set caches = \"session\" in %s)", p, err, config)
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if i == 0 && (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) {
			// The user's own cache, elsewhere: not cco's to remove.
			return notes, fmt.Errorf("%s is a symbolic link or a file, and the jail never follows one to the agents' caches (fix: set caches = \"session\" in %s, or replace the link with the directory it points to)", p, config)
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return notes, fmt.Errorf("the cache directory %s is a symbolic link or a file, which the jail never follows (fix: rm -- %s)", p, shq(p))
		}
		if err != nil {
			return notes, fmt.Errorf("opening the cache directory %s: %w", p, err)
		}
		unix.Close(fd)
		fd = next
		if i == 0 {
			continue // ~/.cache is the user's XDG cache, not cco's
		}
		n, err := secure(fd, p, uid)
		if err != nil {
			return notes, err
		}
		if n != "" {
			notes = append(notes, n)
		}
	}
	for _, d := range dirs[1:] {
		name := filepath.Base(d)
		var st unix.Stat_t
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			continue
		}
		if err == nil {
			unix.Unlinkat(fd, name, 0)
		}
		if err := unix.Mkdirat(fd, name, Mode); err != nil && !errors.Is(err, unix.EEXIST) {
			return notes, fmt.Errorf("creating the cache directory %s: %w", d, err)
		}
	}
	return notes, nil
}

// secure checks the directory open at fd (p, for messages): owned by
// uid, or the launch is refused; mode 0700, or made so.
func secure(fd int, p string, uid int) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("checking the cache directory %s: %w", p, err)
	}
	if int(st.Uid) != uid {
		// Not the user's to trust: whoever owns it can read what the
		// agents build and plant what they run. The user owns the
		// directory above (checked first), so can move it aside; a
		// launch then makes a fresh one.
		aside := p + ".not-yours-" + time.Now().UTC().Format("20060102T150405")
		return "", fmt.Errorf("the cache directory %s is owned by uid %d, not by you (uid %d): its owner could read and change what your agents build with (fix: mv -- %s %s)",
			p, st.Uid, uid, shq(p), shq(aside))
	}
	if st.Mode&0o7777 == Mode {
		return "", nil
	}
	// chmod on the descriptor: an O_PATH descriptor is changed through its
	// /proc/self/fd name, which names this inode and no path.
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), Mode); err != nil {
		return "", fmt.Errorf("making the cache directory %s mode 0700 (it is %#o): %w (fix: chmod 700 -- %s)", p, st.Mode&0o7777, err, shq(p))
	}
	return fmt.Sprintf("made the cache directory %s mode 0700 (it was %#o)", p, st.Mode&0o7777), nil
}

// shq quotes s for a POSIX shell.
func shq(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
