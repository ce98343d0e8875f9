package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	i, n := strings.LastIndex(stderr, "(fix: "), len("(fix: ")
	if j := strings.LastIndex(stderr, "(fix, on the host: "); j > i {
		i, n = j, len("(fix, on the host: ")
	}
	if i < 0 {
		return ""
	}
	f := stderr[i+n:]
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

// listTree is every path below dir with its size and mode, for a
// before-and-after comparison on the host.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			b.WriteString(p + " " + fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + "\n")
		}
		return nil
	})
	return b.String()
}

// inReadOnlyBind wraps c so that it runs in a mount namespace of its own
// where dir is bound read-only onto itself (as root; then as c's user).
func inReadOnlyBind(c *exec.Cmd, dir string, u runAs) {
	setup := `mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"`
	args := []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", setup, "sh", dir}
	if u.uid != 0 {
		args = append(args, "setpriv", "--reuid="+strconv.Itoa(u.uid), "--regid="+strconv.Itoa(u.gid), "--clear-groups", "--")
	}
	args = append(args, c.Args...)
	args[len(args)-len(c.Args)] = c.Path
	c.Path, c.Args = "/usr/bin/unshare", args
	c.SysProcAttr = nil
}

// TestReadOnlyWorkspaceMount: a repository on a read-only mount (a bind
// made read-only in a mount namespace of the test's) starts the agent with
// the workspace read-only, one line saying so; nothing is created in it,
// and the agent's write is refused.
func TestReadOnlyWorkspaceMount(t *testing.T) {
	eachUser(t, func(t *testing.T, root string, u runAs) {
		w := newWorld(t, u)
		before := listTree(t, w.ws)
		for _, name := range []string{"claude", "codex"} {
			c := w.cmd(root, name, w.ws, "probe", params(map[string]any{"mode": "sh", "script": `cat .git/config >/dev/null && echo read-ok
echo x > new-file && echo "wrote new-file"; mkdir .claude/x && echo "made .claude/x"; true`}))
			inReadOnlyBind(c, w.ws, u)
			r := runCmd(t, c)
			if r.code != 0 || !strings.Contains(r.stdout, "read-ok") {
				t.Fatalf("%s: exit %d\nstdout %s\nstderr %s", name, r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, "wrote") || strings.Contains(r.stdout, "made") {
				t.Errorf("%s: the agent wrote the read-only workspace:\n%s", name, r.stdout)
			}
			if n := strings.Count(r.stderr, "is on a read-only mount"); n != 1 || !strings.Contains(r.stderr, w.ws) || strings.Contains(r.stderr, "WARNING") {
				t.Errorf("%s: the line saying so (%d times):\n%s", name, n, r.stderr)
			}
		}
		if after := listTree(t, w.ws); after != before {
			t.Errorf("the workspace changed on the host:\nbefore\n%s\nafter\n%s", before, after)
		}
	})
}

// TestCodexReadOnlySandbox: `codex -s read-only -a untrusted` (and
// --sandbox read-only) runs with the workspace read-only in the jail, its
// approvals as given and no bypass; the agent's write is refused and the
// host's tree is unchanged.
func TestCodexReadOnlySandbox(t *testing.T) {
	eachUser(t, func(t *testing.T, root string, u runAs) {
		w := newWorld(t, u)
		before := listTree(t, w.ws)
		script := params(map[string]any{"mode": "sh", "script": `echo x > review-notes && echo "wrote notes"; echo y >> .git/config && echo "wrote config"; true`})
		for _, flags := range [][]string{{"-s", "read-only", "-a", "untrusted"}, {"--sandbox", "read-only"}, {"--sandbox=read-only", "-a", "on-request"}} {
			r := runCmd(t, w.cmd(root, "codex", w.ws, append(flags, "probe", script)...))
			if r.code != 0 {
				t.Fatalf("%v: exit %d\nstdout %s\nstderr %s", flags, r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, "wrote") {
				t.Errorf("%v: the session wrote the workspace:\n%s", flags, r.stdout)
			}
			if !strings.Contains(r.stderr, "read-only sandbox mode") || strings.Contains(r.stderr, "WARNING") {
				t.Errorf("%v: no line says the workspace is read-only:\n%s", flags, r.stderr)
			}
		}
		// The argv codex got: approvals kept, its own sandbox off, no bypass.
		r := runCmd(t, w.cmd(root, "codex", w.ws, "-s", "read-only", "-a", "untrusted", "probe", params(map[string]any{"mode": "argv"})))
		argv := strings.Split(r.report["argv"], "\x1f")
		if r.code != 0 || len(argv) < 5 || !slices.Equal(argv[1:5], []string{"--sandbox", "danger-full-access", "-a", "untrusted"}) || slices.Contains(argv, "--dangerously-bypass-approvals-and-sandbox") {
			t.Errorf("codex's argv: %d %q\n%s", r.code, argv, r.stderr)
		}
		if after := listTree(t, w.ws); after != before {
			t.Errorf("the workspace changed on the host:\nbefore\n%s\nafter\n%s", before, after)
		}
		// Without the read-only mode the same write lands (the agent can work).
		r = runCmd(t, w.cmd(root, "codex", w.ws, "-s", "workspace-write", "probe", script))
		if r.code != 0 || !strings.Contains(r.stdout, "wrote notes") || readFile(t, filepath.Join(w.ws, "review-notes")) != "x\n" {
			t.Errorf("workspace-write: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
	})
}

// writeRootConfig puts text at the shared root's sandbox.toml until the
// test ends.
func writeRootConfig(t *testing.T, root, text string) {
	t.Helper()
	cfg := filepath.Join(root, "etc/cco/sandbox.toml")
	must(t, os.WriteFile(cfg, []byte(text), 0o644))
	t.Cleanup(func() { os.Remove(cfg) })
}

// TestUserLayerInJail: a user's ~/.config/cco/sandbox.toml narrows that
// user's jail (a variable root passes is not passed, a file is hidden);
// one that adds what root did not allow refuses the launch naming the
// file, the key and the entry, and the fix (the entry removed) launches;
// one writable by others is ignored with one line; a session cannot write
// it; a workspace that holds it is refused.
func TestUserLayerInJail(t *testing.T) {
	eachUser(t, func(t *testing.T, root string, u runAs) {
		w := newWorld(t, u)
		writeRootConfig(t, root, "pass_env = [\"SENTINEL_VAR\"]\n")
		secret := filepath.Join(w.ws, "secret.txt")
		must(t, os.WriteFile(secret, []byte("s3cret"), 0o644))
		layer := filepath.Join(w.home, ".config/cco/sandbox.toml")
		must(t, os.MkdirAll(filepath.Dir(layer), 0o755))
		chownAll(t, w.home, u)
		setLayer := func(text string, mode os.FileMode) {
			t.Helper()
			must(t, os.WriteFile(layer, []byte(text), mode))
			must(t, os.Chmod(layer, mode))
			must(t, os.Lchown(layer, u.uid, u.gid))
		}
		script := `echo "SV=$SENTINEL_VAR"; cat secret.txt 2>/dev/null && echo " secret-read"
mkdir -p ~/.config/cco 2>/dev/null; echo 'pass_env = ["SENTINEL_VAR", "X"]' > ~/.config/cco/sandbox.toml 2>/dev/null && echo "layer written"; true`

		// Root's value alone: the variable passes.
		os.Remove(layer)
		r := w.sh(t, root, "claude", w.ws, script)
		if r.code != 0 || !strings.Contains(r.stdout, "SV=leak") {
			t.Fatalf("root's pass_env: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		// Narrowing: applied.
		narrow := "pass_env = []\nhide = [\"" + secret + "\"]\n"
		setLayer(narrow, 0o644)
		r = w.sh(t, root, "claude", w.ws, script)
		if r.code != 0 || !strings.Contains(r.stdout, "SV=\n") || strings.Contains(r.stdout, "secret-read") {
			t.Errorf("narrowing not applied: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "layer written") || readFile(t, layer) != narrow {
			t.Errorf("the session wrote the user layer: %q", readFile(t, layer))
		}
		// The network off for this user alone.
		setLayer("egress = \"off\"\n", 0o644)
		r = w.sh(t, root, "claude", w.ws, script)
		if r.code != 0 || !strings.Contains(r.stderr, "EGRESS IS OFF") || !strings.Contains(r.stderr, `egress = "off" comes from your `+layer) {
			t.Errorf("egress off by the user: exit %d\nstderr %s", r.code, r.stderr)
		}
		// Widening: refused, naming the file, the key and the entry.
		setLayer("pass_env = [\"SENTINEL_VAR\", \"OTHER_VAR\"]\n", 0o644)
		r = w.sh(t, root, "claude", w.ws, script, "OTHER_VAR=x")
		if r.code != exitCannotRun || !strings.Contains(r.stderr, layer) || !strings.Contains(r.stderr, `pass_env entry "OTHER_VAR"`) || !strings.Contains(r.stderr, "fix: remove \"OTHER_VAR\" from pass_env in "+layer) {
			t.Errorf("widening: exit %d\nstderr %s", r.code, r.stderr)
		}
		// The fix, applied: the entry removed.
		setLayer("pass_env = [\"SENTINEL_VAR\"]\n", 0o644)
		if r = w.sh(t, root, "claude", w.ws, script); r.code != 0 || !strings.Contains(r.stdout, "SV=leak") {
			t.Errorf("after the fix: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		// Root lets users add to pass_env: the addition is applied.
		writeRootConfig(t, root, "pass_env = [\"SENTINEL_VAR\"]\nuser_may_add = [\"pass_env\"]\n")
		setLayer("pass_env = [\"OTHER_VAR\"]\n", 0o644)
		if r = w.sh(t, root, "claude", w.ws, `echo "OV=$OTHER_VAR SV=$SENTINEL_VAR"`, "OTHER_VAR=mine"); r.code != 0 || !strings.Contains(r.stdout, "OV=mine SV=\n") {
			t.Errorf("an allowed addition: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		writeRootConfig(t, root, "pass_env = [\"SENTINEL_VAR\"]\n")
		// Writable by others: ignored, with one line; root's values apply.
		setLayer("pass_env = []\n", 0o666)
		r = w.sh(t, root, "claude", w.ws, script)
		if r.code != 0 || strings.Count(r.stderr, "ignoring your "+layer) != 1 || !strings.Contains(r.stdout, "SV=leak") {
			t.Errorf("a layer writable by others: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		// Its fix, applied: the layer is read again.
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.Contains(l, "ignoring your") {
				applyFix(t, fixOf(l), u)
			}
		}
		if r = w.sh(t, root, "claude", w.ws, script); r.code != 0 || strings.Contains(r.stderr, "ignoring") || !strings.Contains(r.stdout, "SV=\n") {
			t.Errorf("after the fix: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		// A layer in the workspace is never read: its widening does not refuse, its narrowing does not apply.
		os.Remove(layer)
		wsLayer := filepath.Join(w.ws, ".config/cco/sandbox.toml")
		must(t, os.MkdirAll(filepath.Dir(wsLayer), 0o755))
		must(t, os.WriteFile(wsLayer, []byte("pass_env = []\negress_alow = 1\n"), 0o644))
		chownAll(t, filepath.Join(w.ws, ".config"), u)
		if r = w.sh(t, root, "claude", w.ws, script); r.code != 0 || !strings.Contains(r.stdout, "SV=leak") {
			t.Errorf("a layer in the workspace was read: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		// A workspace that holds the layer is refused.
		r = w.sh(t, root, "claude", filepath.Dir(layer), "echo started")
		if r.code != exitCannotRun || strings.Contains(r.stdout, "started") || !strings.Contains(r.stderr, "protected tree "+filepath.Dir(layer)+" ") {
			t.Errorf("a workspace holding the layer: exit %d\nstderr %s", r.code, r.stderr)
		}
	})
}

// applyEditFix applies a fix that edits a TOML file: `remove "E" from KEY
// in FILE` (E may be unquoted) or `rename A to B in FILE`, as a user
// would, on the file's text.
func applyEditFix(t *testing.T, fix string) {
	t.Helper()
	fix, _, _ = strings.Cut(fix, ", or ")
	var file string
	var edit func(string) string
	if rest, ok := strings.CutPrefix(fix, "remove "); ok {
		i := strings.LastIndex(rest, " in ")
		j := strings.LastIndex(rest[:i], " from ")
		entry, key := strings.Trim(rest[:j], `"`), rest[j+len(" from "):i]
		file = rest[i+len(" in "):]
		edit = func(s string) string {
			var out []string
			for _, l := range strings.Split(s, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), key+" ") || strings.HasPrefix(strings.TrimSpace(l), key+"=") {
					for _, form := range []string{`"` + entry + `", `, `, "` + entry + `"`, `"` + entry + `"`} {
						l = strings.Replace(l, form, "", 1)
					}
				}
				out = append(out, l)
			}
			return strings.Join(out, "\n")
		}
	} else if rest, ok := strings.CutPrefix(fix, "rename "); ok {
		i := strings.LastIndex(rest, " in ")
		a, b, _ := strings.Cut(rest[:i], " to ")
		file = rest[i+len(" in "):]
		edit = func(s string) string { return strings.Replace(s, a+" ", b+" ", 1) }
	} else {
		t.Fatalf("not an edit fix: %q", fix)
	}
	fi, err := os.Stat(file)
	must(t, err)
	must(t, os.WriteFile(file, []byte(edit(readFile(t, file))), fi.Mode()))
}

// TestRefusalFixesWork: each refusal's fix, applied literally, makes the
// next launch start (or, for a fix that says where to work, the launch
// there). The verdict is the shadow's exit and stderr on the host.
func TestRefusalFixesWork(t *testing.T) {
	eachUser(t, func(t *testing.T, root string, u runAs) {
		w := newWorld(t, u)
		refused := func(t *testing.T, dir string) string {
			t.Helper()
			r := w.sh(t, root, "claude", dir, "echo started")
			fix := fixOf(r.stderr)
			if r.code != exitCannotRun || strings.Contains(r.stdout, "started") || fix == "" {
				t.Fatalf("in %s: exit %d, fix %q\nstderr %s", dir, r.code, fix, r.stderr)
			}
			return fix
		}
		starts := func(t *testing.T, dir string) {
			t.Helper()
			if r := w.sh(t, root, "claude", dir, "echo started"); r.code != 0 || !strings.Contains(r.stdout, "started") {
				t.Fatalf("after the fix, in %s: exit %d\nstdout %s\nstderr %s", dir, r.code, r.stdout, r.stderr)
			}
		}
		t.Run("a project below /tmp", func(t *testing.T) {
			scratch, err := os.MkdirTemp("/tmp", "scratch-")
			must(t, err)
			t.Cleanup(func() { os.RemoveAll(scratch) })
			must(t, os.WriteFile(filepath.Join(scratch, "main.go"), []byte("package main\n"), 0o644))
			chownAll(t, scratch, u)
			fix := refused(t, scratch)
			if strings.Contains(fix, "workspace_root") {
				t.Errorf("the fix names workspace_root, which cannot help: %q", fix)
			}
			applyFix(t, fix, u)
			_, dest, ok := strings.Cut(fix, "&& cd ")
			if !ok {
				t.Fatalf("the fix names no directory to work in: %q", fix)
			}
			t.Cleanup(func() { os.RemoveAll(dest) })
			starts(t, dest)
			if readFile(t, filepath.Join(dest, "main.go")) != "package main\n" {
				t.Error("the project was not copied")
			}
		})
		t.Run("the top of a shared scratch tree", func(t *testing.T) {
			fix := refused(t, "/var/tmp")
			if !strings.HasPrefix(fix, "cd into a project directory") {
				t.Fatalf("fix %q", fix)
			}
			starts(t, w.ws) // a project directory
		})
		t.Run("a tree holding a protected one", func(t *testing.T) {
			local := filepath.Join(w.home, ".local")
			must(t, os.MkdirAll(filepath.Join(local, "state/cco"), 0o700))
			chownAll(t, local, u)
			fix := refused(t, local)
			if !strings.Contains(fix, "cd into a project directory below "+local) {
				t.Fatalf("fix %q", fix)
			}
			proj := filepath.Join(local, "myproject")
			must(t, os.MkdirAll(proj, 0o755))
			chownAll(t, proj, u)
			starts(t, proj)
		})
		t.Run("a protected name that is a link", func(t *testing.T) {
			must(t, os.RemoveAll(filepath.Join(w.ws2, ".claude")))
			must(t, os.Symlink(w.outside, filepath.Join(w.ws2, ".claude")))
			chownAll(t, w.ws2, u)
			applyFix(t, refused(t, w.ws2), u)
			starts(t, w.ws2)
		})
		t.Run("an unknown sandbox.toml key", func(t *testing.T) {
			writeRootConfig(t, root, "egress_alow = [\"api.example.com\"]\n")
			applyEditFix(t, refused(t, w.ws))
			starts(t, w.ws)
		})
		t.Run("an allow_write entry in a protected tree", func(t *testing.T) {
			writeRootConfig(t, root, "allow_write = [\"/etc/cco\"]\n")
			applyEditFix(t, refused(t, w.ws))
			starts(t, w.ws)
		})
		t.Run("a hide entry holding the workspace", func(t *testing.T) {
			writeRootConfig(t, root, "hide = [\""+w.base+"\"]\n")
			applyEditFix(t, refused(t, w.ws))
			starts(t, w.ws)
		})
		t.Run("sandbox.toml writable by others", func(t *testing.T) {
			writeRootConfig(t, root, "pass_env = []\n")
			must(t, os.Chmod(filepath.Join(root, "etc/cco/sandbox.toml"), 0o666))
			fix := refused(t, w.ws)
			// The administrator applies it, as root.
			applyFix(t, strings.ReplaceAll(fix, "sudo ", ""), asRoot)
			starts(t, w.ws)
		})
		t.Run("the current directory outside workspace_root", func(t *testing.T) {
			writeRootConfig(t, root, "workspace_root = \""+w.ws2+"\"\n")
			fix := refused(t, w.ws)
			dir, _, ok := strings.Cut(strings.TrimPrefix(fix, "cd "), ", or ")
			if !strings.HasPrefix(fix, "cd ") || !ok {
				t.Fatalf("fix %q", fix)
			}
			starts(t, dir)
		})
		t.Run("a workspace_root that does not exist", func(t *testing.T) {
			writeRootConfig(t, root, "workspace_root = \"/nonexistent/cco-ws\"\n")
			fix := refused(t, w.ws)
			file, ok := strings.CutPrefix(fix, "correct workspace_root in ")
			if !ok {
				t.Fatalf("fix %q", fix)
			}
			must(t, os.WriteFile(file, []byte("workspace_root = \""+w.ws+"\"\n"), 0o644))
			starts(t, w.ws)
		})
		t.Run("an agent's directory that is a file", func(t *testing.T) {
			must(t, os.RemoveAll(filepath.Join(w.ws2, ".claude")))
			must(t, os.WriteFile(filepath.Join(w.ws2, ".claude"), []byte("x"), 0o644))
			chownAll(t, w.ws2, u)
			applyFix(t, refused(t, w.ws2), u)
			starts(t, w.ws2)
		})
		t.Run("a separate git directory", func(t *testing.T) {
			ws := filepath.Join(w.base, "sepgit")
			gitdir := filepath.Join(w.base, "gitdirs/sepgit.git")
			must(t, os.MkdirAll(filepath.Dir(gitdir), 0o755))
			git(t, "", "init", "-q", "--separate-git-dir="+gitdir, ws)
			exec.Command("git", "--git-dir="+gitdir, "config", "--unset", "core.worktree").Run()
			chownAll(t, w.base, u)
			fix := refused(t, ws)
			applyFix(t, "git -c safe.directory='*' "+strings.TrimPrefix(fix, "git "), u)
			starts(t, ws)
			if out := git(t, ws, "status", "--short"); out != "" {
				t.Errorf("host git status after the fix: %q", out)
			}
		})
		t.Run("a toolchain tree that is a link", func(t *testing.T) {
			real := filepath.Join(w.base, "dotfiles/cargo-bin")
			must(t, os.MkdirAll(real, 0o755))
			must(t, os.MkdirAll(filepath.Join(w.home, ".cargo"), 0o755))
			must(t, os.Symlink(real, filepath.Join(w.home, ".cargo/bin")))
			chownAll(t, w.base, u)
			t.Cleanup(func() { os.Remove(filepath.Join(w.home, ".cargo/bin")) })
			fix := refused(t, w.ws)
			add, _, _ := strings.Cut(fix, ", or ")
			rest, ok := strings.CutPrefix(add, "add ")
			i := strings.LastIndex(rest, " to ")
			if !ok || i < 0 || strings.Contains(rest[:i], "~/.cargo/bin\"") {
				t.Fatalf("fix %q", fix)
			}
			file := rest[i+len(" to "):]
			must(t, os.MkdirAll(filepath.Dir(file), 0o755))
			must(t, os.WriteFile(file, []byte(rest[:i]+"\n"), 0o644))
			chownAll(t, filepath.Join(w.home, ".config"), u)
			t.Cleanup(func() { os.Remove(file) })
			starts(t, w.ws)
		})
		t.Run("a user's hide entry holding the workspace", func(t *testing.T) {
			layer := filepath.Join(w.home, ".config/cco/sandbox.toml")
			must(t, os.MkdirAll(filepath.Dir(layer), 0o755))
			must(t, os.WriteFile(layer, []byte("hide = [\""+w.ws+"\"]\n"), 0o644))
			chownAll(t, filepath.Join(w.home, ".config"), u)
			t.Cleanup(func() { os.Remove(layer) })
			fix := refused(t, w.ws)
			if !strings.Contains(fix, layer) {
				t.Fatalf("the fix does not name the user's file: %q", fix)
			}
			applyEditFix(t, fix)
			starts(t, w.ws)
		})
	})
}
