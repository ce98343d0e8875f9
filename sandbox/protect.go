package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/sandbox/saferead"
	"github.com/cco-dev/cco/sandbox/workspace"
)

// Command-bearing state is protected as a tree, not file by file: a bind
// protects a path, and the directory around it could be renamed with the
// binds inside it (mounts move with their directory). So each directory that
// holds protected files (a repository's git directory, its common directory,
// an agent's directory) is bound onto itself, which makes it a mount point
// that cannot be renamed or removed, and the files in it through which git
// or an agent takes configuration or a program are bound read-only. A
// missing one gets a placeholder, so that it cannot be created.

// guarded is one protected name in a protected directory.
type guarded struct {
	rel string
	dir bool
	// data is a missing file's stand-in, in the jail and on the host.
	data string
}

// commonFiles are what git reads from a repository's common directory
// (and a submodule's admin directory). An empty commondir makes git fail;
// "." names the directory itself, as no commondir does.
var commonFiles = []guarded{
	{rel: "config"}, {rel: "config.worktree"}, {rel: "commondir", data: ".\n"},
	{rel: "hooks", dir: true}, {rel: "info", dir: true},
}

// worktreeFiles are what git reads from a linked worktree's admin
// directory (.git/worktrees/<name>).
var worktreeFiles = []guarded{{rel: "commondir"}, {rel: "gitdir"}, {rel: "config.worktree"}}

// moduleDepth bounds the walk of .git/modules: nested submodules keep
// their admin directories in modules/<name>/modules/<name>.
const moduleDepth = 3

// planner carries one Plan's protection work.
type planner struct {
	s    *Spec
	pr   *Prep
	home string
	ws   string
	// hostBound are the trees the jail sees read-write from the host: a
	// placeholder is made only inside them.
	hostBound []string
	// willExist are directories Prepare creates (the login state).
	willExist []string
	// shared are the scratch and runtime trees (sharedTrees).
	shared []string
	seen   map[string]bool
	// roDir are the existing directories bound read-only.
	roDir map[string]bool
}

// protectWorkspace protects the workspace's repositories (its own and the
// nested ones FindRepos lists) and the agents' directories in it.
func (pl *planner) protectWorkspace() error {
	return pl.racedOr(pl.protectWorkspaceTree())
}

// protectWorkspaceTree is protectWorkspace, its refusals as found.
func (pl *planner) protectWorkspaceTree() error {
	for _, d := range agent.WorkspaceDirs() {
		if err := pl.agentParents(filepath.Join(pl.ws, d)); err != nil {
			return err
		}
		if err := pl.agentDir(filepath.Join(pl.ws, d), slices.Contains(agent.WorkspaceScratch(), d)); err != nil {
			return err
		}
	}
	for _, rel := range agent.WorkspaceReadOnly() {
		if err := pl.agentParents(filepath.Join(pl.ws, rel)); err != nil {
			return err
		}
		if err := pl.readOnly(filepath.Join(pl.ws, rel), guardedAt(rel)); err != nil {
			return err
		}
	}
	top := filepath.Join(pl.ws, ".git")
	if _, err := os.Lstat(top); err == nil {
		if err := pl.repo(top); err != nil {
			return err
		}
	}
	pl.pr.Repos, pl.pr.AgentDirs = workspace.Find(pl.ws)
	for _, g := range pl.pr.Repos {
		if g == top {
			continue
		}
		if err := pl.repo(g); err != nil {
			return err
		}
	}
	return nil
}

// guardedAt is a profile's read-only entry: a directory when it ends in
// "/" (a missing one shows empty), else a file with its stand-in.
func guardedAt(rel string) guarded {
	if strings.HasSuffix(rel, "/") {
		return guarded{dir: true}
	}
	return guarded{data: standIn(rel)}
}

// standIn is the content a missing settings file shows in the jail.
func standIn(rel string) string {
	if strings.HasSuffix(rel, ".json") {
		return "{}\n"
	}
	return ""
}

// agentDir protects an agent's directory in the workspace: an existing one
// becomes a mount point; a missing one an empty read-only directory, so
// that a session cannot create what the next agent would run, or, for an
// agent that writes there at start (scratch), an empty in-memory one that
// is gone with the session.
func (pl *planner) agentDir(d string, scratch bool) error {
	// An empty directory that another launch made as its placeholder is
	// planned as that launch planned it, as missing: this jail then shows
	// what that one shows, and makes nothing in it that the other
	// session's audit would find.
	if !pl.othersPlaceholder(d) {
		if missing, err := pl.pinDir(d); err != nil || !missing {
			return err
		}
	}
	if scratch && pl.writable(d) && !pl.seen[d] {
		pl.seen[d] = true
		pl.s.Masks = append(pl.s.Masks, Mask{Path: d, Kind: MaskTmpfs})
		pl.pr.Placeholders = append(pl.pr.Placeholders, Placeholder{Path: d, Dir: true})
		pl.pr.Protected = append(pl.pr.Protected, d)
		return nil
	}
	return pl.readOnly(d, guarded{dir: true})
}

// pinDir makes an existing directory d a mount point (bound onto itself),
// refusing a link or a file there; missing tells that d does not exist.
func (pl *planner) pinDir(d string) (missing bool, err error) {
	fi, err := os.Lstat(d)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return false, refuseLink(d)
	case err == nil && fi.IsDir():
		pl.tree(d)
		return false, nil
	case err == nil:
		return false, fmt.Errorf("%s is not a directory, and an agent reads its settings in it (fix: rm %s)", d, d)
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	default:
		return false, fmt.Errorf("checking %s: %w", d, err)
	}
}

// agentParents pins the directories between the workspace and an agent's
// nested name (.github for .github/hooks): each becomes a mount point bound
// onto itself, which a session can neither rename aside nor remove to make
// a fresh one, with its own hooks, in its place. A missing one is made for
// the session (a placeholder the session may use, removed after it when
// left empty), so that the name gets its read-only stand-in there too. A
// link on the way is refused, as at the name itself. An agent's own
// directory (.claude) is planned already. (Git's own names get no such
// parents: an empty .git would break git init.)
func (pl *planner) agentParents(p string) error {
	var ds []string
	for d := filepath.Dir(p); d != pl.ws && paths.Within(d, pl.ws); d = filepath.Dir(d) {
		ds = append(ds, d)
	}
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if pl.seen[d] {
			continue
		}
		missing, err := pl.pinDir(d)
		switch {
		case err != nil:
			return err
		case !missing:
		case !pl.writable(d):
			return nil
		default:
			pl.pr.Placeholders = append(pl.pr.Placeholders, Placeholder{Path: d, Dir: true})
			pl.willExist = append(pl.willExist, d)
			pl.tree(d)
		}
	}
	return nil
}

// refuseLink is the refusal of a protected name that is a link: binding
// its target would bind whatever the link's author chose.
func refuseLink(p string) error { return &linkError{path: p} }

// linkError is a protected name that is a link.
type linkError struct{ path string }

func (e *linkError) Error() string {
	return fmt.Sprintf("%s is a symbolic link, and the jail never binds what a link points to (fix: rm %s)", e.path, e.path)
}

// tree binds d onto itself, read-write.
func (pl *planner) tree(d string) {
	if pl.seen[d] {
		return
	}
	pl.seen[d] = true
	pl.s.Trees = append(pl.s.Trees, Bind{Src: d, Dst: d})
	pl.pr.Protected = append(pl.pr.Protected, d)
	if !under(d, pl.hostBound) && !slices.Contains(pl.hostBound, d) {
		pl.hostBound = append(pl.hostBound, d)
	}
}

// readOnly re-binds p read-only, or, when it is missing but its directory
// is one the jail could write, gives it a placeholder and a stand-in. A
// link is refused.
func (pl *planner) readOnly(p string, g guarded) error {
	if pl.seen[p] {
		return nil
	}
	pl.seen[p] = true
	if pl.masked(p) {
		return nil // an empty tmpfs of the jail's covers it
	}
	fi, err := os.Lstat(p)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return refuseLink(p)
	case err == nil:
		pl.s.ReadOnly = append(pl.s.ReadOnly, Bind{Src: p, Dst: p})
		pl.pr.Protected = append(pl.pr.Protected, p)
		if fi.IsDir() {
			pl.roDir[p] = true
		}
		return nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNotDir):
	default:
		return fmt.Errorf("checking %s: %w", p, err)
	}
	parent := filepath.Dir(p)
	pfi, err := os.Lstat(parent)
	exists := err == nil && pfi.IsDir() || slices.Contains(pl.willExist, parent)
	if !exists || !pl.writable(p) {
		return nil
	}
	pl.s.ReadOnly = append(pl.s.ReadOnly, Bind{Dst: p, EmptyDir: g.dir, Data: []byte(g.data)})
	pl.pr.Placeholders = append(pl.pr.Placeholders, Placeholder{Path: p, Dir: g.dir, Data: g.data})
	pl.pr.Protected = append(pl.pr.Protected, p)
	return nil
}

var errNotDir = errors.New("not a directory")

// writable reports whether the jail could create p: it lies in a tree
// bound read-write from the host.
func (pl *planner) writable(p string) bool { return under(p, pl.hostBound) }

// repo protects the repository whose .git entry is g: a directory, or a
// file (a linked worktree or a submodule checkout) naming its admin
// directory.
func (pl *planner) repo(g string) error {
	fi, err := os.Lstat(g)
	if err != nil {
		return nil // gone since it was listed
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return refuseGitLink(g)
	}
	if fi.IsDir() {
		return pl.gitDir(g, g)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is neither a directory nor a file (fix: rm %s)", g, g)
	}
	admin, err := adminDir(g)
	if err != nil {
		return err
	}
	// The file itself names the admin directory: it stays as it is.
	if err := pl.readOnly(g, guarded{}); err != nil {
		return err
	}
	common, err := commonDir(admin)
	if err != nil {
		return err
	}
	if common != admin {
		if !paths.Within(admin, filepath.Join(common, "worktrees")) {
			return fmt.Errorf("%s names %s as its common directory, which does not hold it (fix: git worktree repair, or rm %s)", admin, common, g)
		}
		if err := pl.gitDir(common, common); err != nil {
			return err
		}
		pl.tree(admin)
		for _, f := range worktreeFiles {
			if err := pl.readOnly(filepath.Join(admin, f.rel), f); err != nil {
				return err
			}
		}
		return nil
	}
	return pl.gitDir(admin, admin)
}

// adminDir reads a .git file ("gitdir: <path>") and checks that the
// directory it names belongs to this checkout: inside the workspace, or
// naming the checkout back (a worktree's gitdir file, a submodule's
// core.worktree). A .git file planted in a session therefore cannot bring
// an outside directory into the jail.
func adminDir(g string) (string, error) {
	b, err := saferead.ReadCapped(g)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w (fix: rm %s, or restore it with git worktree repair)", g, err, g)
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", fmt.Errorf("%s does not start with gitdir: (fix: rm %s, or restore it with git worktree repair)", g, g)
	}
	v = strings.TrimSpace(v)
	if !filepath.IsAbs(v) {
		v = filepath.Join(filepath.Dir(g), v)
	}
	d := filepath.Clean(v)
	fi, err := os.Lstat(d)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s names %s, which is not a directory (fix: git worktree repair, or rm %s)", g, d, g)
	}
	checkout := filepath.Dir(g)
	if back, err := saferead.ReadCapped(filepath.Join(d, "gitdir")); err == nil {
		if filepath.Clean(strings.TrimSpace(string(back))) == g {
			return d, nil
		}
	}
	if wt := workspace.GitConfigGet(filepath.Join(d, "config"), "core.worktree"); wt != "" {
		if !filepath.IsAbs(wt) {
			wt = filepath.Join(d, wt)
		}
		if filepath.Clean(wt) == checkout {
			return d, nil
		}
	}
	return "", fmt.Errorf("%s names %s, which does not name this checkout back %s", g, d, nameBackFix(g, d))
}

// commonDir is a git directory's common directory: its commondir file's
// path, or the directory itself.
func commonDir(admin string) (string, error) {
	p := filepath.Join(admin, "commondir")
	b, err := saferead.ReadCapped(p)
	if errors.Is(err, fs.ErrNotExist) {
		return admin, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w (fix: git worktree repair)", p, err)
	}
	v := strings.TrimSpace(string(b))
	if !filepath.IsAbs(v) {
		v = filepath.Join(admin, v)
	}
	c := filepath.Clean(v)
	if fi, err := os.Lstat(c); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s names %s, which is not a directory (fix: git worktree repair)", p, c)
	}
	return c, nil
}

// gitDir protects a repository's common directory d (depth counts the
// modules/ levels above it): the directory itself, the files git takes
// configuration or programs from, its worktrees' admin files, its
// submodules' admin directories, and a hooks path or included file in a
// tree the jail can write.
func (pl *planner) gitDir(d, top string) error {
	if pl.seen["gitdir:"+d] {
		return nil
	}
	pl.seen["gitdir:"+d] = true
	if err := refuseTree(d, pl.home, "git directory", pl.shared); err != nil && !paths.Within(d, pl.ws) {
		return err
	}
	pl.tree(d)
	for _, f := range commonFiles {
		if err := pl.readOnly(filepath.Join(d, f.rel), f); err != nil {
			return err
		}
	}
	if err := noLinkAt(filepath.Join(d, "worktrees")); err != nil {
		return err
	}
	if err := noLinkAt(filepath.Join(d, "modules")); err != nil {
		return err
	}
	if wts, err := os.ReadDir(filepath.Join(d, "worktrees")); err == nil {
		for _, w := range wts {
			for _, f := range worktreeFiles {
				if err := pl.readOnly(filepath.Join(d, "worktrees", w.Name(), f.rel), f); err != nil {
					return err
				}
			}
		}
	}
	if err := pl.modules(filepath.Join(d, "modules"), 1); err != nil {
		return err
	}
	return pl.configFiles(filepath.Join(d, "config"), d)
}

// noLinkAt refuses a link at p: the directory git lists its worktrees or
// modules in is read, never what a link there names.
func noLinkAt(p string) error {
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return refuseLink(p)
	}
	return nil
}

// modules protects the submodules' admin directories below dir.
func (pl *planner) modules(dir string, depth int) error {
	if depth > moduleDepth {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		m := filepath.Join(dir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			return refuseLink(m)
		}
		if !e.IsDir() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(m, "HEAD")); err != nil {
			// A submodule name with a slash: its admin directory is deeper.
			if err := pl.modules(m, depth+1); err != nil {
				return err
			}
			continue
		}
		for _, f := range commonFiles {
			if err := pl.readOnly(filepath.Join(m, f.rel), f); err != nil {
				return err
			}
		}
		if err := pl.modules(filepath.Join(m, "modules"), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// configFiles protects what a repository's config points git at inside a
// tree the jail can write: core.hooksPath, and the files it includes. git
// itself reads the config (only when it mentions either, so the common
// launch runs no git).
func (pl *planner) configFiles(cfg, gitdir string) error {
	b, err := saferead.ReadCapped(cfg)
	if err != nil {
		return nil
	}
	low := bytes.ToLower(b)
	if !bytes.Contains(low, []byte("hookspath")) && !bytes.Contains(low, []byte("include")) {
		return nil
	}
	for _, kv := range workspace.GitConfigList(gitdir) {
		key, val, _ := strings.Cut(kv, "=")
		key = strings.ToLower(key)
		switch {
		case key == "core.hookspath":
			p := val
			if strings.HasPrefix(p, "~/") {
				p = filepath.Join(pl.home, p[2:])
			} else if !filepath.IsAbs(p) {
				// Relative to the worktree's top, for a non-bare repository.
				p = filepath.Join(filepath.Dir(gitdir), p)
			}
			if err := pl.protectIfWritable(filepath.Clean(p), guarded{dir: true}); err != nil {
				return err
			}
		case strings.HasPrefix(key, "include.") && strings.HasSuffix(key, ".path"),
			strings.HasPrefix(key, "includeif.") && strings.HasSuffix(key, ".path"):
			p := val
			if strings.HasPrefix(p, "~/") {
				p = filepath.Join(pl.home, p[2:])
			} else if !filepath.IsAbs(p) {
				p = filepath.Join(gitdir, p)
			}
			if err := pl.protectIfWritable(filepath.Clean(p), guarded{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// protectIfWritable re-binds p read-only when the jail could change it.
func (pl *planner) protectIfWritable(p string, g guarded) error {
	if !pl.writable(p) && !slices.Contains(pl.hostBound, p) {
		return nil
	}
	return pl.readOnly(p, g)
}

// seal finishes the Prep from the Spec as planned: each placeholder's and
// stand-in's tree top (the outermost tree the launch knows that holds it,
// so that every directory on its way is resolved beneath a descriptor),
// and the mount points and writable trees the registry records.
func (pl *planner) seal() {
	tops := []string{pl.home}
	if pl.ws != "" {
		tops = append(tops, pl.ws)
	}
	tops = append(tops, pl.hostBound...)
	top := func(p string) string {
		best := ""
		for _, t := range tops {
			if t != p && paths.Within(p, t) && (best == "" || len(t) < len(best)) {
				best = t
			}
		}
		return best
	}
	pl.pinWays()
	pl.excludes()
	for i := range pl.pr.Placeholders {
		pl.pr.Placeholders[i].Root = top(pl.pr.Placeholders[i].Path)
	}
	for i := range pl.pr.StandIns {
		pl.pr.StandIns[i].Root = top(pl.pr.StandIns[i].Path)
	}
	pl.pr.MountPoints = pl.s.HostMountPoints()
	pl.pr.Writable = pl.s.WritableTrees()
	pl.pr.Sealed = pl.s.SealedMountPoints()
	pl.pr.Workspace = pl.ws
}

// pinWays binds onto itself every directory on the way to a mount point
// in the workspace, or in a tree outside it that the jail writes (a linked
// worktree's common directory): a nested repository's a/b for
// a/b/.git/config, a submodule's modules/<name>, worktrees/<name>. As a
// mount point, the session cannot rename it or swap it for a link, so a
// launch that comes while it lives finds the way to each of its own mount
// points as this one made it (raced). Parents come before what they hold:
// Trees are ordered by depth.
func (pl *planner) pinWays() {
	if pl.ws == "" {
		return
	}
	tops := []string{pl.ws}
	have := map[string]bool{pl.ws: true}
	for _, b := range pl.s.Trees {
		have[b.Dst] = true
		if !paths.Within(b.Dst, pl.ws) && !under(b.Dst, tops) {
			tops = append(tops, b.Dst)
		}
	}
	var dsts []string
	for _, b := range pl.s.Trees {
		dsts = append(dsts, b.Dst)
	}
	for _, b := range pl.s.ReadOnly {
		dsts = append(dsts, b.Dst)
	}
	for _, m := range pl.s.Masks {
		dsts = append(dsts, m.Path)
	}
	added := false
	for _, dst := range dsts {
		top := ""
		for _, t := range tops {
			if t != dst && paths.Within(dst, t) {
				top = t
				break
			}
		}
		if top == "" {
			continue
		}
		for c := filepath.Dir(dst); c != top && paths.Within(c, top); c = filepath.Dir(c) {
			if have[c] {
				continue
			}
			have[c] = true
			if fi, err := os.Lstat(c); err == nil && fi.IsDir() {
				pl.s.Trees = append(pl.s.Trees, Bind{Src: c, Dst: c})
				pl.pr.Protected = append(pl.pr.Protected, c)
				added = true
			}
		}
	}
	if added {
		slices.SortStableFunc(pl.s.Trees, func(a, b Bind) int {
			return strings.Count(a.Dst, "/") - strings.Count(b.Dst, "/")
		})
	}
}

// othersPlaceholder reports whether d is an empty directory that a record
// in the home lists as a placeholder.
func (pl *planner) othersPlaceholder(d string) bool {
	var st syscall.Stat_t
	if syscall.Lstat(d, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return false
	}
	if ents, err := os.ReadDir(d); err != nil || len(ents) > 0 {
		return false
	}
	return listed(pl.home, d, uint64(st.Dev), st.Ino)
}

// masked reports whether p lies below a tmpfs the plan puts over a
// directory, or below a directory it binds read-only: the jail cannot
// create p, so it needs no placeholder.
func (pl *planner) masked(p string) bool {
	for _, m := range pl.s.Masks {
		if m.Kind != MaskFile && m.Path != p && paths.Within(p, m.Path) {
			return true
		}
	}
	for _, b := range pl.s.ReadOnly {
		if b.Dst != p && paths.Within(p, b.Dst) && (b.EmptyDir || b.Src != "" && pl.roDir[b.Dst]) {
			return true
		}
	}
	return false
}

// racedOr is err, or, when err refuses a link that another live session
// could have put there for the moment (a path it writes and did not hold
// at its start), the refusal that says so: the fix is then to wait, not to
// remove the link.
func (pl *planner) racedOr(err error) error {
	var le *linkError
	if !errors.As(err, &le) {
		return err
	}
	if r := racedAt(pl.home, le.path); r != nil {
		return r
	}
	return err
}

// excludes gives the jail's git an excludes file of the jail's own (merged
// with the user's), which names every stand-in and scratch directory the
// jail shows in the workspace: git status there lists none of them and
// git add -A stages none. The gitconfig the jail shows names it.
func (pl *planner) excludes() {
	gc := slices.IndexFunc(pl.s.HomeReadOnly, func(b Bind) bool { return b.Dst == filepath.Join(pl.home, ".gitconfig") && b.isData() })
	at := filepath.Join(pl.home, gitExcludesRel)
	if gc < 0 || pl.s.layerIndex().hostPath(at) != "" {
		return // no curated gitconfig, or the place is the host's
	}
	var shown []shownName
	if pl.ws != "" {
		// Another live session's placeholders are host files to this
		// launch, bound read-only like the repository's own: they are
		// that session's, and no more the repository's than this one's.
		others := livePlaceholders(pl.home)
		for _, b := range pl.s.ReadOnly {
			if paths.Within(b.Dst, pl.ws) && (b.isData() || others[b.Dst]) {
				shown = append(shown, shownName{path: b.Dst})
			}
		}
		for _, m := range pl.s.Masks {
			if m.Kind == MaskTmpfs && paths.Within(m.Path, pl.ws) && (others[m.Path] || slices.ContainsFunc(pl.pr.Placeholders, func(ph Placeholder) bool { return ph.Path == m.Path })) {
				shown = append(shown, shownName{path: m.Path, dir: true})
			}
		}
	}
	data := gitExcludes(pl.home, pl.ws, shown)
	if data == "" {
		return
	}
	pl.s.HomeReadOnly[gc].Data = withExcludes(pl.s.HomeReadOnly[gc].Data, at)
	pl.s.HomeReadOnly = append(pl.s.HomeReadOnly, Bind{Dst: at, Data: []byte(data)})
}
