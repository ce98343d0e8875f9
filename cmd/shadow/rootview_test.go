package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/egress"
)

// Item 5 of the jail's integrity: root's jail reads no root-only file
// (owner root, no read bit for group or others) outside the workspace, its
// own login state and the vendor tree, wherever that file is; the
// workspace and the login state stay root's, read-write.

// rootOnly makes, for one test, a fresh 0600 root file and a 0700 root
// directory (holding a file anyone could read, were the directory open) in
// each of dirs, and returns their paths.
func rootOnly(t *testing.T, dirs ...string) []string {
	t.Helper()
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	var out []string
	for _, d := range dirs {
		f := filepath.Join(d, "cco-rootonly-"+tag+".key")
		if err := os.WriteFile(f, []byte("root-only-secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(d, "cco-rootonly-"+tag+".d")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/inner", []byte("root-only-secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(f); os.RemoveAll(dir) })
		out = append(out, f, dir, dir+"/inner")
	}
	return out
}

// sslPrivate is /etc/ssl/private, made (0700) for the test where the
// host has none.
func sslPrivate(t *testing.T) string {
	t.Helper()
	const d = "/etc/ssl/private"
	if _, err := os.Stat(d); err == nil {
		return d
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(d) })
	return d
}

// gitRepo is a repository made on the host for u, to be the workspace.
func gitRepo(t *testing.T, w *world) string {
	t.Helper()
	repo := filepath.Join(w.base, "repo")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	filepath.Walk(repo, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, w.u.uid, w.u.gid) })
	return repo
}

func owner(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

func TestRootViewReadsNoRootOnlyFile(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	secrets := append(rootOnly(t, "/etc", "/var/lib"), sslPrivate(t))
	// A file anyone may read stays readable: the rule is the owner's bits.
	public := filepath.Join("/etc", "cco-public-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.WriteFile(public, []byte("public"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(public) })
	for _, u := range []runAs{asRoot, asNobody} {
		for _, name := range []string{"claude", "codex"} {
			t.Run(name+"/"+u.name, func(t *testing.T) {
				w := newWorld(t, u)
				repo := gitRepo(t, w)
				r := runCmd(t, w.cmd(root, name, repo, "probe", params(map[string]any{
					"mode": "rootview", "secrets": append(secrets, public, "/etc/passwd"), "git": repo})))
				if r.code != 0 || r.report == nil {
					t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
				}
				rep := r.report
				for i, s := range secrets {
					if got := rep["secret_"+strconv.Itoa(i)]; got != "EACCES" {
						t.Errorf("%s read in the jail: %q, want EACCES", s, got)
					}
				}
				for i, p := range []string{public, "/etc/passwd"} {
					if got := rep["secret_"+strconv.Itoa(len(secrets)+i)]; got != "ok" {
						t.Errorf("%s (readable by anyone) in the jail: %q, want ok", p, got)
					}
				}
				want := strconv.Itoa(u.uid)
				if rep["uid"] != want || rep["gid"] != strconv.Itoa(u.gid) || rep["ws_owner"] != want {
					t.Errorf("inside: uid %s gid %s, workspace owned by %s; want %s, %d, %s", rep["uid"], rep["gid"], rep["ws_owner"], want, u.gid, want)
				}
				// The workspace is read-write, and what the jail made
				// there is the user's on the host.
				host := fmt.Sprintf("%d:%d", u.uid, u.gid)
				if rep["write_ws"] != "ok" || rep["mkdir_ws"] != "ok" {
					t.Fatalf("workspace writes: %q %q", rep["write_ws"], rep["mkdir_ws"])
				}
				for _, p := range []string{repo + "/made-in-jail", repo + "/dir-made-in-jail"} {
					if got := owner(t, p); got != host {
						t.Errorf("%s is owned by %s on the host, want %s", p, got, host)
					}
				}
				// The login state: its own credentials readable, a new
				// file in it the user's.
				login, cred := ".claude", "claude-secret"
				if name == "codex" {
					login, cred = ".codex", "codex-secret"
				}
				if rep["read_login"] != cred || rep["write_login"] != "ok" {
					t.Errorf("login state: read %q write %q", rep["read_login"], rep["write_login"])
				}
				if got := owner(t, filepath.Join(w.home, login, "made-in-jail")); got != host {
					t.Errorf("the login state's new file is owned by %s on the host, want %s", got, host)
				}
				// git in the workspace: its ownership check passes, and the
				// commit is the host's, owned by the user.
				for _, k := range []string{"git_status", "git_add", "git_commit", "git_log"} {
					if rep[k+"_ok"] != "yes" {
						t.Errorf("%s in the jail: %s", k, rep[k])
					}
				}
				out, err := exec.Command("git", "-c", "safe.directory=*", "-C", repo, "log", "--format=%s", "-1").CombinedOutput()
				if err != nil || strings.TrimSpace(string(out)) != "from the jail" {
					t.Errorf("the host's git log: %q %v", out, err)
				}
				filepath.Walk(repo+"/.git/objects", func(p string, fi os.FileInfo, err error) error {
					if err == nil && !fi.IsDir() {
						if got := owner(t, p); got != host {
							t.Errorf("%s is owned by %s on the host, want %s", p, got, host)
						}
					}
					return nil
				})
			})
		}
	}
}

// The egress proxy's socket, in root's own private directory, is reached
// through the view; the request and the audit log are root's.
func TestRootViewEgress(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	up, port := upstream(t)
	withConfig(t, root, fmt.Sprintf("host_ports = [%d]\n", port))
	for _, name := range []string{"claude", "codex"} {
		w := newWorld(t, asRoot)
		r := runCmd(t, w.cmd(root, name, w.ws, "probe", params(map[string]any{"mode": "net", "upstream": up, "abstract": "cco-rootview-none"})))
		if r.code != 0 || r.report == nil {
			t.Fatalf("%s: exit %d\nstdout %s\nstderr %s", name, r.code, r.stdout, r.stderr)
		}
		if r.report["via_proxy"] != "200" || r.report["via_proxy_body"] != "hello from the host upstream" {
			t.Errorf("%s: through the proxy: %q %q reason %q", name, r.report["via_proxy"], r.report["via_proxy_body"], r.report["via_proxy_reason"])
		}
		log := w.home + "/.local/state/cco/egress.log"
		if got := owner(t, log); got != "0:0" {
			t.Errorf("%s: the audit log is owned by %s, want 0:0", name, got)
		}
		// The probe's direct connection to the jail's own port (carried to
		// the host's by host_ports), then its request through the proxy.
		if es, err := egress.ReadAudit(log); err != nil || len(es) != 2 || !es[0].Allowed || !es[1].Allowed {
			t.Errorf("%s: audit %+v %v, want two allowed connections", name, es, err)
		}
	}
}

// Where a tree cannot be idmapped (ramfs has no idmapped mounts), root's
// launch refuses, naming the path and the fix, and leaves the tree as it
// was; a user's launch there needs no view and runs.
func TestRootViewFailsClosed(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, u := range []runAs{asRoot, asNobody} {
		w := newWorld(t, u)
		ws := filepath.Join(w.base, "ramfs")
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("ramfs", ws, "ramfs", 0, "mode=0755"); err != nil {
			t.Fatalf("mounting a ramfs: %v", err)
		}
		t.Cleanup(func() { syscall.Unmount(ws, syscall.MNT_DETACH) })
		os.Chown(ws, u.uid, u.gid)
		r := runCmd(t, w.cmd(root, "claude", ws, "probe", `{"mode":"exit"}`))
		ents, _ := os.ReadDir(ws)
		if u.uid != 0 {
			if r.code != 0 {
				t.Errorf("as %s: exit %d, want 0\n%s", u.name, r.code, r.stderr)
			}
			continue
		}
		if r.code != exitCannotRun || !strings.Contains(r.stderr, "root's view of "+ws) ||
			!strings.Contains(r.stderr, "cannot be idmapped") || !strings.Contains(r.stderr, "fix:") {
			t.Errorf("as root: exit %d, want %d with the path and the fix\n%s", r.code, exitCannotRun, r.stderr)
		}
		if len(ents) != 0 {
			t.Errorf("the refused launch left %d entries in %s", len(ents), ws)
		}
	}
}

// A directory root's jail cannot enter above the workspace is named, with
// the fix, before anything starts.
func TestRootViewRefusesAClosedParent(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	w := newWorld(t, asRoot)
	closed := filepath.Join(w.base, "closed")
	ws := filepath.Join(closed, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(closed, 0o700)
	r := runCmd(t, w.cmd(root, "claude", ws, "probe", `{"mode":"exit"}`))
	if r.code != exitCannotRun || !strings.Contains(r.stderr, "cannot enter "+closed) || !strings.Contains(r.stderr, "fix: chmod o+x "+closed) {
		t.Errorf("exit %d, want %d naming %s and the fix\n%s", r.code, exitCannotRun, closed, r.stderr)
	}
}

// A nested launch in root's jail runs in that same jail, with sandbox.toml
// there (root's file shows as the overflow uid's in the view).
func TestRootViewNested(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	withConfig(t, root, "egress = \"off\"\n")
	w := newWorld(t, asRoot)
	r := runCmd(t, w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "nested", "root": root, "tag": "codex"})))
	if r.code != 0 || r.report == nil || r.report["nested_err"] != "" {
		t.Fatalf("exit %d %v\n%s", r.code, r.report, r.stderr)
	}
	if !strings.Contains(r.report["nested"], `"mntns":"`+r.report["mntns"]+`"`) {
		t.Errorf("the nested launch ran elsewhere: %s, the jail is %s", r.report["nested"], r.report["mntns"])
	}
}
