package attack

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/jailtest"
)

// standIns are the names the jail shows read-only in a workspace that
// lacks them (the profiles' WorkspaceReadOnly files), missing in the
// template world.
var standIns = []string{".mcp.json", "opencode.json", "opencode.jsonc", ".github/mcp.json", ".github/lsp.json"}

// TestGitSeesNothingCcoMade: in a repository, git in the jail lists none
// of the stand-ins the jail shows, and git add -A stages none, so that a
// commit made there holds only what is the session's or the user's; the
// user's own global excludes still apply. The verdict is the host's git
// after the session: nothing cco made is deleted, untracked or committed.
func TestGitSeesNothingCcoMade(t *testing.T) {
	r := shared.Get(t)
	for _, u := range users {
		for _, name := range []string{"claude", "codex"} {
			t.Run(name+"/"+u.Name, func(t *testing.T) {
				t.Parallel()
				w := newWorld(t, u)
				for _, p := range standIns {
					if _, err := os.Lstat(filepath.Join(w.ws, p)); err == nil {
						t.Fatalf("the template holds %s", p)
					}
				}
				if err := os.MkdirAll(w.Home+"/.config/git", 0o755); err != nil {
					t.Fatal(err)
				}
				os.WriteFile(w.Home+"/.config/git/ignore", []byte("*.userignored\n"), 0o644)
				w.Own(t)
				p := probe{Steps: steps(
					"status before", "git status --porcelain --untracked-files=all",
					"commit", "echo mine > session.txt && echo x > x.userignored && git add -A && git commit -qm session && git show --name-only --format= HEAD",
					"status after", "git status --porcelain --untracked-files=all --ignored=no",
				)}
				res := jailtest.Run(t, w.Cmd(r, name, w.ws, "probe", p.arg()), launchTimeout)
				if res.Report == nil {
					t.Fatalf("exit %d\nstdout %s\nstderr %s", res.Code, res.Stdout, res.Stderr)
				}
				for _, step := range []string{"sh:status before", "sh:commit", "sh:status after"} {
					out := res.Report[step]
					if !strings.HasPrefix(out, "exit 0") {
						t.Errorf("%s: %s", step, out)
					}
					for _, s := range append(standIns, "x.userignored") {
						if mentions(out, s) {
							t.Errorf("%s in the jail names %s:\n%s", step, s, out)
						}
					}
				}
				if !mentions(res.Report["sh:commit"], "session.txt") {
					t.Errorf("the session's own file is not in its commit:\n%s", res.Report["sh:commit"])
				}
				// The host's git after the session.
				host := func(args ...string) string {
					c := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
					c.Dir = w.ws
					c.Env = []string{"HOME=" + w.Home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
					out, err := c.CombinedOutput()
					if err != nil {
						t.Fatalf("git %v on the host: %v\n%s", args, err, out)
					}
					return string(out)
				}
				status, committed := host("status", "--porcelain", "--untracked-files=all"), host("show", "--name-only", "--format=", "HEAD")
				for _, s := range standIns {
					if mentions(status, s) || mentions(committed, s) {
						t.Errorf("the host's git sees %s after the session:\nstatus\n%s\ncommit\n%s", s, status, committed)
					}
					if _, err := os.Lstat(filepath.Join(w.ws, s)); err == nil {
						t.Errorf("%s outlived the session on the host", s)
					}
				}
				if !mentions(committed, "session.txt") {
					t.Errorf("the host's last commit lacks the session's file:\n%s", committed)
				}
			})
		}
	}
}

// TestHostGitDuringASession: while a session runs in a repository that
// lacks them, the host's git lists as untracked exactly the placeholder
// files docs/explanation/jail.md names (at the workspace's top and in
// .github), nothing in .git and no empty directory; afterwards, nothing.
func TestHostGitDuringASession(t *testing.T) {
	r := shared.Get(t)
	for _, u := range users {
		t.Run(u.Name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, u)
			ready, until := filepath.Join(w.ws, ".wait-ready"), filepath.Join(w.ws, ".wait-until")
			host := func() []string {
				c := exec.Command("git", "-c", "safe.directory=*", "status", "--porcelain", "--untracked-files=all")
				c.Dir = w.ws
				c.Env = []string{"HOME=" + w.Home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
				out, err := c.CombinedOutput()
				if err != nil {
					t.Fatalf("git status on the host: %v\n%s", err, out)
				}
				var got []string
				for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, ".wait-") {
						got = append(got, l)
					}
				}
				return got
			}
			before := host()
			// The rule docs/explanation/jail.md states: a missing protected
			// file of the profiles' whose directory exists (or is .github,
			// made for the session) gets a placeholder; the placeholders in
			// .git and the empty directories git never lists.
			var want []string
			for _, rel := range agent.WorkspaceReadOnly() {
				if strings.HasSuffix(rel, "/") {
					continue
				}
				if _, err := os.Lstat(filepath.Join(w.ws, rel)); err == nil {
					continue
				}
				parent := filepath.Dir(rel)
				if fi, err := os.Lstat(filepath.Join(w.ws, parent)); parent == "." || parent == ".github" || err == nil && fi.IsDir() {
					want = append(want, "?? "+rel)
				}
			}
			slices.Sort(want)
			if !slices.Contains(want, "?? .mcp.json") {
				t.Fatalf("the world holds .mcp.json: %v", want)
			}
			done := make(chan jailtest.Result, 1)
			p := probe{Swap: &swapParams{Ready: ready, Until: until}}
			go func() { done <- jailtest.Run(t, w.Cmd(r, "claude", w.ws, "probe", p.arg()), launchTimeout) }()
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					os.WriteFile(until, nil, 0o644)
					t.Fatalf("the session never started: %+v", <-done)
				}
			}
			during := host()
			os.WriteFile(until, nil, 0o644)
			res := <-done
			if res.Code != 0 {
				t.Fatalf("session: exit %d\nstderr %s", res.Code, res.Stderr)
			}
			var added []string
			for _, l := range during {
				if !slices.Contains(before, l) {
					added = append(added, l)
				}
			}
			slices.Sort(added)
			if !slices.Equal(added, want) {
				t.Errorf("while the session ran, the host's git listed %q beyond what it listed before; the docs say %q", added, want)
			}
			if after := host(); !slices.Equal(after, before) {
				t.Errorf("after the session the host's git lists %q, before %q", after, before)
			}
		})
	}
}

// mentions reports whether git's output names the path p (as a whole
// path, at a line's end).
func mentions(out, p string) bool {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == p || strings.HasSuffix(l, " "+p) {
			return true
		}
	}
	return false
}
