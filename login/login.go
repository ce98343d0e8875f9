// Package login links the agents' login state into a shared directory, for
// devcontainers that mount one host directory holding the user's logins:
// ~/.claude, ~/.claude.json and ~/.codex become links into it. Forge tokens
// never go there.
package login

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/provision"
)

// Items are the login state that is shared, relative to a home.
var Items = []struct {
	Name string
	Dir  bool
}{{".claude", true}, {".claude.json", false}, {".codex", true}}

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
}

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
			want := path.Join(s.Dir, it.Name)
			if l, err := h.Readlink(it.Name); err == nil && l == want {
				continue
			}
			work = append(work, todo{u, it.Name, it.Dir})
			c.Paths = append(c.Paths, h.Path(it.Name))
		}
		h.Close()
	}
	if len(work) == 0 {
		c.State, c.Detail = provision.Done, "the agents' login state is linked into "+s.Dir
		return c, nil
	}
	c.State, c.Data = provision.ToDo, work
	c.Detail = fmt.Sprintf("link %d login paths into %s", len(work), s.Dir)
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
	shared := path.Join(s.Dir, w.item)
	_, serr := run.Root.Lstat(shared)
	_, lerr := h.Lstat(w.item)
	local := h.Path(w.item)
	msg := ""
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
		msg = fmt.Sprintf("adopted %s (the local copy is at %s)", shared, where)
	case serr == nil:
		msg = "adopted " + shared
	case lerr == nil:
		// Seed the share from the local data.
		if err := h.MoveOut(w.item, shared); err != nil {
			return "", err
		}
		msg = fmt.Sprintf("seeded %s from %s", shared, local)
	case errors.Is(serr, fs.ErrNotExist) && errors.Is(lerr, fs.ErrNotExist):
		if w.dir {
			if _, err := run.Root.MkdirAll(shared, 0o700, w.user.UID, w.user.GID); err != nil {
				return "", err
			}
		}
		msg = "created " + shared
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
