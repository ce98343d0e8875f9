package main

import (
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/sandbox"
)

// sandboxDoc is sandbox.toml as a launch of the invoking user would take
// it: root's file with that user's own layer over it.
type sandboxDoc struct {
	User  string                `json:"user"`
	Files []string              `json:"files"`
	Keys  []sandbox.ConfigValue `json:"keys"`
	// Notes are the layer's one-line notes (a user file ignored, and why).
	Notes []string `json:"notes,omitempty"`
	// Problem is why a launch of this user would refuse: the keys shown
	// are then the ones that could be read (root's file, or the defaults).
	Problem string `json:"problem,omitempty"`
}

// invokingUser is who `cco-install config` shows the jail's settings for:
// SUDO_USER under sudo, else the user running it.
func invokingUser() (name, home string, uid int) {
	if n := os.Getenv("SUDO_USER"); n != "" && os.Geteuid() == 0 {
		if u, err := user.Lookup(n); err == nil {
			if id, err := strconv.Atoi(u.Uid); err == nil {
				return u.Username, u.HomeDir, id
			}
		}
	}
	home = os.Getenv("HOME")
	name = os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		if !filepath.IsAbs(home) {
			home = u.HomeDir
		}
		if name == "" {
			name = u.Username
		}
	}
	return name, home, os.Getuid()
}

func sandboxConfig(root provision.FileReader) sandboxDoc {
	name, home, uid := invokingUser()
	path := root.HostPath(sandbox.ConfigPath)
	doc := sandboxDoc{User: name}
	c, err := sandbox.LoadConfig(path)
	if err != nil {
		doc.Problem = err.Error()
		c = &sandbox.Config{}
	} else if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		doc.Files = append(doc.Files, path)
	}
	if err == nil && filepath.IsAbs(home) {
		m, notes, err := c.WithUserLayer("", home, uid)
		doc.Notes = notes
		switch {
		case err != nil:
			doc.Problem = err.Error()
		default:
			if m != c {
				doc.Files = append(doc.Files, filepath.Join(home, sandbox.UserConfigRel))
			}
			c = m
		}
	}
	if doc.Files == nil {
		doc.Files = []string{}
	}
	doc.Keys = c.Effective()
	return doc
}
