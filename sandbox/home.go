package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/sandbox/caches"
	"github.com/cco-dev/cco/sandbox/toolchains"
)

// What of the home, besides the agent's login state, a developer's day
// needs: the user's toolchains (read-only), dependency caches that last
// (the agent's own), the user's PATH, and the agent's own credentials.

// loginReadOnly re-binds a path of the agent's login state read-only: one
// the vendor loads at start and that can name a command (settings, env
// files, plugins, trust lists). A missing one is made once and kept (an
// empty directory for a name ending in "/", an empty file, "{}" for
// JSON), so that a session cannot create it for the vendor run unwrapped to
// load; the vendor reads it as empty. A link is refused.
func (pl *planner) loginReadOnly(rel string) error {
	dir := strings.HasSuffix(rel, "/")
	p := filepath.Join(pl.home, rel)
	fi, err := os.Lstat(p)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return refuseLink(p)
	case err == nil:
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR):
		pl.pr.StandIns = append(pl.pr.StandIns, Placeholder{Path: p, Dir: dir, Data: standIn(rel)})
	default:
		return fmt.Errorf("checking %s: %w", p, err)
	}
	pl.seen[p] = true
	pl.s.HomeReadOnly = append(pl.s.HomeReadOnly, Bind{Src: p, Dst: p})
	pl.pr.Protected = append(pl.pr.Protected, p)
	return nil
}

// makeStandIns makes the missing login-state names, without following a
// link (a name that exists by now is left as it is).
func makeStandIns(ins []Placeholder) error {
	for _, ph := range ins {
		var err error
		if ph.Dir {
			err = unix.Mkdir(ph.Path, 0o700)
		} else {
			var fd int
			fd, err = unix.Open(ph.Path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if err == nil {
				_, err = unix.Write(fd, []byte(ph.Data))
				unix.Close(fd)
			}
		}
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating %s, which the jail shows read-only: %w (fix: create it yourself, empty)", ph.Path, err)
		}
	}
	return nil
}

// toolchainTrees binds the home_read_only trees that exist, read-only, and
// masks the credential files in them, found by name at any depth within
// the walk's budget (a part the budget leaves unsearched is named in a
// note). It returns the trees it bound (absolute). A tree that is, or lies
// below, a link refuses.
func (pl *planner) toolchainTrees(rels []string) ([]string, error) {
	var bound, boundRel []string
	for _, rel := range rels {
		p := filepath.Join(pl.home, rel)
		f, err := openNoFollow(p)
		switch {
		case err == nil:
			f.Close()
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
			continue
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
			return nil, fmt.Errorf("home_read_only entry \"~/%s\": %s is, or lies below, a symbolic link, which the jail never follows (fix: replace the link with what it points to, or remove the entry from home_read_only in %s)", rel, p, ConfigPath)
		default:
			return nil, fmt.Errorf("home_read_only entry \"~/%s\": opening %s: %w", rel, p, err)
		}
		pl.s.HomeReadOnly = append(pl.s.HomeReadOnly, Bind{Src: p, Dst: p, Try: true})
		bound, boundRel = append(bound, p), append(boundRel, rel)
	}
	for _, pat := range toolchains.Masks(boundRel) {
		matches, _ := filepath.Glob(filepath.Join(pl.home, strings.TrimSuffix(pat, "/")))
		for _, m := range matches {
			if fi, err := os.Lstat(m); err == nil && fi.IsDir() {
				pl.s.Masks = append(pl.s.Masks, Mask{Path: m, Kind: MaskDir})
			}
		}
	}
	found := toolchains.Scan(bound, scanBudget)
	masked := map[string]bool{}
	for _, f := range found.Found {
		m := f.Path
		if f.Link {
			// A link shows its target, which is masked where the jail
			// sees it; elsewhere the link points at nothing.
			r, err := filepath.EvalSymlinks(m)
			if err != nil || !under(r, bound) {
				continue
			}
			m = r
		}
		if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() && !masked[m] {
			masked[m] = true
			// The empty form of the file, rather than /dev/null's EACCES:
			// the tool reads no secret and still starts.
			pl.s.HomeReadOnly = append(pl.s.HomeReadOnly, Bind{Dst: m, Data: []byte(toolchains.StandIn(f.Name))})
		}
	}
	if u := found.Unsearched; len(u) > 0 {
		pl.pr.Notes = append(pl.pr.Notes, fmt.Sprintf("the toolchain trees hold more than %d entries, so %d of their directories are shown without being searched for credential files, %s first (fix: name fewer trees in home_read_only in %s)",
			scanBudget, len(u), toolchains.Rel(pl.home, u[0]), ConfigPath))
	}
	return bound, nil
}

// scanBudget is the credential walk's bound (a test lowers it).
var scanBudget = toolchains.Budget

// cachePlaces shows the agent's cache tree at ~/.cache and links each
// tool's default place into it. A place inside a bound toolchain tree
// cannot be a link there (the tree is read-only): the cache is bound over
// it where the tree has it, and left out otherwise.
func (pl *planner) cachePlaces(agentName, mode string, toolchains []string) {
	home := pl.home
	jailCache := filepath.Join(home, caches.Home)
	root := caches.Dir(home, agentName)
	if mode == caches.Session {
		pl.s.Scratch = append(pl.s.Scratch, jailCache)
	} else {
		// Try: Prepare makes the tree; one gone since is no reason to
		// refuse the launch.
		pl.s.HomeBinds = append(pl.s.HomeBinds, Bind{Src: root, Dst: jailCache, Try: true})
		pl.pr.CacheDirs = append(pl.pr.CacheDirs, root)
	}
	for _, c := range caches.Places {
		at := filepath.Join(home, c.Jail)
		if mode == caches.Session {
			pl.s.HomeDirs = append(pl.s.HomeDirs, filepath.Join(jailCache, c.Name))
		} else {
			pl.pr.CacheDirs = append(pl.pr.CacheDirs, filepath.Join(root, c.Name))
		}
		if !under(at, toolchains) {
			pl.s.Links = append(pl.s.Links, Link{Target: c.Target(), Path: at})
			continue
		}
		if fi, err := os.Lstat(at); err != nil || !fi.IsDir() {
			continue
		}
		if mode == caches.Session {
			pl.s.Masks = append(pl.s.Masks, Mask{Path: at, Kind: MaskTmpfs})
		} else {
			pl.s.Writable = append(pl.s.Writable, Bind{Src: filepath.Join(root, c.Name), Dst: at})
		}
	}
}

// jailPATH is the host's PATH as the jail can use it: relative entries and
// entries the jail does not show (the private home outside its binds, the
// private /tmp and /run, masks) dropped, the order kept, and the system
// directories appended where missing.
func jailPATH(s *Spec, environ []string) string {
	var host string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			host = v
		}
	}
	var out []string
	for _, d := range strings.Split(host, ":") {
		if !filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		if slices.Contains(out, d) || !s.hostVisible(d) {
			continue
		}
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		out = append(out, d)
	}
	for _, d := range strings.Split(jailPath, ":") {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return strings.Join(out, ":")
}

// agentEnv are the host variables that carry p's own login and provider
// settings, passed into p's jail; dropped names the variables of other
// agents' logins that are set on the host (and are not p's own), which
// never enter it.
func agentEnv(p *agent.Profile, environ []string) (pass []string, dropped []string) {
	own := append(slices.Clone(p.Credentials), p.ProviderEnv...)
	others := p.OthersCredentials()
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case slices.Contains(own, k):
			pass = append(pass, kv)
		case slices.Contains(others, k) && !slices.Contains(dropped, k):
			dropped = append(dropped, k)
		}
	}
	return pass, dropped
}

// isOthersCredential reports whether k carries another agent's login (and
// not p's own).
func isOthersCredential(p *agent.Profile, k string) bool {
	return !slices.Contains(p.Credentials, k) && !slices.Contains(p.ProviderEnv, k) && slices.Contains(p.OthersCredentials(), k)
}
