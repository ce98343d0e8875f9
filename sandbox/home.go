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

// makeStandIns makes the missing login-state names beneath their tree's
// top, following no link (a name that exists by now is left as it is).
func makeStandIns(t trees, ins []Placeholder) error {
	for _, ph := range ins {
		root := ph.Root
		if root == "" {
			root = filepath.Dir(ph.Path)
		}
		d, err := t.open(root)
		if err == nil {
			if ph.Dir {
				_, err = d.Mkdir(ph.Path, 0o700)
			} else {
				_, err = d.Create(ph.Path, []byte(ph.Data), 0o600)
			}
		}
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating %s, which the jail shows read-only: %w (fix: create it yourself, empty)", ph.Path, noLink(err))
		}
	}
	return nil
}

// toolchainTrees binds the home_read_only trees that exist, read-only, and
// masks the credential files known to live in them. It returns the trees
// it bound (absolute). A tree that is, or lies below, a link refuses.
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
		dir := strings.HasSuffix(pat, "/")
		matches, _ := filepath.Glob(filepath.Join(pl.home, strings.TrimSuffix(pat, "/")))
		for _, m := range matches {
			if r, err := filepath.EvalSymlinks(m); err == nil && r != m {
				// A link shows its target, which is masked where the
				// jail sees it; elsewhere the link points at nothing.
				if !under(r, bound) {
					continue
				}
				m = r
			}
			fi, err := os.Stat(m)
			switch {
			case err != nil:
			case fi.IsDir() && dir:
				pl.s.Masks = append(pl.s.Masks, Mask{Path: m, Kind: MaskDir})
			case fi.Mode().IsRegular():
				// An empty file, rather than /dev/null's EACCES: the tool
				// reads no secret and still starts.
				pl.s.HomeReadOnly = append(pl.s.HomeReadOnly, Bind{Dst: m, Data: []byte{}})
			}
		}
	}
	return bound, nil
}

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

// makeCacheDirs creates the agent's cache tree (mode 0700) and its
// directories, none through a link: a link on the way to the tree refuses
// the launch, and a link or file a session left in the tree in place of
// one of its directories is removed and the directory made again (the
// tree is cco's; nothing else belongs there).
func makeCacheDirs(home string, dirs []string) error {
	if len(dirs) == 0 {
		return nil
	}
	root := dirs[0]
	fd, err := unix.Openat2(unix.AT_FDCWD, root, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		if err := mkdirNoFollow(home, root); err != nil {
			return fmt.Errorf("creating the cache directory %s: %w (fix: remove what is in the way, or set caches = \"session\" in %s)", root, err, ConfigPath)
		}
		if fd, err = unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("opening the cache directory %s: %w", root, err)
		}
	}
	defer unix.Close(fd)
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
		if err := unix.Mkdirat(fd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating the cache directory %s: %w", d, err)
		}
	}
	return nil
}

// mkdirNoFollow makes d and the directories between base and it, mode
// 0700, refusing a link or a non-directory at any of them.
func mkdirNoFollow(base, d string) error {
	rel, err := filepath.Rel(base, d)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is not below %s", d, base)
	}
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	for _, c := range strings.Split(rel, "/") {
		err := unix.Mkdirat(fd, c, 0o700)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return err
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return &fs.PathError{Op: "mkdir", Path: d, Err: errors.New("a symbolic link or a file is in the way")}
		}
		if err != nil {
			return err
		}
		fd = next
	}
	unix.Close(fd)
	return nil
}
