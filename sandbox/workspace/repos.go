package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/sandbox/saferead"
)

// The bound of FindRepos's walk. It runs at every launch (for the
// launch-time protection) and again after the session (for the audit), so
// it must stay cheap on any workspace: what lies deeper or past the count
// is not seen, and the README says so.
const (
	// RepoWalkDepth is how many directory levels below the workspace are
	// looked into for a .git: ws/a/b/c/.git is found, ws/a/b/c/d/.git not.
	RepoWalkDepth = 3
	// RepoWalkDirs is how many directories the walk lists at most.
	RepoWalkDirs = 512
	// RepoWalkEntries is how many entries of one directory the walk reads
	// at most: past them (a flat cache, generated data) it stops listing
	// that directory and looks for its .git directly, so that a directory
	// of half a million files costs what a small one does.
	RepoWalkEntries = 4096
)

// repoWalkSkip are trees the walk never enters: git's own directory, and
// dependency and build trees that hold thousands of directories and no
// repository of the user's.
var repoWalkSkip = map[string]bool{
	".git": true, ".hg": true, "node_modules": true, ".venv": true, "venv": true, "__pycache__": true,
	".tox": true, ".mypy_cache": true, ".pytest_cache": true, ".cache": true, ".gradle": true,
	".terraform": true, "target": true, ".next": true, ".direnv": true,
}

// FindRepos lists the git repositories at or below the workspace ws: the
// .git entries (directories, files or links), and the directories git
// takes for git directories of their own (HEAD, objects, refs), that a
// breadth-first walk of
// at most RepoWalkDepth levels and RepoWalkDirs directories meets, never
// entering .git or the trees of repoWalkSkip, nor following a link; plus
// what git itself lists in each git directory found, wherever it lies in
// ws: the admin directories of submodules (modules/*, nested), the .git
// files of linked worktrees (worktrees/*/gitdir), and the .git files of
// submodule checkouts (the paths .gitmodules names). Each entry is a
// cleaned absolute path, once, in the walk's order.
//
// Every file it reads goes through saferead.ReadCapped, and every directory it
// lists is opened without following a link: a planted FIFO or link cannot
// hang or redirect it.
func FindRepos(ws string) []string {
	repos, _ := Find(ws)
	return repos
}

// Find is FindRepos, and besides the repositories the directories below
// the workspace's top, in the same walk, that hold an agent's project
// config (.claude, opencode.json, ...), which an agent started there
// loads, or a file a host tool loads there on its own (.envrc, .cargo,
// rust-toolchain.toml, .hg, ...: hostFiles): the audit watches them.
func Find(ws string) (repos, agentDirs []string) {
	ws = filepath.Clean(ws)
	f := &repoFinder{ws: ws, seen: map[string]bool{}}
	type level struct {
		dir   string
		depth int
	}
	queue := []level{{ws, 0}}
	for len(queue) > 0 && f.listed < RepoWalkDirs {
		d := queue[0]
		queue = queue[1:]
		if d.depth == RepoWalkDepth {
			// The deepest level is not entered: one lstat for its .git
			// costs less than listing it.
			f.listed++
			f.add(filepath.Join(d.dir, ".git"), unknownType)
			if bareGitDirAt(d.dir) {
				f.add(d.dir, fs.ModeDir)
			}
			continue
		}
		ents, whole := f.listSome(d.dir, RepoWalkEntries)
		if !whole {
			f.add(filepath.Join(d.dir, ".git"), unknownType)
		}
		if bareGitDir(ents) {
			// git takes a directory with HEAD, objects and refs for a git
			// directory of its own (safe.bareRepository defaults to all):
			// its config and hooks run for a git command in it or below.
			f.add(d.dir, fs.ModeDir)
			if d.depth > 0 {
				continue
			}
		}
		held := false
		for _, e := range ents {
			if d.depth > 0 && !held && (agentNames[e.name] || holdsHostFile(e.name)) {
				held = true
				agentDirs = append(agentDirs, d.dir)
			}
			if e.name == ".git" {
				f.add(filepath.Join(d.dir, e.name), e.typ)
				continue
			}
			if e.typ == fs.ModeDir && !repoWalkSkip[e.name] {
				queue = append(queue, level{filepath.Join(d.dir, e.name), d.depth + 1})
			}
		}
	}
	return f.out, agentDirs
}

// bareGitDir reports whether a directory's entries make it a git
// directory to git's discovery: a HEAD file (or link), and objects and
// refs directories.
func bareGitDir(ents []dirent) bool {
	var head, objects, refs bool
	for _, e := range ents {
		switch e.name {
		case "HEAD":
			head = e.typ == 0 || e.typ == fs.ModeSymlink
		case "objects":
			objects = e.typ == fs.ModeDir
		case "refs":
			refs = e.typ == fs.ModeDir
		}
	}
	return head && objects && refs
}

// bareGitDirAt is bareGitDir for a directory not listed: one lstat for
// HEAD where there is none, three where there is.
func bareGitDirAt(dir string) bool {
	var ents []dirent
	for _, n := range []string{"HEAD", "objects", "refs"} {
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			return false
		}
		ents = append(ents, dirent{n, fi.Mode().Type()})
	}
	return bareGitDir(ents)
}

// unknownType asks add to lstat the entry: no type bit combination a
// directory reports has all of these.
const unknownType = fs.ModeIrregular | fs.ModeDir

type repoFinder struct {
	ws     string
	out    []string
	seen   map[string]bool
	listed int
}

type dirent struct {
	name string
	typ  fs.FileMode // the type bits, as the directory reports them
}

// list reads at most RepoWalkEntries of a directory's entries, sorted by
// name, without following a link to it; it counts against RepoWalkDirs.
// A directory a session filled with a million entries costs what a small
// one does.
func (f *repoFinder) list(dir string) []dirent {
	out, _ := f.listSome(dir, RepoWalkEntries)
	return out
}

// listSome reads at most max entries of a directory, in batches;
// whole reports whether it read them all.
func (f *repoFinder) listSome(dir string, max int) (out []dirent, whole bool) {
	if f.listed >= RepoWalkDirs {
		return nil, true
	}
	f.listed++
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	whole = true
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			out = append(out, dirent{e.Name(), e.Type()})
		}
		if err != nil || len(ents) == 0 {
			break
		}
		if len(out) >= max {
			whole = false
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, whole
}

// add records a .git entry (a directory, a file or a link), and for a
// git directory what git lists in it. A type not known yet gets an lstat.
func (f *repoFinder) add(p string, typ fs.FileMode) {
	if f.seen[p] {
		return
	}
	if typ == unknownType {
		fi, err := os.Lstat(p)
		if err != nil {
			return
		}
		typ = fi.Mode().Type()
	}
	if typ != fs.ModeDir && typ != 0 && typ != fs.ModeSymlink {
		return
	}
	f.seen[p] = true
	f.out = append(f.out, p)
	if typ == fs.ModeDir {
		f.gitLists(p)
		if filepath.Base(p) == ".git" {
			f.submoduleCheckouts(filepath.Dir(p))
		}
	}
}

// gitLists adds what a git directory lists: its linked worktrees' .git
// files and its submodules' admin directories (and theirs, nested).
func (f *repoFinder) gitLists(gitdir string) {
	for _, e := range f.list(filepath.Join(gitdir, "worktrees")) {
		if e.typ != fs.ModeDir {
			continue
		}
		b, err := saferead.ReadCapped(filepath.Join(gitdir, "worktrees", e.name, "gitdir"))
		if err != nil {
			continue
		}
		if p := strings.TrimSpace(string(b)); filepath.IsAbs(p) {
			f.addInside(filepath.Clean(p), unknownType)
		}
	}
	f.modules(filepath.Join(gitdir, "modules"), 0)
}

// modules adds the submodule admin directories below dir. A submodule's
// name may hold slashes, so a directory without a HEAD is looked into, a
// few levels deep (moduleNameDepth).
func (f *repoFinder) modules(dir string, depth int) {
	for _, e := range f.list(dir) {
		if e.typ != fs.ModeDir {
			continue
		}
		p := filepath.Join(dir, e.name)
		if _, err := os.Lstat(filepath.Join(p, "HEAD")); err == nil {
			f.addInside(p, fs.ModeDir)
		} else if depth < moduleNameDepth {
			f.modules(p, depth+1)
		}
	}
}

// submoduleCheckouts adds the .git of each path .gitmodules names in a
// work tree. Only `path = X` lines are taken: a checkout named otherwise
// is still covered by its admin directory under .git/modules, which holds
// its configuration and hooks.
func (f *repoFinder) submoduleCheckouts(worktree string) {
	b, err := saferead.ReadCapped(filepath.Join(worktree, ".gitmodules"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "path") {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "" || filepath.IsAbs(v) {
			continue
		}
		f.addInside(filepath.Join(worktree, v, ".git"), unknownType)
	}
}

// moduleNameDepth is how many slashes a submodule's name may hold for its
// admin directory to be found.
const moduleNameDepth = 8

// addInside adds an entry that lies in the workspace and exists.
func (f *repoFinder) addInside(p string, typ fs.FileMode) {
	if !paths.Within(p, f.ws) {
		return
	}
	f.add(p, typ)
}
