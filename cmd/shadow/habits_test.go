package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
)

// The workspace as a developer keeps it (issue 32): links, read-only
// trees, a user's own layer, refusals whose fix works. Every verdict is
// taken on the host: the tree after the session and the shadow's stderr.

func eachUser(t *testing.T, f func(t *testing.T, root string, u runAs)) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, u := range []runAs{asRoot, asNobody} {
		t.Run(u.name, func(t *testing.T) { f(t, root, u) })
	}
}

func chownAll(t *testing.T, base string, u runAs) {
	t.Helper()
	filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })
}

// TestLinkedWorkspace: `cd ~/proj-link && claude`, ~/proj-link a link to
// ~/src/my-project and $PWD the shell's logical path. The agent starts in
// it with that $PWD, its writes land in the link's target, and the
// protections apply to the target (its hooks stay read-only).
func TestLinkedWorkspace(t *testing.T) {
	eachUser(t, func(t *testing.T, root string, u runAs) {
		w := newWorld(t, u)
		proj := filepath.Join(w.home, "src/my-project")
		must(t, os.MkdirAll(filepath.Join(proj, ".git/hooks"), 0o755))
		must(t, os.WriteFile(filepath.Join(proj, ".git/hooks/pre-commit"), []byte("#!/bin/sh\n"), 0o755))
		must(t, os.WriteFile(filepath.Join(proj, ".git/config"), []byte("[core]\n"), 0o644))
		link := filepath.Join(w.home, "proj-link")
		must(t, os.Symlink(proj, link))
		chownAll(t, w.home, u)
		for _, name := range []string{"claude", "codex"} {
			r := w.sh(t, root, name, link, `echo "PWD=$PWD"; echo "real=$(pwd -P)"; echo made > written-`+name+`
tr '\0' '\n' < /proc/$$/environ | grep ^PWD; ls -la ~ | grep proj
echo evil >> .git/hooks/pre-commit && echo "hook written"; true`, "PWD="+link)
			if r.code != 0 {
				t.Fatalf("%s: exit %d\nstdout %s\nstderr %s", name, r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "PWD="+link+"\n") || !strings.Contains(r.stdout, "real="+proj+"\n") {
				t.Errorf("%s: the agent's directory:\n%s", name, r.stdout)
			}
			if got := readFile(t, filepath.Join(proj, "written-"+name)); got != "made\n" {
				t.Errorf("%s: the write did not land in the link's target: %q", name, got)
			}
			if strings.Contains(r.stdout, "hook written") || readFile(t, filepath.Join(proj, ".git/hooks/pre-commit")) != "#!/bin/sh\n" {
				t.Errorf("%s: the target's hook was writable through the link", name)
			}
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the link on the host changed: %v %v", fi, err)
		}
	})
}

// TestLinkedHome: a home reached through a link (/home/u2 -> /srv/h/u2)
// launches with the defaults (caches = "persist"), and with caches =
// "session".
func TestLinkedHome(t *testing.T) {
	eachUser(t, func(t *testing.T, root string, u runAs) {
		w := newWorld(t, u)
		linked := filepath.Join(w.base, "homelink")
		must(t, os.Symlink(w.home, linked))
		w.home = linked
		r := w.sh(t, root, "claude", w.ws, `echo "HOME=$HOME"; echo ok > from-linked-home; echo cached > ~/.cache/probe && echo cache-ok`)
		if r.code != 0 || !strings.Contains(r.stdout, "cache-ok") {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if readFile(t, filepath.Join(w.ws, "from-linked-home")) != "ok\n" {
			t.Error("the write did not reach the workspace")
		}
	})
}

// TestGitLinkRefusedKeepingIt: a .git that is a link to a directory
// outside the workspace is refused with advice that keeps the repository;
// applied literally, the launch works, host git still sees the repository,
// and the directory is protected as an admin directory is.
func TestGitLinkRefusedKeepingIt(t *testing.T) {
	eachUser(t, func(t *testing.T, root string, u runAs) {
		w := newWorld(t, u)
		ws := filepath.Join(w.base, "linkrepo")
		gitdir := filepath.Join(w.base, "gitdirs/linkrepo.git")
		must(t, os.MkdirAll(ws, 0o755))
		must(t, os.MkdirAll(filepath.Dir(gitdir), 0o755))
		git(t, "", "init", "-q", "--separate-git-dir="+gitdir, ws)
		must(t, os.WriteFile(filepath.Join(ws, "f"), []byte("x\n"), 0o644))
		git(t, ws, "add", "f")
		git(t, ws, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "one")
		// The repository kept as a link, as some tools do.
		must(t, os.Remove(filepath.Join(ws, ".git")))
		must(t, os.Symlink(gitdir, filepath.Join(ws, ".git")))
		exec.Command("git", "-C", ws, "config", "--unset", "core.worktree").Run()
		chownAll(t, w.base, u)
		r := w.sh(t, root, "claude", ws, `echo started`)
		fix := fixOf(r.stderr)
		if r.code != exitCannotRun || fix == "" || strings.Contains(r.stdout, "started") {
			t.Fatalf("exit %d, fix %q\nstderr %s", r.code, fix, r.stderr)
		}
		applyFix(t, fix, u)
		if out := git(t, ws, "log", "--oneline"); !strings.Contains(out, "one") {
			t.Fatalf("the fix lost the repository: %q", out)
		}
		r = w.sh(t, root, "claude", ws, `echo started; echo evil >> .git/hooks/pre-commit && echo "hook written"; touch .git/hooks/post-checkout && echo "hook planted"; git status --short >/dev/null 2>&1; echo done`)
		if r.code != 0 || !strings.Contains(r.stdout, "started") {
			t.Fatalf("after the fix: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "hook written") || strings.Contains(r.stdout, "hook planted") {
			t.Errorf("the admin directory's hooks were writable:\n%s", r.stdout)
		}
		if _, err := os.Stat(filepath.Join(gitdir, "hooks/post-checkout")); err == nil {
			t.Error("a hook was planted in the admin directory")
		}
	})
}

// fixOf is the command of a refusal's "(fix: ...)".
func fixOf(stderr string) string {
	i := strings.LastIndex(stderr, "(fix: ")
	if i < 0 {
		return ""
	}
	f := stderr[i+len("(fix: "):]
	j := strings.LastIndex(f, ")")
	if j < 0 {
		return ""
	}
	return f[:j]
}

// applyFix runs a fix as the user would: a shell command, as that user.
func applyFix(t *testing.T, fix string, u runAs) {
	t.Helper()
	args := []string{"sh", "-c", fix}
	if u.uid != 0 {
		args = append([]string{"setpriv", "--reuid=" + strconv.Itoa(u.uid), "--regid=" + strconv.Itoa(u.gid), "--clear-groups", "--"}, args...)
	}
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("applying the fix %q: %v\n%s", fix, err, out)
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}
