// Package login links the agents' login state into a shared directory, for
// devcontainers that mount one host directory holding the users' logins:
// every agent's login directories (its profile's Login) and the host files
// the jail carries over into them (~/.claude.json) become links into the
// user's own <dir>/<user>/, owned by the user with mode 0700, so that one
// user's login is never linked into another's home. Forge tokens never go
// there.
package login

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/provision"
)

// Item is one piece of login state, relative to a home.
type Item struct {
	Name string
	Dir  bool
}

// Items are the login state that is shared: each profile's Login
// directories and the host files of its CarryOver, in table order.
var Items = func() []Item {
	var out []Item
	for _, p := range agent.All() {
		for _, d := range p.Login {
			out = append(out, Item{d, true})
		}
		for _, c := range p.CarryOver {
			out = append(out, Item{c[0], false})
		}
	}
	return out
}()

// Step is login.shared.
type Step struct {
	Dir   string   // shared_login_dir, a target path
	Users []string // whose homes; root's when empty
}

func (s *Step) ID() string   { return "login.shared" }
func (s *Step) Name() string { return "link the agents' login state into " + s.Dir }

type todo struct {
	user *provision.User
	item string
	dir  bool
	// others are the step's users, to find whose an old shared item is.
	others []*provision.User
}

// UserDir is u's own directory in the share.
func (s *Step) UserDir(u *provision.User) string { return path.Join(s.Dir, u.Name) }

func (s *Step) users(run *provision.View) ([]*provision.User, []string) {
	names := s.Users
	if len(names) == 0 {
		names = []string{"root"}
	}
	var out []*provision.User
	var warn []string
	for _, n := range names {
		u, err := provision.LookupUser(run.Root, n)
		if err != nil {
			warn = append(warn, err.Error())
			continue
		}
		out = append(out, u)
	}
	return out, warn
}

// usable reports why the share cannot be used, or "".
func (s *Step) usable(run *provision.View) string {
	fi, err := run.Root.Lstat(s.Dir)
	if err != nil || !fi.IsDir() {
		return fmt.Sprintf("shared_login_dir %s is missing: the agents keep their login in local directories (a re-login in this container)", s.Dir)
	}
	if unix.Access(run.Root.HostPath(s.Dir), unix.W_OK) != nil {
		return fmt.Sprintf("shared_login_dir %s is read-only: the agents keep their login in local directories (a re-login in this container)", s.Dir)
	}
	return ""
}

func (s *Step) Check(run *provision.View) (provision.Check, error) {
	c := provision.Check{Paths: []string{s.Dir}}
	if why := s.usable(run); why != "" {
		c.State, c.Detail, c.Warnings = provision.Done, "shared login store not used", []string{why}
		return c, nil
	}
	users, warn := s.users(run)
	c.Warnings = warn
	var work []todo
	for _, u := range users {
		h, err := run.Root.OpenHome(u)
		if err != nil {
			c.Warnings = append(c.Warnings, err.Error())
			continue
		}
		for _, it := range Items {
			want := path.Join(s.UserDir(u), it.Name)
			if l, err := h.Readlink(it.Name); err == nil && l == want {
				continue
			}
			work = append(work, todo{u, it.Name, it.Dir, users})
			c.Paths = append(c.Paths, h.Path(it.Name))
		}
		h.Close()
	}
	if len(work) == 0 {
		c.State, c.Detail = provision.Done, "the agents' login state is linked into "+s.Dir
		return c, nil
	}
	c.State, c.Data = provision.ToDo, work
	c.Detail = fmt.Sprintf("link %d login paths into each user's own directory under %s", len(work), s.Dir)
	return c, nil
}

func (s *Step) Apply(run *provision.Run, c provision.Check) (string, error) {
	work, _ := c.Data.([]todo)
	var done []string
	for _, w := range work {
		msg, err := s.link(run, w)
		if err != nil {
			return strings.Join(done, "; "), err
		}
		done = append(done, msg)
	}
	return strings.Join(done, "; "), nil
}

func (s *Step) link(run *provision.Run, w todo) (string, error) {
	h, err := run.Root.OpenHome(w.user)
	if err != nil {
		return "", err
	}
	defer h.Close()
	own := s.UserDir(w.user)
	if err := userDir(run, own, w.user); err != nil {
		return "", err
	}
	shared := path.Join(own, w.item)
	old := path.Join(s.Dir, w.item)
	// A login directory may be nested (~/.config/opencode): its parents are
	// made, the user's, in the home and in the share.
	if d := path.Dir(w.item); d != "." {
		if err := h.MkdirAll(d, 0o700); err != nil {
			return "", err
		}
		if _, err := run.Root.MkdirAll(path.Dir(shared), 0o700, w.user.UID, w.user.GID); err != nil {
			return "", err
		}
	}
	msg := ""
	_, serr := run.Root.Lstat(shared)
	// An install that shared one directory among all users: its item goes
	// to the user who owns it (or the only user), never to another.
	if ofi, err := run.Root.Lstat(old); err == nil && errors.Is(serr, fs.ErrNotExist) && oldOwner(ofi, w.others) == w.user {
		if err := run.Root.Rename(old, shared); err != nil {
			return "", fmt.Errorf("moving %s into %s: %w", old, own, err)
		}
		msg = fmt.Sprintf("moved %s to %s; ", old, shared)
		_, serr = run.Root.Lstat(shared)
	}
	_, lerr := h.Lstat(w.item)
	if l, err := h.Readlink(w.item); err == nil && (l == old || l == shared) {
		lerr = fs.ErrNotExist // the old layout's link: relinked below
	}
	local := h.Path(w.item)
	switch {
	case serr == nil && lerr == nil:
		// Both have data: the share wins, the local copy is kept aside.
		where := run.BackupDir() + local
		if err := run.MkdirAll(path.Dir(where), 0o700, "backups"); err != nil {
			return "", err
		}
		if err := h.MoveOut(w.item, where); err != nil {
			return "", err
		}
		msg += fmt.Sprintf("adopted %s (the local copy is at %s)", shared, where)
	case serr == nil:
		msg += "adopted " + shared
	case lerr == nil:
		// Seed the share from the local data.
		if err := h.MoveOut(w.item, shared); err != nil {
			return "", err
		}
		msg += fmt.Sprintf("seeded %s from %s", shared, local)
	case errors.Is(serr, fs.ErrNotExist) && errors.Is(lerr, fs.ErrNotExist):
		if w.dir {
			if _, err := run.Root.MkdirAll(shared, 0o700, w.user.UID, w.user.GID); err != nil {
				return "", err
			}
		}
		msg += "created " + shared
	default:
		return "", errors.Join(serr, lerr)
	}
	if err := h.Symlink(shared, w.item); err != nil {
		return "", err
	}
	if err := run.Record(local, provision.KindLink, "", s.ID()); err != nil {
		return "", err
	}
	return msg + "; linked " + local, nil
}

// userDir makes u's own directory in the share: a real directory (never a
// link), owned by u, mode 0700.
func userDir(run *provision.Run, dir string, u *provision.User) error {
	if _, err := run.Root.MkdirAll(dir, 0o700, u.UID, u.GID); err != nil {
		return err
	}
	fi, err := run.Root.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (a symlink?): move it away, then run cco-install again", run.Root.HostPath(dir))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && provision.IsRoot() && (int(st.Uid) != u.UID || fi.Mode().Perm() != 0o700) {
		return fmt.Errorf("%s belongs to uid %d with mode %04o, not to %s with 0700: fix it (chown %s; chmod 0700), then run cco-install again", run.Root.HostPath(dir), st.Uid, fi.Mode().Perm(), u.Name, u.Name)
	}
	return nil
}

// oldOwner is the user an old shared item goes to: the one whose uid owns
// it, else the only user.
func oldOwner(fi fs.FileInfo, users []*provision.User) *provision.User {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		for _, u := range users {
			if int(st.Uid) == u.UID {
				return u
			}
		}
	}
	if len(users) == 1 {
		return users[0]
	}
	return nil
}
