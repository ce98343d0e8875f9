package attack

import (
	"fmt"
	"net"
	"net/http/cgi"
	"net/http/httptest"
	"testing"

	"github.com/cco-dev/cco/internal/jailtest"
)

// gitServer serves the world's bare remote over HTTP on the host's
// loopback (git http-backend), for a fetch through the egress proxy.
func gitServer(t testing.TB, w *world) (url string, port int) {
	t.Helper()
	h := &cgi.Handler{Path: "/usr/lib/git-core/git-http-backend", Env: []string{
		"GIT_PROJECT_ROOT=" + w.Base, "GIT_HTTP_EXPORT_ALL=1",
		// The test serves its user's repository as root.
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	a := srv.Listener.Addr().(*net.TCPAddr)
	return srv.URL + "/remote.git", a.Port
}

// gitWorks are git's everyday commands, each a step the session must pass.
func gitWorks(fetchURL string) []step {
	s := steps(
		"git status", "git status --porcelain",
		"git add and commit", "echo change >> README && git add README && git commit -qm change",
		"git branch", "git branch topic && git checkout -q topic && echo t > t && git add t && git commit -qm t && git checkout -q -",
		"git rebase", `b=$(git rev-parse --abbrev-ref HEAD) && echo m >> README && git commit -qam m && git checkout -q topic && git rebase -q "$b" && git checkout -q "$b"`,
		"git stash", "echo s >> README && git stash -q && git stash pop -q && git checkout -- README",
		"git worktree", "git worktree add -q jail-wt -b jail-wt && git worktree list && git worktree remove jail-wt",
		"git submodule", "git submodule status",
	)
	if fetchURL != "" {
		// NO_PROXY names the loopback: cleared, so that git's request goes
		// through the proxy, as a request to any other host would.
		s = append(s, step{"git fetch through the egress proxy", "NO_PROXY= no_proxy= git fetch -q " + fetchURL + " main && git rev-parse FETCH_HEAD"})
	}
	return s
}

func stepNames(s []step) []string {
	var out []string
	for _, x := range s {
		out = append(out, x.Name)
	}
	return out
}

// TestGitWorks: git's everyday commands work in the jail, and a fetch goes
// through the egress proxy to a git server on the host's loopback.
func TestGitWorks(t *testing.T) {
	runAttacks(t, []attack{
		{
			name: "git works in the workspace, with a fetch through the egress proxy",
			config: func(w *world) string {
				var port int
				w.fetchURL, port = gitServer(t, w)
				return fmt.Sprintf("host_ports = [%d]\n", port)
			},
			probe: func(w *world, _ string) probe { return probe{Steps: gitWorks(w.fetchURL)} },
			check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
				succeeded(t, sess, stepNames(gitWorks(w.fetchURL))...)
			},
		},
	})
}

// TestWorktreesAndSubmodules: git works in the jail, also in a linked
// worktree and in a submodule checkout (where .git is a file), and the
// protections hold there.
func TestWorktreesAndSubmodules(t *testing.T) {
	runAttacks(t, []attack{
		{
			name: "launch in a linked worktree",
			dir:  func(w *world) string { return w.wt },
			probe: func(w *world, _ string) probe {
				return probe{Steps: append(gitWorks(""), steps(
					"plant in the admin dir", w.plantGit("wt-admin", w.ws+"/.git/worktrees/wt/hooks", w.ws+"/.git/worktrees/wt/config.worktree"),
					"plant in the common dir", w.plantGit("wt-common", w.ws+"/.git/hooks", w.ws+"/.git/config"),
					"redirect the .git file", "printf 'gitdir: %s\\n' "+shq(w.ws+"/evil")+" > .git && echo DONE",
					"commondir", "printf '%s\\n' "+shq(w.wt+"/evil")+" > "+w.ws+"/.git/worktrees/wt/commondir && echo DONE")...)}
			},
			verdict: func(w *world) verdict { return verdict{repos: []string{w.wt, w.ws}} },
			check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
				succeeded(t, sess, stepNames(gitWorks(""))...)
				notDone(t, sess, map[string]string{"redirect the .git file": "rewriting the worktree's .git file",
					"commondir": "creating the worktree's commondir"})
			},
		},
		{
			name: "launch in a submodule checkout",
			dir:  func(w *world) string { return w.ws + "/sub" },
			probe: func(w *world, _ string) probe {
				sub := steps("git status", "git status --porcelain",
					"git add and commit", "echo change >> README && git add README && git commit -qm change",
					"git branch", "git checkout -q -b topic && git checkout -q -",
					"git stash", "echo s >> README && git stash -q && git stash pop -q && git checkout -- README")
				return probe{Steps: append(sub, steps(
					"plant in the module dir", w.plantGit("sub-admin", w.ws+"/.git/modules/sub/hooks", w.ws+"/.git/modules/sub/config"),
					"redirect the .git file", "printf 'gitdir: ../evil\\n' > .git && echo DONE",
					"plant in the superproject", w.plantGit("sub-super", w.ws+"/.git/hooks", w.ws+"/.git/config"))...)}
			},
			verdict: func(w *world) verdict { return verdict{repos: []string{w.ws + "/sub", w.ws}} },
			check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
				succeeded(t, sess, "git status", "git add and commit", "git branch", "git stash")
				notDone(t, sess, map[string]string{"redirect the .git file": "rewriting the submodule's .git file"})
			},
		},
	})
}
