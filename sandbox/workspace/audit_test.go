package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
)

// TestRepoAudit: after a session, each git config, hook or redirect made
// or changed in any repository of the workspace is reported once, with the
// keys git itself lists that run programs; what did not change is not.
func TestRepoAudit(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	ws := base + "/ws"
	testenv.Mkdirs(t, ws)
	testenv.Git(t, ws, "init", "-q")
	testenv.WriteFile(t, ws+"/same/.git/config", "[core]\n\tfsmonitor = /was/there\n")
	testenv.WriteFile(t, ws+"/f/.git", "gitdir: ../.git\n")
	before := snapshotRepos(FindRepos(ws))

	// The session: the top repository's config gains keys in every form
	// git accepts, some through an include; hooks, a nested repository
	// with its own hooksPath, a redirected .git file.
	cfg, err := os.ReadFile(ws + "/.git/config")
	testenv.Must(t, err)
	testenv.WriteFile(t, ws+"/.git/config", string(cfg)+`[core]
	fsmonitor = /evil/fsmonitor
	sshCommand = /evil/ssh
	editor = /evil/editor
[alias]
	x = "!sh -c evil"
	y = log --oneline
	z = \
!continued
[include]
	path = extra
[diff "d.e"] textconv = /evil/textconv
[diff]
	external = /evil/diff
[filter "f"]
	clean = /evil/clean
[merge "m"]
	driver = /evil/merge %A
[credential]
	helper = /evil/cred
[gpg "x509"]
	program = /evil/x509
[pager]
	log = /evil/pager
[user]
	name = Somebody
`)
	testenv.WriteFile(t, ws+"/.git/extra", "[gpg] program = /evil/gpg\n[core] pager = /evil/core-pager\n")
	testenv.WriteFile(t, ws+"/.git/hooks/post-checkout", "#!/bin/sh\n")
	testenv.WriteFile(t, ws+"/.git/hooks/pre-push.sample", "#!/bin/sh\n")
	testenv.WriteFile(t, ws+"/sub/.git/config", "[core]\n\thooksPath = myhooks\n")
	testenv.WriteFile(t, ws+"/sub/myhooks/pre-commit", "#!/bin/sh\n")
	testenv.WriteFile(t, ws+"/plain/.git/config", "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.org/x\n")
	testenv.Must(t, os.WriteFile(ws+"/f/.git", []byte("gitdir: /elsewhere\n"), 0o644))

	got := repoWarnings(before, FindRepos(ws))
	all := strings.Join(got, "\n")
	find := func(prefix string) string {
		t.Helper()
		n, line := 0, ""
		for _, g := range got {
			if strings.HasPrefix(g, prefix+":") {
				n, line = n+1, g
			}
		}
		if n != 1 {
			t.Errorf("%d warnings for %s, want 1:\n%s", n, prefix, all)
		}
		return line
	}
	top := find(ws + "/.git/config")
	for _, k := range []string{`core.fsmonitor="/evil/fsmonitor"`, `core.sshcommand="/evil/ssh"`, `core.editor="/evil/editor"`,
		`alias.x="!sh -c evil"`, `alias.z="!continued"`, `include.path="extra"`, `diff.d.e.textconv="/evil/textconv"`,
		`diff.external="/evil/diff"`, `filter.f.clean="/evil/clean"`, `merge.m.driver="/evil/merge %A"`,
		`credential.helper="/evil/cred"`, `gpg.x509.program="/evil/x509"`, `pager.log="/evil/pager"`,
		`gpg.program="/evil/gpg"`, `core.pager="/evil/core-pager"`} {
		if !strings.Contains(top, k) {
			t.Errorf("the top config's warning lacks %s:\n%s", k, top)
		}
	}
	for _, k := range []string{"alias.y", "user.name", "bare"} {
		if strings.Contains(top, k) {
			t.Errorf("the top config's warning names %s, which runs nothing:\n%s", k, top)
		}
	}
	find(ws + "/.git/hooks/post-checkout")
	find(ws + "/sub/.git/config")
	find(ws + "/sub/myhooks/pre-commit")
	if f := find(ws + "/f/.git"); !strings.Contains(f, "/elsewhere") {
		t.Errorf("the redirect's warning does not say where it points: %s", f)
	}
	for _, not := range []string{"pre-push.sample", ws + "/same/", ws + "/plain/", "/.git/extra"} {
		if strings.Contains(all, not) {
			t.Errorf("warned about %s:\n%s", not, all)
		}
	}
	if again := repoWarnings(snapshotRepos(FindRepos(ws)), FindRepos(ws)); len(again) != 0 {
		t.Errorf("nothing changed, yet: %q", again)
	}
}

// A planted FIFO, device link or FIFO include in a repository made in the
// session neither hangs nor floods the audit: each is one warning, within
// the audit's time bound.
func TestRepoAuditPlantedFiles(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	before := snapshotRepos(FindRepos(ws))
	testenv.Mkdirs(t, ws+"/a/.git", ws+"/b/.git", ws+"/c/.git/hooks")
	testenv.Must(t, syscall.Mkfifo(ws+"/a/.git/config", 0o644))
	testenv.Must(t, os.Symlink("/dev/zero", ws+"/b/.git/config"))
	testenv.Must(t, syscall.Mkfifo(ws+"/c/.git/fifo", 0o644))
	testenv.WriteFile(t, ws+"/c/.git/config", "[include]\n\tpath = fifo\n")
	for i := 0; i < maxRepoWarnings+5; i++ {
		testenv.WriteFile(t, ws+"/c/.git/hooks/h"+strings.Repeat("x", i), "")
	}
	var got []string
	start := time.Now()
	testenv.Within5s(t, "the audit", func() { got = repoWarnings(before, FindRepos(ws)) })
	t.Logf("audit took %v", time.Since(start))
	all := strings.Join(got, "\n")
	for _, want := range []string{ws + "/a/.git/config: made in this session, and not a regular file",
		ws + "/b/.git/config: made a link to /dev/zero", ws + "/c/.git/config: a git config changed in this session that git could not list",
		"more git files were created or changed"} {
		if !strings.Contains(all, want) {
			t.Errorf("lacks %q:\n%s", want, all)
		}
	}
	if len(got) != maxRepoWarnings+1 {
		t.Errorf("%d warnings, want %d", len(got), maxRepoWarnings+1)
	}
}

func TestGitRunKey(t *testing.T) {
	for _, c := range []struct {
		key, value string
		want       bool
	}{
		{"include.path", "x", true}, {"includeif.gitdir:/x/.path", "y", true}, {"core.fsmonitor", "x", true},
		{"core.hookspath", "x", true}, {"pager.diff", "x", true}, {"filter.lfs.required", "true", true},
		{"diff.x.textconv", "x", true}, {"merge.m.driver", "x", true}, {"credential.https://h.helper", "x", true},
		{"gpg.ssh.program", "x", true}, {"alias.a", " !sh", true}, {"alias.a", "log", false},
		{"user.name", "x", false}, {"remote.origin.url", "x", false}, {"core.bare", "false", false},
		{"remote.origin.uploadpack", "x", true}, {"sequence.editor", "x", true}, {"difftool.d.cmd", "x", true},
	} {
		if got := gitRunKey(c.key, c.value); got != c.want {
			t.Errorf("gitRunKey(%q, %q) = %v, want %v", c.key, c.value, got, c.want)
		}
	}
}

// TestHooksPathBounded: a config a session points at a directory of many
// files (core.hooksPath = /usr/bin, or a planted one) gets at most
// maxRepoWarnings lines for its files, and one that counts the rest.
func TestHooksPathBounded(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	ws := base + "/ws"
	testenv.Mkdirs(t, ws)
	testenv.Git(t, ws, "init", "-q")
	before := snapshotRepos(FindRepos(ws))
	for i := range maxRepoWarnings + 8 {
		testenv.WriteFile(t, fmt.Sprintf("%s/hooks-elsewhere/h%02d", base, i), "#!/bin/sh\n")
	}
	testenv.Git(t, ws, "config", "core.hooksPath", base+"/hooks-elsewhere")
	got := repoWarnings(before, FindRepos(ws))
	hooks, more := 0, ""
	for _, w := range got {
		if strings.Contains(w, ": a git hook in core.hooksPath") {
			hooks++
		}
		if strings.HasPrefix(w, "8 more files in ") {
			more = w
		}
	}
	if hooks != maxRepoWarnings || more == "" {
		t.Errorf("%d hook lines and %q, want %d and a count of 8 more:\n%s", hooks, more, maxRepoWarnings, strings.Join(got, "\n"))
	}
}

// TestBareRepoAudit: a directory the session makes into a git directory
// of its own (HEAD, objects, refs: git's discovery takes it for one, as it
// does a bare repository) has its config and hooks reported as a .git's
// are, at the workspace's top and below; a directory that lacks one of the
// three is not a repository, and a HEAD alone is not reported.
func TestBareRepoAudit(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	ws := base + "/ws"
	testenv.Mkdirs(t, ws+"/src", ws+"/half/objects", ws+"/top")
	testenv.WriteFile(t, ws+"/half/HEAD", "ref: refs/heads/main\n")
	testenv.WriteFile(t, ws+"/half/config", "[core]\n\tfsmonitor = /evil/half\n")
	before := snapshotRepos(FindRepos(ws))

	for _, d := range []string{ws + "/src", ws + "/top/a/b"} {
		testenv.Mkdirs(t, d+"/objects", d+"/refs/heads")
		testenv.WriteFile(t, d+"/HEAD", "ref: refs/heads/main\n")
		testenv.WriteFile(t, d+"/config", "[core]\n\tworktree = ..\n\tfsmonitor = touch /tmp/owned\n")
		testenv.WriteFile(t, d+"/hooks/post-checkout", "#!/bin/sh\n")
	}
	got := strings.Join(repoWarnings(before, FindRepos(ws)), "\n")
	for _, d := range []string{ws + "/src", ws + "/top/a/b"} {
		if !strings.Contains(got, d+"/config: ") || !strings.Contains(got, `core.fsmonitor="touch /tmp/owned"`) {
			t.Errorf("no warning for the config of %s:\n%s", d, got)
		}
		if !strings.Contains(got, d+"/hooks/post-checkout") {
			t.Errorf("no warning for the hook of %s:\n%s", d, got)
		}
	}
	if strings.Contains(got, "/half/") {
		t.Errorf("a directory with no refs is no repository, yet:\n%s", got)
	}
}
