package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

func planIn(t *testing.T, f *fixture, cwd string) (*Spec, *Prep, *argvCheck) {
	t.Helper()
	p, _ := agent.Lookup("codex")
	s, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, User: "ada", Cwd: cwd, Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	s.DataFD = 6
	makeDirPlaceholders(t, pr)
	return s, pr, &argvCheck{t: t, argv: resolvedArgv(t, s)}
}

// A linked worktree (.git is a file): the admin directory and the common
// directory outside the workspace are bound read-write, as mount points,
// with the files git follows read-only; the .git file itself is read-only.
func TestProtectLinkedWorktree(t *testing.T) {
	f := newFixture(t)
	main := filepath.Join(filepath.Dir(f.ws), "main")
	testenv.Must(t, os.MkdirAll(main, 0o755))
	testenv.Git(t, main, "init", "-q")
	testenv.Git(t, main, "commit", "-q", "--allow-empty", "-m", "x")
	wt := filepath.Join(filepath.Dir(f.ws), "wt")
	testenv.Git(t, main, "worktree", "add", "-q", wt)
	_, pr, c := planIn(t, f, wt)
	admin := main + "/.git/worktrees/wt"
	c.order(m("--bind", wt, wt), m("--bind", main+"/.git", main+"/.git"), m("--bind", admin, admin),
		m("--ro-bind", wt+"/.git", wt+"/.git"), m("--ro-bind", main+"/.git/config", main+"/.git/config"),
		m("--ro-bind", main+"/.git/hooks", main+"/.git/hooks"),
		m("--ro-bind", admin+"/commondir", admin+"/commondir"), m("--ro-bind", admin+"/gitdir", admin+"/gitdir"))
	for _, p := range []string{main + "/.git", admin, wt + "/.git", main + "/.git/config"} {
		if !slices.Contains(pr.Protected, p) {
			t.Errorf("Protected lacks %s: %v", p, pr.Protected)
		}
	}
	// The main repository's missing commondir gets a placeholder holding ".".
	if !slices.Contains(noRoots(pr.Placeholders), Placeholder{Path: main + "/.git/commondir", Data: ".\n"}) {
		t.Errorf("placeholders %v lack %s/.git/commondir", pr.Placeholders, main)
	}
}

// A submodule checkout: its admin directory in the superproject's
// .git/modules is protected like a common directory.
func TestProtectSubmoduleCheckout(t *testing.T) {
	f := newFixture(t)
	lib := filepath.Join(filepath.Dir(f.ws), "lib")
	testenv.Must(t, os.MkdirAll(lib, 0o755))
	testenv.Git(t, lib, "init", "-q")
	testenv.Git(t, lib, "commit", "-q", "--allow-empty", "-m", "lib")
	sup := filepath.Join(filepath.Dir(f.ws), "super")
	testenv.Must(t, os.MkdirAll(sup, 0o755))
	testenv.Git(t, sup, "init", "-q")
	testenv.Git(t, sup, "submodule", "-q", "add", lib, "lib")
	sub := sup + "/lib"
	_, _, c := planIn(t, f, sub)
	admin := sup + "/.git/modules/lib"
	c.order(m("--bind", sub, sub), m("--bind", admin, admin), m("--ro-bind", sub+"/.git", sub+"/.git"),
		m("--ro-bind", admin+"/config", admin+"/config"), m("--ro-bind", admin+"/hooks", admin+"/hooks"))
	// From the superproject, the module's admin directory is protected too.
	_, _, c = planIn(t, f, sup)
	c.has("--ro-bind", admin+"/config", admin+"/config")
	c.has("--ro-bind", admin+"/hooks", admin+"/hooks")
}

// A .git file planted in a session, naming a directory outside the
// workspace that does not name it back, refuses the next launch.
func TestPlantedGitFileRefused(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.MkdirAll(f.ws+"/sub", 0o755))
	testenv.Must(t, os.WriteFile(f.ws+"/sub/.git", []byte("gitdir: "+f.home+"/.ssh\n"), 0o644))
	p, _ := agent.Lookup("claude")
	_, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
	if err == nil || !strings.Contains(err.Error(), f.ws+"/sub/.git") || !strings.Contains(err.Error(), "fix") {
		t.Errorf("a planted .git file: %v", err)
	}
}

// core.hooksPath and included config files inside the workspace are
// read-only; git itself tells where they are.
func TestProtectHooksPathAndIncludes(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.RemoveAll(f.ws+"/.git"))
	testenv.Git(t, f.ws, "init", "-q")
	testenv.Git(t, f.ws, "config", "core.hooksPath", "tools/hooks")
	testenv.Git(t, f.ws, "config", "include.path", "../shared.gitconfig")
	testenv.Must(t, os.MkdirAll(f.ws+"/tools/hooks", 0o755))
	_, pr, c := planIn(t, f, f.ws)
	c.has("--ro-bind", f.ws+"/tools/hooks", f.ws+"/tools/hooks")
	// The included file does not exist yet: a placeholder keeps it so.
	if !slices.Contains(noRoots(pr.Placeholders), Placeholder{Path: f.ws + "/shared.gitconfig"}) {
		t.Errorf("placeholders %v lack the included file", pr.Placeholders)
	}
}

// A nested repository that exists at launch is protected like the top one.
func TestProtectNestedRepository(t *testing.T) {
	f := newFixture(t)
	n := f.ws + "/vendor/dep"
	testenv.Must(t, os.MkdirAll(n, 0o755))
	testenv.Git(t, n, "init", "-q")
	_, _, c := planIn(t, f, f.ws)
	c.order(m("--bind", n+"/.git", n+"/.git"), m("--ro-bind", n+"/.git/config", n+"/.git/config"), m("--ro-bind", n+"/.git/hooks", n+"/.git/hooks"))
}

func TestSocketPath(t *testing.T) {
	for line, want := range map[string]string{
		"0000000000000000: 00000002 00000000 00010000 0001 01 12345 /run/x.sock":        "/run/x.sock",
		"0000000000000000: 00000002 00000000 00010000 0001 01 12345 /srv/a b/c.sock":    "/srv/a b/c.sock",
		"0000000000000000: 00000002 00000000 00010000 0001 01 12345 @abstract":          "",
		"0000000000000000: 00000002 00000000 00010000 0001 01 12345 relative.sock":      "",
		"0000000000000000: 00000003 00000000 00000000 0001 03 12346":                    "",
		"0000000000000000: 00000002 00000000 00010000 0001 01 12345 /var/lib/x//y.sock": "/var/lib/x/y.sock",
	} {
		if got := socketPath([]byte(line)); got != want {
			t.Errorf("socketPath(%q) = %q, want %q", line, got, want)
		}
	}
}

// A host socket the jail would see is masked: in the workspace one by one,
// elsewhere with its whole directory (private before the binds when it
// holds one, such as the workspace's parent). One under a private tmpfs or
// the home's tmpfs costs nothing.
func TestSocketMasks(t *testing.T) {
	f := newFixture(t)
	visible := filepath.Join(filepath.Dir(f.ws), "app.sock")
	inWS := f.ws + "/dev.sock"
	inHome := f.home + "/.x.sock"
	other := filepath.Join(filepath.Dir(filepath.Dir(f.ws)), "srv", "run")
	testenv.Must(t, os.MkdirAll(other, 0o755))
	many := []string{other + "/a.sock", other + "/b.sock", other + "/c.sock"}
	var lines []string
	for _, p := range append([]string{visible, inWS, inHome, "/tmp/hidden.sock"}, many...) {
		if strings.HasPrefix(p, "/tmp") {
			lines = append(lines, "0: 00000002 00000000 00010000 0001 01 1 "+p)
			continue
		}
		mkSock(t, p)
		lines = append(lines, "0: 00000002 00000000 00010000 0001 01 1 "+p)
	}
	list := filepath.Join(f.rt, "unix")
	testenv.Must(t, os.WriteFile(list, []byte("Num RefCount Protocol Flags Type St Inode Path\n"+strings.Join(lines, "\n")+"\n"), 0o600))
	old := procNetUnix
	procNetUnix = list
	defer func() { procNetUnix = old }()
	s, _, c := planIn(t, f, f.ws)
	src := filepath.Dir(f.ws)
	c.order(m("--tmpfs", src), m("--perms", "0700", "--tmpfs", f.home), m("--bind", f.ws, f.ws))
	c.lacks("--ro-bind", "/dev/null", visible)
	c.has("--ro-bind", "/dev/null", inWS)
	c.lacks("--ro-bind", "/dev/null", inHome)
	c.lacks("--ro-bind", "/dev/null", "/tmp/hidden.sock")
	c.has("--tmpfs", other, "--remount-ro", other)
	for _, p := range many {
		c.lacks("--ro-bind", "/dev/null", p)
	}
	if !slices.Contains(s.Private, src) {
		t.Errorf("private %q lacks %s", s.Private, src)
	}
}

func mkSock(t testing.TB, p string) {
	t.Helper()
	testenv.HostSockets(t)
	fd, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fd.Close(); os.Remove(p) })
}

// A host socket that goes away between the plan and the jail's start loses
// its mask (bwrap would otherwise make a file at its path, or fail).
func TestDropVanishedSockets(t *testing.T) {
	f := newFixture(t)
	gone := filepath.Join(filepath.Dir(f.ws), "gone.sock")
	kept := filepath.Join(filepath.Dir(f.ws), "kept.sock")
	mkSock(t, kept)
	s := &Spec{Masks: []Mask{{Path: gone, Kind: MaskFile, Socket: true}, {Path: kept, Kind: MaskFile, Socket: true}, {Path: "/etc/shadow", Kind: MaskFile}}}
	if !s.DropVanishedSockets() || len(s.Masks) != 2 || s.Masks[0].Path != kept || s.Masks[1].Path != "/etc/shadow" {
		t.Errorf("masks after drop: %+v", s.Masks)
	}
	if s.DropVanishedSockets() {
		t.Error("dropped again with nothing gone")
	}
}

// TestNestedAgentNameWithoutItsParent: a workspace without .github still
// gets Copilot's .github/hooks protected: .github is a placeholder the
// session may use, pinned (bound onto itself) so that it cannot be renamed
// aside, and hooks a read-only stand-in in it.
func TestNestedAgentNameWithoutItsParent(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.RemoveAll(f.ws+"/.github"))
	_, pr, c := planIn(t, f, f.ws)
	if !slices.Contains(noRoots(pr.Placeholders), Placeholder{Path: f.ws + "/.github", Dir: true}) {
		t.Errorf("placeholders %v lack .github", pr.Placeholders)
	}
	c.order(m("--bind", f.ws+"/.github", f.ws+"/.github"), m("--tmpfs", f.ws+"/.github/hooks", "--remount-ro", f.ws+"/.github/hooks"))
	c.lacks("--tmpfs", f.ws+"/.github", "--remount-ro", f.ws+"/.github")
}

// noRoots is phs without their tree tops, for comparing with what a test
// expects.
func noRoots(phs []Placeholder) []Placeholder {
	out := make([]Placeholder, len(phs))
	for i, ph := range phs {
		ph.Root = ""
		out[i] = ph
	}
	return out
}

// TestMountPointsBeneath: every mount point in a tree the jail writes is
// named by that tree's top and the name below it, the outermost tree that
// holds it; a mount point in the jail's own tmpfs (the home's) is none.
func TestMountPointsBeneath(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.MkdirAll(f.ws+"/a/nested/.git", 0o700))
	p, _ := agent.Lookup("codex")
	s, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
	testenv.Must(t, err)
	got := map[string]MountPoint{}
	for _, mp := range s.MountPointsBeneath() {
		got[mp.Dst] = mp
	}
	for dst, want := range map[string]MountPoint{
		f.ws + "/.git/config":          {Top: f.ws, Rel: ".git/config"},
		f.ws + "/a":                    {Top: f.ws, Rel: "a"},
		f.ws + "/a/nested/.git/config": {Top: f.ws, Rel: "a/nested/.git/config"},
		f.home + "/.codex/packages":    {Top: f.home + "/.codex", Rel: "packages"},
	} {
		want.Dst = dst
		if got[dst] != want {
			t.Errorf("%s: %+v, want %+v", dst, got[dst], want)
		}
	}
	if mp, ok := got[f.home+"/.gitconfig"]; ok {
		t.Errorf("the jail's own gitconfig is a host mount point: %+v", mp)
	}
	if mp, ok := got[f.ws]; ok {
		t.Errorf("the workspace is below a tree it writes: %+v", mp)
	}
}
