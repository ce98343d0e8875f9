package attack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
