package attack

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/jailtest"
)

// verdict says how the host judges one session.
type verdict struct {
	// repos are the directories the host's git works in; nil: the
	// workspace.
	repos []string
	// allowPlanted are host paths where planted content is expected (a
	// repository the session made, which the shadow warns about).
	allowPlanted []string
	// secondDir is where the second launch starts; "": where the session did.
	secondDir string
	// secondLoot are more files the second launch tries to read (a
	// planted link's path).
	secondLoot []string
	// links are symlinks (path: target) the second launch must meet: made
	// on the host, as a checkout of a hostile repository would, where the
	// session could not plant them.
	links map[string]string
	// noGit leaves the host's git out (a FIFO planted where git reads
	// would hang git itself, which is git's business, not the jail's).
	noGit bool
}

// judge takes the verdict on the host after a session: the host's git and
// shell and a second launch run, then nothing planted may have run and no
// secret may have been printed or copied into the workspace.
func (w *world) judge(t *testing.T, r *jailtest.Root, name, dir string, sess jailtest.Result, v verdict) {
	t.Helper()
	outputs := map[string]string{"the session's stdout": sess.Stdout, "the session's stderr": sess.Stderr}
	if sess.TimedOut {
		t.Errorf("the session did not end (killed after its timeout): a planted file held the shadow\nstderr %s", sess.Stderr)
	}
	seen := map[string]bool{}
	ran := func(who string) {
		t.Helper()
		for _, s := range w.sentinels() {
			if !seen[s] {
				seen[s] = true
				t.Errorf("LEAK: planted code %q ran on the host, run by %s", s, who)
			}
		}
	}
	ran("the shadow during or after the session")
	w.plantedState(t, v.allowPlanted)

	repos := v.repos
	if repos == nil {
		repos = []string{w.ws}
	}
	if !v.noGit {
		for i, repo := range repos {
			rel, _ := filepath.Rel(w.Base, repo)
			for _, args := range [][]string{
				// Between them they run the config keys that run
				// programs (fsmonitor, diff.external) and the hooks of
				// a commit, a checkout, a ref update and a push.
				{"status", "--porcelain"}, {"diff"},
				{"add", "-A"}, {"commit", "-q", "--allow-empty", "-m", "verdict"},
				{"checkout", "-q", "-b", "verdict"},
				{"push", "-q", w.Base + "/remote.git", fmt.Sprintf("HEAD:refs/heads/verdict-%d", i)},
			} {
				c := w.Host(repo, "git", args...)
				c.Env = append(c.Env, "GIT_TERMINAL_PROMPT=0")
				res := jailtest.Run(t, c, 20*time.Second)
				who := fmt.Sprintf("the host's `git %s` in %s", strings.Join(args, " "), rel)
				if res.TimedOut {
					t.Errorf("%s hung", who)
				}
				outputs[who] = res.Stdout + res.Stderr
				ran(who)
			}
		}
		// An interactive shell whose prompt runs git, as __git_ps1 does,
		// reading the user's own ~/.bashrc.
		sh := w.Host(repos[0], "bash", "-i")
		sh.Env = append(sh.Env, "PROMPT_COMMAND=git status --porcelain >/dev/null 2>&1; git rev-parse --abbrev-ref HEAD >/dev/null 2>&1")
		sh.Stdin = strings.NewReader("cd " + repos[0] + "\ngit log -1 --oneline\nexit\n")
		res := jailtest.Run(t, sh, 20*time.Second)
		if res.TimedOut {
			t.Error("the host's interactive shell hung")
		}
		outputs["the host's interactive shell"] = res.Stdout + res.Stderr
		ran("the host's interactive shell (bash -i, a prompt running git)")
	}

	// A second launch, of the same agent, where the session ran: it must
	// refuse cleanly or run without exposing what a planted link names.
	sd := v.secondDir
	if sd == "" {
		sd = dir
	}
	for p, target := range v.links {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.RemoveAll(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		os.Lchown(filepath.Dir(p), w.U.UID, w.U.GID)
		os.Lchown(p, w.U.UID, w.U.GID)
		t.Logf("the session could not plant %s: made on the host, as a checkout would", p)
	}
	second := w.launch(t, r, name, sd, probe{Loot: v.secondLoot})
	outputs["the second launch's stdout"], outputs["the second launch's stderr"] = second.Stdout, second.Stderr
	t.Logf("second launch: exit %d\nstderr %s", second.Code, second.Stderr)
	switch {
	case second.TimedOut:
		t.Errorf("the second launch hung\nstderr %s", second.Stderr)
	case second.Code == 126:
		if !refusal.MatchString(second.Stderr) {
			t.Errorf("the second launch refused (126) without one line naming the path and rm as the fix:\n%s", second.Stderr)
		}
	case second.Code != 0:
		t.Errorf("the second launch exited %d\nstderr %s", second.Code, second.Stderr)
	}
	ran("the second launch")

	for who, out := range outputs {
		for _, s := range w.secrets {
			if strings.Contains(out, s.value) {
				t.Errorf("LEAK: the secret %s (%s) was printed by %s", s.name, s.path, who)
			}
		}
	}
	w.secretsCopied(t)
}

// refusal is a launch's refusal of a planted name: one line that names an
// absolute path and says to rm it.
var refusal = regexp.MustCompile(`(?m)^cco: .*/.*\brm [^ \n]*/`)

// commandBearing are the host files through which git, the agents or the
// shell take a configuration or a program, relative to the world's base.
var commandBearing = []string{
	"ws/.git", "ws/.git/config", "ws/.git/config.worktree", "ws/.git/commondir", "ws/.git/hooks/*", "ws/.git/info/*",
	"ws/.git/modules/*/config", "ws/.git/modules/*/config.worktree", "ws/.git/modules/*/commondir",
	"ws/.git/modules/*/hooks/*", "ws/.git/modules/*/info/*",
	"ws/.git/worktrees/*/config.worktree", "ws/.git/worktrees/*/commondir", "ws/.git/worktrees/*/gitdir",
	"ws/*/.git", "ws/*/.git/config", "ws/*/.git/config.worktree", "ws/*/.git/commondir", "ws/*/.git/hooks/*", "ws/*/.git/info/*",
	"ws/hooked/.githooks/*", "ws/.claude/*", "ws/.codex/*", "wt/.git", "wt/.claude/*", "wt/.codex/*",
	"home/.claude/settings.json", "home/.codex/config.toml", "home/.gitconfig", "home/.config/git/config",
	"home/.bashrc", "home/.profile", "home/.config/gh/config.yml", "home/.config/glab-cli/config.yml",
}

// agentBearing are the agents' command-bearing host files from the
// profiles: every WorkspaceReadOnly entry (a directory's files, and a
// renamed-aside copy's) and every HomeReadOnly entry.
func agentBearing() []string {
	var out []string
	for _, p := range agent.All() {
		for _, rel := range p.WorkspaceReadOnly {
			if d, ok := strings.CutSuffix(rel, "/"); ok {
				out = append(out, "ws/"+d+"/*", "ws/"+d+"/*/*", "ws/"+d+"-aside/*")
				continue
			}
			out = append(out, "ws/"+rel)
		}
		for _, rel := range p.HomeReadOnly {
			if d, ok := strings.CutSuffix(rel, "/"); ok {
				out = append(out, "home/"+d+"/*")
				continue
			}
			out = append(out, "home/"+rel)
		}
	}
	return out
}

// plantedState fails for every command-bearing host file that holds what
// the probe planted (every payload names the sentinel directory,
// "cco-planted").
func (w *world) plantedState(t *testing.T, allow []string) {
	t.Helper()
	for _, g := range append(commandBearing, agentBearing()...) {
		ms, _ := filepath.Glob(filepath.Join(w.Base, g))
		for _, m := range ms {
			fi, err := os.Lstat(m)
			if err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
				continue
			}
			b, _ := os.ReadFile(m)
			if strings.Contains(string(b), "cco-planted") && !allowed(m, allow) {
				t.Errorf("LEAK: %s on the host holds code the session planted:\n%s", m, b)
			}
		}
	}
}

func allowed(p string, allow []string) bool {
	for _, a := range allow {
		if p == a || strings.HasPrefix(p, a+"/") {
			return true
		}
	}
	return false
}

// secretsCopied fails for every secret found in a workspace file.
func (w *world) secretsCopied(t *testing.T) {
	t.Helper()
	for _, top := range []string{w.ws, w.wt} {
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && d.Name() == "objects" {
				return fs.SkipDir
			}
			if !d.Type().IsRegular() {
				return nil
			}
			if fi, err := d.Info(); err != nil || fi.Size() > 1<<20 {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, s := range w.secrets {
				if strings.Contains(string(b), s.value) {
					t.Errorf("LEAK: the secret %s (%s) was copied into the workspace at %s", s.name, s.path, p)
				}
			}
			return nil
		})
	}
}
