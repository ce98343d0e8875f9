package attack

// Issue 32's first line, the way a developer's habits test it: git in the
// jail and on the host sees nothing cco made, whatever git runs it (an
// agent's shell without git's config files), wherever the repository is
// (made in the session, a worktree, a submodule) and however many sessions
// share the workspace. The verdicts are the host's git and tree.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/jailtest"
)

// hostGitAs runs the host's git as the world's user would (no system config).
func hostGitAs(t *testing.T, w *world, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
	c.Dir = dir
	c.Env = []string{"HOME=" + w.Home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
	out, _ := c.CombinedOutput()
	return string(out)
}

// standInsIn are the stand-ins out names.
func standInsIn(out string) []string {
	var got []string
	for _, s := range standIns {
		if mentions(out, s) {
			got = append(got, s)
		}
	}
	return got
}

// Gemini CLI's shell tool runs git with GIT_CONFIG_GLOBAL=/dev/null and
// GIT_CONFIG_SYSTEM=/dev/null, so the ~/.gitconfig that names the jail's
// excludes file is not read: GIT_CONFIG_COUNT names it too, and a commit
// of git add -A there holds no stand-in.
func TestGitWithoutConfigFilesSeesNoStandIn(t *testing.T) {
	r := shared.Get(t)
	for _, u := range users {
		t.Run(u.Name, func(t *testing.T) {
			w := newWorld(t, u)
			p := probe{Steps: steps(
				"plain", "git status --porcelain --untracked-files=all",
				"gemini-shell", "env | grep ^GIT_CONFIG; GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_SYSTEM=/dev/null git status --porcelain --untracked-files=all",
				"commit", "echo mine > s.txt && GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_SYSTEM=/dev/null git add -A && GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_SYSTEM=/dev/null git commit -qm s && git show --name-only --format= HEAD",
			)}
			res := jailtest.Run(t, w.Cmd(r, "gemini", w.ws, "probe", p.arg()), launchTimeout)
			if res.Report == nil {
				t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
			}
			t.Logf("plain:\n%s", res.Report["sh:plain"])
			t.Logf("gemini-shell:\n%s", res.Report["sh:gemini-shell"])
			t.Logf("commit:\n%s", res.Report["sh:commit"])
			if got := standInsIn(res.Report["sh:commit"]); len(got) > 0 {
				t.Errorf("gemini's shell committed cco's stand-ins %v", got)
			}
			st := hostGitAs(t, w, w.ws, "status", "--porcelain", "--untracked-files=all")
			t.Logf("host status after:\n%s", st)
			if got := standInsIn(st); len(got) > 0 {
				t.Errorf("host git status after the session names %v", got)
			}
		})
	}
}

// An agent asked to start a project runs git init in the session: the
// stand-ins of a workspace with no repository are excluded at its top.
func TestGitInitInSessionCommitsNoStandIn(t *testing.T) {
	r := shared.Get(t)
	for _, u := range users {
		for _, name := range []string{"claude", "codex"} {
			t.Run(name+"/"+u.Name, func(t *testing.T) {
				w := newWorld(t, u)
				fresh := filepath.Join(w.Home, "src", "fresh")
				os.MkdirAll(fresh, 0o755)
				os.WriteFile(filepath.Join(fresh, "main.go"), []byte("package main\n"), 0o644)
				w.Own(t)
				p := probe{Steps: steps(
					"init", "git init -q && git add -A && git commit -qm first && git show --name-only --format= HEAD",
				)}
				res := jailtest.Run(t, w.Cmd(r, name, fresh, "probe", p.arg()), launchTimeout)
				if res.Report == nil {
					t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
				}
				t.Logf("in the jail:\n%s", res.Report["sh:init"])
				if got := standInsIn(res.Report["sh:init"]); len(got) > 0 {
					t.Errorf("the session's first commit holds cco's stand-ins %v", got)
				}
				st := hostGitAs(t, w, fresh, "status", "--porcelain")
				t.Logf("host status after:\n%s\nstderr:\n%s", st, res.Stderr)
				if got := standInsIn(st); len(got) > 0 {
					t.Errorf("host git status after the session names %v", got)
				}
			})
		}
	}
}

// listTree lists every path under d (relative).
func listTree(d string) []string {
	var out []string
	filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(d, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// diffLists are the entries of b that a does not hold.
func diffLists(a, b []string) (added []string) {
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			added = append(added, x)
		}
	}
	return
}

// The workspace is a linked worktree (.git a file) or a submodule checkout:
// a commit of git add -A holds nothing of cco's, and nothing is left behind.
func TestGitWorktreeAndSubmoduleWorkspaces(t *testing.T) {
	r := shared.Get(t)
	for _, u := range users {
		for _, where := range []string{"wt", "sub", "nested"} {
			t.Run(where+"/"+u.Name, func(t *testing.T) {
				w := newWorld(t, u)
				dir := w.wt
				if where != "wt" {
					dir = filepath.Join(w.ws, where)
				}
				before := listTree(w.Base)
				hostBefore := hostGitAs(t, w, dir, "status", "--porcelain", "--untracked-files=all")
				p := probe{Steps: steps(
					"commit", "echo mine > s.txt && git add -A && git commit -qm s && git show --name-only --format= HEAD",
					"status", "git status --porcelain --untracked-files=all",
				)}
				res := jailtest.Run(t, w.Cmd(r, "claude", dir, "probe", p.arg()), launchTimeout)
				if res.Report == nil {
					t.Fatalf("exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
				}
				t.Logf("commit:\n%s\nstatus:\n%s\nstderr:\n%s", res.Report["sh:commit"], res.Report["sh:status"], res.Stderr)
				if !strings.HasPrefix(res.Report["sh:commit"], "exit 0") {
					t.Errorf("commit failed: %s", res.Report["sh:commit"])
				}
				if got := standInsIn(res.Report["sh:commit"] + res.Report["sh:status"]); len(got) > 0 {
					t.Errorf("in the jail git sees %v", got)
				}
				after := listTree(w.Base)
				var left []string
				for _, a := range diffLists(before, after) {
					if strings.Contains(a, "/objects/") || strings.HasSuffix(a, "/objects") || strings.Contains(a, "/logs/") || strings.Contains(a, "refs/") || strings.HasSuffix(a, "s.txt") || strings.HasSuffix(a, "ORIG_HEAD") || strings.HasSuffix(a, "COMMIT_EDITMSG") || strings.HasSuffix(a, "/index") {
						continue
					}
					if strings.HasPrefix(a, "home/") {
						continue
					}
					left = append(left, a)
				}
				if len(left) > 0 {
					t.Errorf("left behind after the session: %v", left)
				}
				hostAfter := hostGitAs(t, w, dir, "status", "--porcelain", "--untracked-files=all")
				t.Logf("host before:\n%s\nhost after:\n%s", hostBefore, hostAfter)
				if got := standInsIn(hostAfter); len(got) > 0 {
					t.Errorf("host git after names %v", got)
				}
			})
		}
	}
}

// walkAll lists a tree's paths, .git's inside too (but git's own churn).
func walkAll(dir string) []string {
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		for _, skip := range []string{"/objects", "/logs", "/refs", "index", "COMMIT_EDITMSG", "ORIG_HEAD"} {
			if strings.Contains("/"+rel, skip) {
				return nil
			}
		}
		out = append(out, rel)
		return nil
	})
	sort.Strings(out)
	return out
}

// Two sessions in one workspace, one reached through a link in the home
// and one through the real path, with a nested repository: the second
// one's git add -A commits none of the first one's placeholders, nothing
// of cco's is left, .git's inside included, and no audit line.
func TestTwoSessionsCommitNothingOfEachOther(t *testing.T) {
	r := shared.Get(t)
	for _, u := range users {
		for _, viaLink := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/link=%v", u.Name, viaLink), func(t *testing.T) {
				w := jailtest.NewWorld(t, u)
				ws := filepath.Join(w.Home, "src", "p")
				os.MkdirAll(filepath.Join(ws, "inner"), 0o755)
				os.WriteFile(ws+"/README", []byte("a project\n"), 0o644)
				os.WriteFile(ws+"/inner/README", []byte("inner\n"), 0o644)
				os.WriteFile(w.Home+"/.gitconfig", []byte("[user]\n\tname = T\n\temail = t@example.org\n[init]\n\tdefaultBranch = main\n"), 0o644)
				for _, s := range [][]string{{"inner", "init", "-q"}, {"inner", "add", "."}, {"inner", "commit", "-qm", "i"}, {"", "init", "-q"}, {"", "add", "README"}, {"", "commit", "-qm", "start"}} {
					c := exec.Command("git", s[1:]...)
					c.Dir, c.Env = filepath.Join(ws, s[0]), []string{"HOME=" + w.Home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
					if out, err := c.CombinedOutput(); err != nil {
						t.Fatalf("git %v: %v\n%s", s, err, out)
					}
				}
				link := filepath.Join(w.Home, "p-link")
				os.Symlink(ws, link)
				w.Own(t)
				before := walkAll(ws)
				type sess struct {
					label, agent, dir string
					res               jailtest.Result
					done              chan struct{}
				}
				adir := ws
				if viaLink {
					adir = link
				}
				ss := []*sess{{label: "a", agent: "claude", dir: adir, done: make(chan struct{})}, {label: "b", agent: "codex", dir: ws, done: make(chan struct{})}}
				for _, s := range ss {
					p := probe{Steps: steps("pwd", "pwd; echo $PWD", "write", "echo "+s.label+" > "+s.label+".txt && git status --porcelain -uall"+map[string]string{"a": "", "b": " && git add -A && git commit -qm b && git show --name-only --format= HEAD"}[s.label]),
						Swap: &swapParams{Ready: filepath.Join(ws, "."+s.label+"-ready"), Until: filepath.Join(ws, "."+s.label+"-until")}}
					c := w.Cmd(r, s.agent, s.dir, "probe", p.arg())
					c.Env = append(c.Env, "PWD="+s.dir)
					go func(s *sess) { defer close(s.done); s.res = jailtest.Run(t, c, 90*time.Second) }(s)
					for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
						if _, err := os.Stat(filepath.Join(ws, "."+s.label+"-ready")); err == nil {
							break
						}
					}
					time.Sleep(time.Second)
				}
				for _, s := range ss {
					os.WriteFile(filepath.Join(ws, "."+s.label+"-until"), nil, 0o644)
					<-s.done
					t.Logf("%s: exit %d pwd %q write %q\nstderr %s", s.label, s.res.Code, s.res.Report["sh:pwd"], s.res.Report["sh:write"], s.res.Stderr)
					if s.res.Code != 0 {
						t.Errorf("session %s exit %d", s.label, s.res.Code)
					}
					if strings.Contains(s.res.Stderr, "WARNING") {
						t.Errorf("session %s warns:\n%s", s.label, s.res.Stderr)
					}
					if got := standInsIn(strings.ReplaceAll(s.res.Report["sh:write"], "exit 0: ", "")); len(got) > 0 {
						t.Errorf("session %s (%s): git status in the jail lists %v", s.label, s.agent, got)
					}
				}
				hs := exec.Command("git", "-c", "safe.directory=*", "status", "--porcelain")
				hs.Dir, hs.Env = ws, []string{"HOME=" + w.Home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
				hout, _ := hs.CombinedOutput()
				t.Logf("host git status after both:\n%s", hout)
				if got := standInsIn(string(hout)); len(got) > 0 {
					t.Errorf("host git status after both sessions names %v", got)
				}
				after := walkAll(ws)
				var extra []string
				for _, a := range diffLists(before, after) {
					if !strings.HasPrefix(filepath.Base(a), ".a-") && !strings.HasPrefix(filepath.Base(a), ".b-") && a != "a.txt" && a != "b.txt" {
						extra = append(extra, a)
					}
				}
				if len(extra) > 0 {
					t.Errorf("left after both sessions: %v", extra)
				}
				if gone := diffLists(after, before); len(gone) > 0 {
					t.Errorf("gone after both sessions: %v", gone)
				}
			})
		}
	}
}
