package attack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/jailtest"
)

// removeAll removes host paths of the world before the session.
func removeAll(rels ...string) func(t *testing.T, w *world) {
	return func(t *testing.T, w *world) {
		for _, r := range rels {
			if err := os.RemoveAll(filepath.Join(w.Base, r)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// freshDir is a directory with no repository, beside the workspace.
func freshDir(t *testing.T, w *world) {
	p := filepath.Join(w.Base, "fresh")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(p, w.U.UID, w.U.GID)
}

// linkAt is a step that plants a symlink at path, to target.
func linkAt(path, target string) string {
	return "mkdir -p " + shq(filepath.Dir(path)) + "; rm -f " + shq(path) + "; ln -s " + shq(target) + " " + shq(path) + " && echo DONE"
}

// TestPlantedLinks: links and FIFOs planted at protected or watched names
// for the next session. The next launch refuses (exit 126, one line naming
// the path and rm) or masks them; it never binds what a link names, and
// never hangs.
func TestPlantedLinks(t *testing.T) {
	ssh := func(w *world) string { return w.Home + "/.ssh/id_ed25519" }
	runAttacks(t, []attack{
		{
			name: "link .codex/config.toml to the ssh key",
			prep: removeAll("ws/.codex"),
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("link", linkAt(w.ws+"/.codex/config.toml", ssh(w)))}
			},
			verdict: func(w *world) verdict {
				return verdict{secondLoot: []string{w.ws + "/.codex/config.toml"}, links: map[string]string{w.ws + "/.codex/config.toml": ssh(w)}}
			},
		},
		{
			name: "link .claude/settings.json to the aws credentials",
			prep: removeAll("ws/.claude"),
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps(
					"link settings", linkAt(w.ws+"/.claude/settings.json", w.Home+"/.aws/credentials"),
					"link settings.local", linkAt(w.ws+"/.claude/settings.local.json", w.Home+"/.ssh"))}
			},
			verdict: func(w *world) verdict {
				return verdict{secondLoot: []string{w.ws + "/.claude/settings.json", w.Home + "/.ssh/id_ed25519"},
					links: map[string]string{w.ws + "/.claude/settings.json": w.Home + "/.aws/credentials", w.ws + "/.claude/settings.local.json": w.Home + "/.ssh"}}
			},
		},
		{
			name: "link .gemini/settings.json to the ssh key",
			prep: removeAll("ws/.gemini"),
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("link", linkAt(w.ws+"/.gemini/settings.json", ssh(w)))}
			},
			verdict: func(w *world) verdict {
				return verdict{secondLoot: []string{w.ws + "/.gemini/settings.json"}, links: map[string]string{w.ws + "/.gemini/settings.json": ssh(w)}}
			},
		},
		{
			// Each agent's own command-bearing login files (its profile's
			// HomeReadOnly), removed before the session.
			name:       "link the home's settings to the ssh key",
			everyAgent: true,
			prep: func(t *testing.T, w *world) {
				for _, p := range agent.All() {
					for _, rel := range homeFiles(p) {
						os.RemoveAll(filepath.Join(w.Home, rel))
					}
				}
			},
			probe: func(w *world, name string) probe {
				p, _ := agent.Lookup(name)
				var kv []string
				for _, rel := range homeFiles(p) {
					kv = append(kv, "link ~/"+rel, linkAt(w.Home+"/"+rel, ssh(w)))
				}
				return probe{Steps: steps(kv...)}
			},
			check: func(t *testing.T, w *world, name string, sess jailtest.Result) {
				p, _ := agent.Lookup(name)
				what := map[string]string{}
				for _, rel := range homeFiles(p) {
					what["link ~/"+rel] = "planting a link at ~/" + rel
				}
				refuses(what)(t, w, name, sess)
			},
		},
		{
			name: "FIFO at ~/.claude/.claude.json",
			only: func(a string, _ jailtest.RunAs) bool { return a == "claude" },
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("fifo", "rm -f ~/.claude/.claude.json && mkfifo ~/.claude/.claude.json && echo DONE")}
			},
			check: planted("fifo"),
		},
		{
			name: "link ~/.claude/.claude.json to /dev/zero",
			only: func(a string, _ jailtest.RunAs) bool { return a == "claude" },
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("link", linkAt(w.Home+"/.claude/.claude.json", "/dev/zero"))}
			},
			check: planted("link"),
		},
		{
			name: "link ~/.claude/.claude.json to the ssh key",
			only: func(a string, _ jailtest.RunAs) bool { return a == "claude" },
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("link", linkAt(w.Home+"/.claude/.claude.json", ssh(w)))}
			},
			check: planted("link"),
		},
		{
			name: "FIFOs at .git/config and HEAD in a new repository",
			prep: freshDir,
			dir:  func(w *world) string { return w.Base + "/fresh" },
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("fifo", "mkdir -p .git/hooks && mkfifo .git/config .git/HEAD .git/hooks/post-checkout && echo DONE")}
			},
			// The host's git would wait on the FIFO itself: that is git's
			// business; the shadow's own reads must not.
			verdict: func(w *world) verdict { return verdict{noGit: true} },
			check:   planted("fifo"),
		},
		{
			name: "link .git/config to the ssh key in a new repository",
			prep: freshDir,
			dir:  func(w *world) string { return w.Base + "/fresh" },
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("link", "git init -q && "+linkAt(w.Base+"/fresh/.git/config", ssh(w)))}
			},
			verdict: func(w *world) verdict {
				return verdict{noGit: true, secondLoot: []string{w.Base + "/fresh/.git/config"}, links: map[string]string{w.Base + "/fresh/.git/config": ssh(w)}}
			},
			check: planted("link"),
		},
		{
			name: "a .git file naming ~/.ssh in a new repository",
			prep: freshDir,
			dir:  func(w *world) string { return w.Base + "/fresh" },
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("git file", "printf 'gitdir: %s\\n' "+shq(w.Home+"/.ssh")+" > .git && echo DONE")}
			},
			verdict: func(w *world) verdict { return verdict{noGit: true} },
			check:   planted("git file"),
		},
		{
			name: "link .git/hooks to ~/.ssh in a new repository",
			prep: freshDir,
			dir:  func(w *world) string { return w.Base + "/fresh" },
			probe: func(w *world, _ string) probe {
				return probe{Steps: steps("link", "git init -q && rm -rf .git/hooks && "+linkAt(w.Base+"/fresh/.git/hooks", w.Home+"/.ssh"))}
			},
			verdict: func(w *world) verdict {
				return verdict{noGit: true, secondLoot: []string{w.Base + "/fresh/.git/hooks/id_ed25519"}}
			},
			check: planted("link"),
		},
	})
}

// planted checks that the probe planted what the class is about (where the
// jail lets it, by design), so that the verdict is not passed for nothing. A
// session that then hangs is the verdict's to report.
func planted(name string) func(t *testing.T, w *world, _ string, sess jailtest.Result) {
	return func(t *testing.T, w *world, _ string, sess jailtest.Result) {
		t.Helper()
		if got := sess.Report["sh:"+name]; !strings.Contains(got, "DONE") {
			t.Errorf("the probe could not plant its %s: %q\nstderr %s", name, got, sess.Stderr)
		}
	}
}

// homeFiles are a profile's read-only login files (not directories).
func homeFiles(p *agent.Profile) []string {
	var out []string
	for _, rel := range p.HomeReadOnly {
		if !strings.HasSuffix(rel, "/") {
			out = append(out, rel)
		}
	}
	return out
}
