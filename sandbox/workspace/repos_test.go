package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/internal/testenv"
)

func TestFindRepos(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	ws := filepath.Join(base, "ws")
	testenv.Mkdirs(t, ws, base+"/other", base+"/lib")
	testenv.Git(t, ws, "init", "-q")
	testenv.Git(t, ws, "commit", "-q", "--allow-empty", "-m", "one")
	// Nested repositories: at the bound, below it, and in skipped trees.
	for _, d := range []string{"a/b/c", "a/b/c/d", "node_modules/x", "p/.git/q"} {
		testenv.Mkdirs(t, filepath.Join(ws, d, ".git"))
	}
	// A .git file and a .git link are entries too (the plan refuses a link).
	testenv.Mkdirs(t, ws+"/f", ws+"/l")
	testenv.Must(t, os.WriteFile(ws+"/f/.git", []byte("gitdir: ../.git\n"), 0o644))
	testenv.Must(t, os.Symlink(base+"/other", ws+"/l/.git"))
	// A link to a directory with a repository is not followed.
	testenv.Mkdirs(t, base+"/other/r/.git")
	testenv.Must(t, os.Symlink(base+"/other/r", ws+"/linked"))
	// A linked worktree deep in the workspace, and one outside it.
	testenv.Git(t, ws, "worktree", "add", "-q", "w/1/2/3/4/tree")
	testenv.Git(t, ws, "worktree", "add", "-q", base+"/outside-tree")
	// A submodule whose checkout is below the bound, named with slashes.
	testenv.Git(t, base+"/lib", "init", "-q")
	testenv.Git(t, base+"/lib", "commit", "-q", "--allow-empty", "-m", "lib")
	testenv.Git(t, ws, "submodule", "add", "-q", base+"/lib", "s/1/2/3/sub")

	got := FindRepos(ws)
	want := []string{
		ws + "/.git",
		ws + "/w/1/2/3/4/tree/.git",
		ws + "/.git/modules/s/1/2/3/sub",
		ws + "/s/1/2/3/sub/.git",
		ws + "/f/.git",
		ws + "/l/.git",
		ws + "/p/.git",
		ws + "/a/b/c/.git",
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("FindRepos lacks %s:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if got[0] != ws+"/.git" {
		t.Errorf("the workspace's own .git is not first: %v", got)
	}
	for _, bad := range []string{"a/b/c/d/.git", "node_modules/x/.git", "p/.git/q/.git", "linked/.git"} {
		if slices.Contains(got, ws+"/"+bad) {
			t.Errorf("FindRepos went past its bound to %s", bad)
		}
	}
	for _, g := range got {
		if !paths.Within(g, ws) {
			t.Errorf("FindRepos lists %s, outside the workspace", g)
		}
	}
	if len(got) != len(want) {
		t.Errorf("FindRepos: %d entries, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}

// A FIFO where git keeps its lists, or a .gitmodules linked to /dev/zero,
// never holds the walk.
func TestFindReposPlantedFiles(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	testenv.Mkdirs(t, ws+"/.git/worktrees/x", ws+"/.git/modules/m")
	testenv.Must(t, syscall.Mkfifo(ws+"/.git/worktrees/x/gitdir", 0o644))
	testenv.Must(t, syscall.Mkfifo(ws+"/.git/modules/m/HEAD", 0o644))
	testenv.Must(t, os.Symlink("/dev/zero", ws+"/.gitmodules"))
	testenv.Mkdirs(t, ws+"/n")
	testenv.Must(t, syscall.Mkfifo(ws+"/n/.gitmodules", 0o644))
	testenv.Must(t, syscall.Mkfifo(ws+"/n/.git", 0o644)) // not an entry: a FIFO
	var got []string
	testenv.Within5s(t, "FindRepos", func() { got = FindRepos(ws) })
	want := []string{ws + "/.git", ws + "/.git/modules/m"}
	if !slices.Equal(got, want) {
		t.Errorf("FindRepos = %v, want %v", got, want)
	}
}

// The walk lists at most RepoWalkDirs directories: a repository past the
// count is not seen.
func TestFindReposCount(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	for i := 0; i < RepoWalkDirs+10; i++ {
		testenv.Mkdirs(t, fmt.Sprintf("%s/d%04d", ws, i))
	}
	testenv.Mkdirs(t, ws+"/d0001/.git", fmt.Sprintf("%s/d%04d/.git", ws, RepoWalkDirs+5))
	got := FindRepos(ws)
	if !slices.Equal(got, []string{ws + "/d0001/.git"}) {
		t.Errorf("FindRepos = %v: want only the repository within the count", got)
	}
}

// BenchmarkFindRepos walks a workspace of a few hundred directories: a
// repository with submodules' and dependencies' trees.
func BenchmarkFindRepos(b *testing.B) {
	ws, _ := filepath.EvalSymlinks(b.TempDir())
	testenv.Mkdirs(b, ws+"/.git/hooks", ws+"/.git/objects", ws+"/.git/refs/heads", ws+"/node_modules/a/b")
	for i := 0; i < 20; i++ {
		for j := 0; j < 15; j++ {
			testenv.Mkdirs(b, fmt.Sprintf("%s/src/p%02d/m%02d", ws, i, j))
		}
		testenv.Must(b, os.WriteFile(fmt.Sprintf("%s/src/p%02d/file.go", ws, i), nil, 0o644))
	}
	testenv.Mkdirs(b, ws+"/src/p03/m04/.git")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(FindRepos(ws)) != 2 {
			b.Fatal("FindRepos missed a repository")
		}
	}
}

// TestFindReposBigDirectory: a directory of more entries than the walk
// reads still has its own .git found, and reading it stops at the bound.
func TestFindReposBigDirectory(t *testing.T) {
	ws := t.TempDir()
	big := filepath.Join(ws, "data")
	if err := os.MkdirAll(filepath.Join(big, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < RepoWalkEntries+500; i++ {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := &repoFinder{ws: ws, seen: map[string]bool{}}
	ents, whole := f.listSome(big, RepoWalkEntries)
	if whole || len(ents) < RepoWalkEntries || len(ents) > RepoWalkEntries+256 {
		t.Errorf("listSome read %d entries (whole %v), want it to stop at %d", len(ents), whole, RepoWalkEntries)
	}
	if got := FindRepos(ws); !slices.Contains(got, filepath.Join(big, ".git")) {
		t.Errorf("FindRepos = %v, want the big directory's own .git", got)
	}
}
