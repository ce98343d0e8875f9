package attack

import (
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/jailtest"
)

// TestProtectedTrees: the trees holding command-bearing state cannot be
// renamed, replaced or redirected, and every file through which git takes
// a configuration or a program is read-only, present at launch or not.
func TestProtectedTrees(t *testing.T) {
	runAttacks(t, []attack{
		{
			name: "rename .git and plant a new one",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"rename", "mv .git .git-aside && cp -a .git-aside .git && echo DONE",
					"plant", w.plantGit("dotgit", ".git/hooks", ".git/config"))}
			},
			check: refuses(map[string]string{"rename": "renaming .git"}),
		},
		{
			name: "rename .git/hooks and plant new hooks",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"rename", "mv .git/hooks .git/hooks-aside && echo DONE",
					"plant", w.plantGit("hooks", ".git/hooks", ""))}
			},
			check: refuses(map[string]string{"rename": "renaming .git/hooks"}),
		},
		{
			name: "rewrite .git/config",
			probe: func(w *world, _ string) probe {
				evil := shq(w.evilConfig("config"))
				return probe{Steps: steps(
					"git config", "git config core.fsmonitor "+shq(w.touch("gitconfig-fsmonitor")+"; false")+" && echo DONE",
					"append", "printf '%s' "+evil+" >> .git/config && echo DONE",
					"replace", "cp .git/config c.new; printf '%s' "+evil+" >> c.new && mv -f c.new .git/config && echo DONE",
					"unlink", "rm -f .git/config && printf '%s' "+evil+" > .git/config && echo DONE")}
			},
			check: refuses(map[string]string{"git config": "git config writing .git/config", "append": "appending to .git/config",
				"replace": "renaming a file over .git/config", "unlink": "removing and recreating .git/config"}),
		},
		{
			name: "rename .claude and plant settings",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"rename", "mv .claude .claude-aside && echo DONE",
					"plant", "mkdir -p .claude; printf '%s' "+shq(w.claudeHooks("claude-settings"))+" > .claude/settings.json && echo DONE; "+
						"printf '%s' "+shq(w.claudeHooks("claude-local"))+" > .claude/settings.local.json && echo DONE")}
			},
			check: refuses(map[string]string{"rename": "renaming .claude", "plant": "writing .claude's settings"}),
		},
		{
			name: "rename .codex and plant config",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"rename", "mv .codex .codex-aside && echo DONE",
					"plant", "mkdir -p .codex; printf '%s' "+shq(w.codexNotify("codex-config"))+" > .codex/config.toml && echo DONE")}
			},
			check: refuses(map[string]string{"rename": "renaming .codex", "plant": "writing .codex/config.toml"}),
		},
		{
			// Every other agent's project config at once, from the
			// profiles: one session per agent and user keeps the suite's
			// time (a class per directory would be a launch each).
			name:       "rename and plant every agent's project config",
			everyAgent: true,
			probe:      func(w *world, _ string) probe { return probe{Steps: w.plantProjectConfig()} },
			check: func(t *testing.T, w *world, agent string, sess jailtest.Result) {
				what := map[string]string{}
				for _, s := range w.plantProjectConfig() {
					what[s.Name] = s.Name
				}
				refuses(what)(t, w, agent, sess)
			},
		},
		{
			name: "create .git/commondir naming a planted common dir",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"evil common dir", "cp -a .git evil-common && "+w.plantGit("commondir", "evil-common/hooks", "evil-common/config"),
					"commondir", "printf '../evil-common\\n' > .git/commondir && echo DONE")}
			},
			check: refuses(map[string]string{"commondir": "creating .git/commondir"}),
		},
		{
			name: "create .git/config.worktree",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"config.worktree", "printf '%s' "+shq(w.evilConfig("config-worktree"))+" > .git/config.worktree && echo DONE",
					"enable", "git config extensions.worktreeConfig true && echo DONE")}
			},
			check: refuses(map[string]string{"config.worktree": "creating .git/config.worktree", "enable": "enabling extensions.worktreeConfig"}),
		},
		{
			name: "create .git/info/attributes",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"attributes", "mkdir -p .git/info; printf '* diff=cco-planted filter=cco-planted\\n' > .git/info/attributes && echo DONE")}
			},
			check: refuses(map[string]string{"attributes": "creating .git/info/attributes"}),
		},
		{
			name: "plant hooks and config in .git/modules/sub",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("plant", w.plantGit("module", ".git/modules/sub/hooks", ".git/modules/sub/config"),
					"rename", "mv .git/modules/sub/hooks .git/modules/sub/hooks-aside && echo DONE")}
			},
			verdict: func(w *world) verdict { return verdict{repos: []string{w.ws + "/sub", w.ws}} },
			check:   refuses(map[string]string{"rename": "renaming .git/modules/sub/hooks"}),
		},
		{
			name: "create .git/worktrees/wt/commondir and config.worktree",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"evil common dir", "cp -a .git evil-common && "+w.plantGit("wt-commondir", "evil-common/hooks", "evil-common/config"),
					"commondir", "printf '%s\\n' "+shq(w.ws+"/evil-common")+" > .git/worktrees/wt/commondir && echo DONE",
					"config.worktree", "printf '%s' "+shq(w.evilConfig("wt-config-worktree"))+" > .git/worktrees/wt/config.worktree && echo DONE")}
			},
			verdict: func(w *world) verdict { return verdict{repos: []string{w.wt}} },
			check:   refuses(map[string]string{"commondir": "creating .git/worktrees/wt/commondir", "config.worktree": "creating .git/worktrees/wt/config.worktree"}),
		},
		{
			name: "write hooks into a core.hooksPath inside the workspace",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("plant", w.plantGit("hookspath", "hooked/.githooks", ""),
					"rename", "mv hooked/.githooks hooked/.githooks-aside && mkdir hooked/.githooks && echo DONE")}
			},
			verdict: func(w *world) verdict { return verdict{repos: []string{w.ws + "/hooked"}} },
			check:   refuses(map[string]string{"rename": "renaming the core.hooksPath directory"}),
		},
		{
			name: "write hooks and config in a nested repository",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("plant", w.plantGit("nested", "nested/.git/hooks", "nested/.git/config"),
					"rename", "mv nested/.git nested/.git-aside && echo DONE")}
			},
			verdict: func(w *world) verdict { return verdict{repos: []string{w.ws + "/nested"}} },
			check:   refuses(map[string]string{"rename": "renaming the nested repository's .git"}),
		},
		{
			name: "a repository made in the session is reported",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("new repository", "mkdir newrepo && cd newrepo && git init -q && "+w.plantGit("newrepo", ".git/hooks", ".git/config"))}
			},
			verdict: func(w *world) verdict { return verdict{allowPlanted: []string{w.ws + "/newrepo"}} },
			check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
				succeeded(t, sess, "new repository")
				for _, s := range []string{w.ws + "/newrepo/.git/config", "core.fsmonitor", "diff.external", "alias.st",
					w.ws + "/newrepo/.git/hooks/post-checkout"} {
					if !strings.Contains(sess.Stderr, s) {
						t.Errorf("the shadow's warnings after the session do not name %s:\n%s", s, sess.Stderr)
					}
				}
			},
		},
		{
			name: "hard-link the user's hook out of its tree and rewrite it",
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"hard link", "ln .git/hooks/pre-commit hooklink && printf '%s\\n' "+shq(w.touch("hardlink"))+" >> hooklink && echo DONE",
					"chmod", "chmod 0777 .git/hooks/pre-commit && echo DONE",
					"truncate", ": > .git/hooks/pre-commit && echo DONE")}
			},
			check: func(t *testing.T, w *world, agent string, sess jailtest.Result) {
				refuses(map[string]string{"hard link": "rewriting the hook through a hard link",
					"chmod": "changing the hook's mode", "truncate": "truncating the hook"})(t, w, agent, sess)
				if b, err := os.ReadFile(w.ws + "/.git/hooks/pre-commit"); err != nil || string(b) != "#!/bin/sh\nexit 0\n" {
					t.Errorf("LEAK: the user's pre-commit hook changed on the host: %q %v", b, err)
				}
			},
		},
		{
			name: "an MCP server added to ~/.claude/.claude.json is reported",
			only: func(a string, _ jailtest.RunAs) bool { return a == "claude" },
			probe: func(w *world, _ string) probe {
				mcp := `{"mcpServers":{"cco-planted-server":{"command":"sh","args":["-c",` + strconv.Quote(w.touch("mcp")) + `]}}}`
				return probe{Steps: steps("mcp", "printf '%s' "+shq(mcp)+" > ~/.claude/.claude.json && echo DONE")}
			},
			check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
				succeeded(t, sess, "mcp")
				if !strings.Contains(sess.Stderr, "WARNING") || !strings.Contains(sess.Stderr, w.touch("mcp")) {
					t.Errorf("the shadow did not warn about the planted MCP server's command:\n%s", sess.Stderr)
				}
			},
		},
		{
			name:       "plant code in the home's dotfiles",
			everyAgent: true,
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"bashrc", "printf '%s\\n' "+shq(w.touch("bashrc"))+" >> ~/.bashrc && echo DONE",
					"profile", "printf '%s\\n' "+shq(w.touch("profile"))+" >> ~/.profile && echo DONE",
					"gitconfig", "printf '%s' "+shq(w.evilConfig("home-gitconfig"))+" >> ~/.gitconfig && echo DONE",
					"xdg git config", "mkdir -p ~/.config/git && printf '%s' "+shq(w.evilConfig("xdg-gitconfig"))+" > ~/.config/git/config && echo DONE")}
			},
			check: refuses(map[string]string{"bashrc": "writing ~/.bashrc", "profile": "writing ~/.profile",
				"gitconfig": "writing ~/.gitconfig", "xdg git config": "writing ~/.config/git/config"}),
		},
	})
}

// plantProjectConfig are the steps that rename each agent directory of
// the profiles' WorkspaceReadOnly aside and plant a hook-carrying file in a
// new one, rename the directory around a nested one (.github for
// .github/hooks) aside and plant a fresh one, and write or replace each
// such file at the workspace's top.
func (w *world) plantProjectConfig() []step {
	var out []step
	around := map[string]bool{}
	for _, rel := range agent.WorkspaceReadOnly() {
		if strings.HasPrefix(rel, ".claude/") || strings.HasPrefix(rel, ".codex/") || strings.HasPrefix(rel, ".gemini/") {
			continue // their own classes
		}
		payload := shq(w.claudeHooks("project-" + strings.NewReplacer("/", "-", ".", "").Replace(rel)))
		if top, _, nested := strings.Cut(strings.TrimSuffix(rel, "/"), "/"); nested && !slices.Contains(agent.WorkspaceDirs(), top) && !around[top] {
			around[top] = true
			target := strings.TrimSuffix(rel, "/")
			if strings.HasSuffix(rel, "/") {
				target += "/cco-planted.json"
			}
			out = append(out, step{"rename " + top + " around " + rel,
				"mv " + top + " " + top + "-around && mkdir -p " + path.Dir(target) + " && printf '%s' " + payload + " > " + target + " && echo DONE"})
		}
		if d, ok := strings.CutSuffix(rel, "/"); ok {
			out = append(out,
				step{"rename " + d, "mv " + d + " " + d + "-aside && echo DONE"},
				step{"plant in " + d, "mkdir -p " + d + " && printf '%s' " + payload + " > " + d + "/cco-planted.json && echo DONE"})
			continue
		}
		out = append(out,
			step{"write " + rel, "mkdir -p " + path.Dir(rel) + " && printf '%s' " + payload + " > " + rel + " && echo DONE"},
			step{"replace " + rel, "printf '%s' " + payload + " > " + rel + ".new && mv -f " + rel + ".new " + rel + " && echo DONE"})
	}
	return out
}
