// Package sysbin finds the programs root's cco-install runs (bwrap,
// apparmor_parser, systemctl, apt-get, npm ...) by absolute path in the
// system's own directories, never through the caller's PATH: sudo keeps a
// user's PATH where secure_path is unset, a cron job, an Ansible task or a
// CI runner sets its own, and a program planted on any of them would run
// as root.
package sysbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Dirs are the system's program directories, in the order of a Debian
// root's default PATH: the one list every root-run program is looked up
// in.
var Dirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// PATH is Dirs as a PATH value, for the environment of what root runs
// (apt-get runs dpkg, and dpkg its maintainer scripts, through it).
func PATH() string { return strings.Join(Dirs, ":") }

// Path is the absolute path of the program name in the first of Dirs that
// holds it as an executable regular file that only root can change (the
// file and its directory owned by root, writable by no one else). A name
// with a "/" is refused: it is a path, not a program's name.
func Path(name string) (string, error) { return PathIn(Dirs, name) }

// PathIn is Path over dirs (Dirs, or a test's stand-in for it).
func PathIn(dirs []string, name string) (string, error) {
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%q is not a program's name", name)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if rootOnly(d, true) && rootOnly(p, false) {
			return p, nil
		}
	}
	return "", fmt.Errorf("there is no %s in the system's directories (%s)", name, strings.Join(dirs, ":"))
}

// rootOnly: p (links followed) is owned by root and writable by no one
// else; a file must be a regular executable one.
func rootOnly(p string, dir bool) bool {
	fi, err := os.Stat(p)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	if dir {
		return fi.IsDir()
	}
	return fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Command is exec.CommandContext for the program name found by Path, with
// the environment's PATH replaced by the system's.
func Command(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
	p, err := Path(name)
	if err != nil {
		return nil, err
	}
	c := exec.CommandContext(ctx, p, args...)
	c.Env = Environ(os.Environ())
	return c, nil
}

// Environ is env with PATH set to the system's.
func Environ(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+PATH())
}
