// Package takeover finds what the vendors' own installers (and the bash
// claude-sandbox that cco replaces) left on a machine where they would run
// an agent outside the jail, and moves it out of the way into
// /var/lib/cco/relocated, recorded in the receipt so that uninstall puts
// every file back.
package takeover

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/provision"
)

// RelocatedDir holds the vendor files moved out of the shadow's way.
const RelocatedDir = provision.StateDir + "/relocated"

// Config says whose homes to look in.
type Config struct {
	// Users are account names of the target system whose homes are checked,
	// besides root's: the invoking user (SUDO_USER) and the `users` key.
	Users []string
}

// A find is one vendor file in the way.
type find struct {
	path string // target path
	user *provision.User
	rel  string // path inside the user's home, when user is set
	kind string
	what string
}

// Step relocates one agent's vendor installs.
type Step struct {
	Agent string
	cfg   Config
}

// installers is the agent's profile's description of its vendor installs.
func (s *Step) installers() agent.Installers {
	if p, ok := agent.Lookup(s.Agent); ok {
		return p.Installers
	}
	return agent.Installers{}
}

// Steps are the migration from the bash claude-sandbox and one
// takeover.<agent> per profile, each only when this machine has something
// for it to take over (the plan shows only what remains). They run before
// the shadow steps so that the shadow's names are free when those run.
func Steps(run *provision.View, cfg Config) []provision.Step {
	var steps []provision.Step
	if len(Migration{}.leftovers(run)) > 0 {
		steps = append(steps, Migration{})
	}
	for _, a := range agent.Names() {
		s := &Step{Agent: a, cfg: cfg}
		if f, w := s.finds(run); len(f) > 0 || len(w) > 0 {
			steps = append(steps, s)
		}
	}
	return steps
}

func (s *Step) ID() string   { return "takeover." + s.Agent }
func (s *Step) Name() string { return "move the vendor's own " + s.Agent + " out of the shadow's way" }

// users are root plus the configured accounts that exist in the target.
func (s *Step) users(run *provision.View) []*provision.User {
	var out []*provision.User
	seen := map[string]bool{}
	for _, name := range append([]string{"root"}, s.cfg.Users...) {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		if u, err := provision.LookupUser(run.Root, name); err == nil && u.Home != "" {
			out = append(out, u)
		} else if name != "root" {
			run.Logf("%s: user %s: %v", s.ID(), name, err)
		}
	}
	return out
}

// finds lists what is in the way, and the problems it could not look past
// (a symlinked ~/.local: refused, reported).
func (s *Step) finds(run *provision.View) ([]find, []string) {
	var out []find
	var warnings []string
	for _, dir := range []string{"/usr/local/bin", "/usr/bin"} {
		p := dir + "/" + s.Agent
		if _, ours := run.Receipt.Paths[p]; ours {
			continue
		}
		fi, err := run.Root.Lstat(p)
		if err != nil {
			continue
		}
		if what := s.recognise(run, p, fi); what != "" {
			out = append(out, find{path: p, kind: kindOf(fi), what: what})
		}
	}
	for _, u := range s.users(run) {
		h, err := run.Root.OpenHome(u)
		if err != nil {
			continue // no home: nothing installed there
		}
		for _, dir := range s.installers().HomeBins {
			rel := dir + "/" + s.Agent
			fi, err := h.Lstat(rel)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				if w := provision.HomeProblem(h.Path(rel), err); w != "" {
					warnings = append(warnings, w)
				}
			default:
				if what := s.recogniseHome(h, rel, fi); what != "" {
					out = append(out, find{path: h.Path(rel), user: u, rel: rel, kind: kindOf(fi), what: what})
				}
			}
		}
		h.Close()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, warnings
}

func kindOf(fi fs.FileInfo) string {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return provision.KindLink
	}
	return provision.KindFile
}

// recognise names a vendor install in a system bin directory, or returns ""
// for anything else (which the shadow step then reports as foreign).
func (s *Step) recognise(run *provision.View, p string, fi fs.FileInfo) string {
	if fi.Mode()&fs.ModeSymlink != 0 {
		l, err := run.Root.Readlink(p)
		if err == nil && strings.Contains(l, "node_modules") {
			return "an npm global install" + s.npmOf(l) + " (" + l + ")"
		}
		return ""
	}
	if fi.Mode().IsRegular() && p == "/usr/local/bin/"+s.Agent && IsBashSandboxShadow(run.Root, p) {
		return "the bash claude-sandbox's shadow"
	}
	return ""
}

// npmOf names the vendor's npm package when the link target is inside it
// (node_modules/<package>/...), for the report.
func (s *Step) npmOf(target string) string {
	if pkg := s.installers().NPMPackage; pkg != "" && strings.Contains(target, "node_modules/"+pkg+"/") {
		return " of " + pkg
	}
	return ""
}

func (s *Step) recogniseHome(h *provision.HomeView, rel string, fi fs.FileInfo) string {
	if fi.Mode()&fs.ModeSymlink == 0 {
		for _, hf := range s.installers().HomeFiles {
			if fi.Mode().IsRegular() && rel == hf[0] {
				return hf[1] + " (~/" + rel + ")"
			}
		}
		return ""
	}
	l, err := h.Readlink(rel)
	if err != nil {
		return ""
	}
	for _, hl := range s.installers().HomeLinks {
		if strings.Contains(l, hl[0]) {
			return hl[1] + " (" + l + ")"
		}
	}
	if strings.Contains(l, "node_modules") {
		return "an npm install" + s.npmOf(l) + " (" + l + ")"
	}
	return ""
}

func (s *Step) Check(run *provision.View) (provision.Check, error) {
	finds, warnings := s.finds(run)
	c := provision.Check{Warnings: warnings, Data: finds}
	if len(finds) == 0 {
		c.State, c.Detail = provision.Done, "no vendor install of "+s.Agent+" in the shadow's way"
		return c, nil
	}
	var parts []string
	for _, f := range finds {
		c.Paths = append(c.Paths, f.path)
		parts = append(parts, fmt.Sprintf("move %s (%s) to %s", f.path, f.what, RelocatedDir+f.path))
	}
	c.State, c.Detail = provision.ToDo, strings.Join(parts, "; ")
	return c, nil
}

func (s *Step) Apply(run *provision.Run, c provision.Check) (string, error) {
	finds, _ := c.Data.([]find)
	var done []string
	for _, f := range finds {
		dst := RelocatedDir + f.path
		if _, err := run.Root.Lstat(dst); err == nil {
			return strings.Join(done, "; "), fmt.Errorf("%s already holds a relocated file: move it away by hand, then run again", dst)
		}
		if err := run.MkdirAll(path.Dir(dst), 0o700, s.ID()); err != nil {
			return strings.Join(done, "; "), err
		}
		// Record first, then move: a run killed in between finds the record
		// and the file still in place, and moves it then (the record is
		// replaced, not doubled). A record whose move failed is withdrawn.
		r := provision.Relocation{From: f.path, To: dst, Step: s.ID(), Kind: f.kind, What: f.what}
		if f.user != nil {
			r.User = f.user.Name
		}
		setRelocation(run.Receipt, r)
		if err := run.SaveReceipt(); err != nil {
			return strings.Join(done, "; "), err
		}
		var err error
		if f.user != nil {
			h, herr := run.Root.OpenHome(f.user)
			if herr != nil {
				err = herr
			} else {
				err = h.MoveOut(f.rel, dst)
				h.Close()
			}
		} else {
			err = run.Root.Rename(f.path, dst)
		}
		if err != nil {
			dropRelocation(run.Receipt, f.path)
			run.SaveReceipt()
			return strings.Join(done, "; "), err
		}
		done = append(done, fmt.Sprintf("moved %s (%s) to %s", f.path, f.what, dst))
	}
	return strings.Join(done, "; "), nil
}

func setRelocation(rc *provision.Receipt, r provision.Relocation) {
	dropRelocation(rc, r.From)
	rc.Relocations = append(rc.Relocations, r)
}

func dropRelocation(rc *provision.Receipt, from string) {
	kept := rc.Relocations[:0]
	for _, x := range rc.Relocations {
		if x.From != from {
			kept = append(kept, x)
		}
	}
	rc.Relocations = kept
}
