package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

// TestPlanLinkedCwd: a current directory reached through a link in the
// home starts the agent at the shell's path, with that link made again in
// the jail's home; the workspace and its protections are the target's.
// Through a second link below the first, the real path is used instead.
func TestPlanLinkedCwd(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("claude")
	link := f.home + "/proj-link"
	testenv.Must(t, os.Symlink(f.ws, link))
	s, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: link})
	if err != nil {
		t.Fatal(err)
	}
	if s.Workspace != f.ws || s.Chdir != link || !slices.Contains(s.Links, Link{Target: f.ws, Path: link}) {
		t.Errorf("workspace %s, chdir %s, links %v", s.Workspace, s.Chdir, s.Links)
	}
	if !slices.ContainsFunc(pr.Protected, func(x string) bool { return strings.HasPrefix(x, f.ws+"/.git") }) {
		t.Errorf("the target's .git is not protected: %v", pr.Protected)
	}
	// A link whose path goes through a second link: the real path.
	testenv.Must(t, os.MkdirAll(f.ws+"/a", 0o700))
	testenv.Must(t, os.Symlink(f.ws+"/a", f.ws+"/b"))
	s, _, err = Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: link + "/b"})
	if err != nil || s.Chdir != f.ws+"/a" {
		t.Errorf("two links: %v chdir %s", err, s.Chdir)
	}
	// A link in a private tree cannot be shown: the real path.
	tmpLink := filepath.Join(t.TempDir(), "l")
	testenv.Must(t, os.Symlink(f.ws, tmpLink))
	if s, _, err = Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: tmpLink}); err != nil || s.Chdir != f.ws || len(s.Links) != len(linksWithout(s.Links, tmpLink)) {
		t.Errorf("a link in /tmp: %v chdir %s links %v", err, s.Chdir, s.Links)
	}
}

func linksWithout(ls []Link, p string) []Link {
	return slices.DeleteFunc(slices.Clone(ls), func(l Link) bool { return l.Path == p })
}

// TestPlanReadOnlyWorkspace: codex's read-only mode binds the workspace
// read-only with none of a writable workspace's protections; the default
// keeps them.
func TestPlanReadOnlyWorkspace(t *testing.T) {
	f := newFixture(t)
	x, _ := agent.Lookup("codex")
	s, pr, err := Plan(&Launch{Profile: x, Config: &Config{}, Home: f.home, Cwd: f.ws, Args: []string{"-s", "read-only"}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.WorkspaceReadOnly || len(s.Trees) != 0 || len(pr.Repos) != 0 || len(pr.Notes) != 1 || !strings.Contains(pr.Notes[0], "read-only") {
		t.Errorf("read-only: %v trees %v repos %v notes %q", s.WorkspaceReadOnly, s.Trees, pr.Repos, pr.Notes)
	}
	for _, ph := range pr.Placeholders {
		if strings.HasPrefix(ph.Path, f.ws) {
			t.Errorf("a placeholder in the read-only workspace: %s", ph.Path)
		}
	}
	a := Argv(s)
	if i := slices.Index(a, f.ws); i < 1 || a[i-2] != "--ro-bind" && a[i-2] != "--ro-bind-fd" {
		t.Errorf("the workspace is not bound read-only: %q", a)
	}
	s, _, err = Plan(&Launch{Profile: x, Config: &Config{}, Home: f.home, Cwd: f.ws, Args: []string{"-s", "workspace-write"}})
	if err != nil || s.WorkspaceReadOnly || len(s.Trees) == 0 {
		t.Errorf("workspace-write: %v %v %v", err, s.WorkspaceReadOnly, s.Trees)
	}
}

// TestEnclosingRepoNote: a workspace started in a subdirectory of a
// repository gets one line naming that repository and the directory to
// start in; one that holds its own .git, one outside any repository, and
// one inside the home's own repository get none.
func TestEnclosingRepoNote(t *testing.T) {
	base := t.TempDir()
	home := filepath.Join(base, "home")
	repo := filepath.Join(home, "src", "mono")
	sub := filepath.Join(repo, "services", "api")
	own := filepath.Join(repo, "vendor", "lib")
	plain := filepath.Join(home, "scratch")
	for _, d := range []string{repo + "/.git", sub, own + "/.git", plain} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if n := enclosingRepoNote(sub, home, "claude"); !strings.Contains(n, sub) || !strings.Contains(n, "git repository "+repo) || !strings.Contains(n, "start claude in "+repo) {
		t.Errorf("a subdirectory of %s: %q", repo, n)
	}
	for _, ws := range []string{repo, own, plain, ""} {
		if n := enclosingRepoNote(ws, home, "claude"); n != "" {
			t.Errorf("%q: %q, want no line", ws, n)
		}
	}
	// The home's own repository (dotfiles) is no project's.
	if err := os.MkdirAll(home+"/.git", 0o755); err != nil {
		t.Fatal(err)
	}
	if n := enclosingRepoNote(plain, home, "claude"); n != "" {
		t.Errorf("inside the home's repository: %q", n)
	}
}
