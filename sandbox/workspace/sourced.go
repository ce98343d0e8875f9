package workspace

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/internal/safetext"
)

// Files that a host tool reads from a project on its own, without the user
// asking for that file: direnv sources .envrc (and what it names, such as
// .envrc.local or .env) when the shell enters the directory; npm, yarn and
// pnpm read their rc files and pnpmfile at every command there (a
// node-options, a yarnPath, a hook); mise runs its config's hooks and env
// scripts on cd; pre-commit runs its config's hooks at the next commit;
// VS Code runs a folder's tasks and takes its interpreter settings when the
// folder opens. Many of them are gitignored, so a session's change to one
// does not show in the diff a user reads: the shadow warns after each
// session about every one created or changed, in the workspace's top and
// in each repository's top it found.
var sourcedNames = []string{
	".envrc", ".env", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs",
	"mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".tool-versions",
	".pre-commit-config.yaml", ".vscode/settings.json", ".vscode/tasks.json", ".vscode/launch.json",
	".config/mise.toml", ".config/mise/config.toml",
}

// sourcedPrefixes are families of names (.envrc.local, .env.production).
var sourcedPrefixes = []string{".envrc.", ".env."}

// sourcedDirs are the directories whose sourced files are watched: the
// workspace and the top of each repository below it.
func sourcedDirs(ws string, repos []string) []string {
	out := []string{ws}
	for _, r := range repos {
		if d := filepath.Dir(r); paths.Within(d, ws) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// eachSourced calls fn with every sourced file that dirs hold: the fixed
// names, and the families' members a listing of each directory shows.
func eachSourced(dirs []string, fn func(string)) {
	for _, d := range dirs {
		for _, n := range sourcedNames {
			fn(filepath.Join(d, n))
		}
		for _, e := range (&repoFinder{}).list(d) {
			for _, pre := range sourcedPrefixes {
				if strings.HasPrefix(e.name, pre) {
					fn(filepath.Join(d, e.name))
				}
			}
		}
	}
}

// stampsOf stamps every file that each names and that exists.
func stampsOf(each func(fn func(string))) map[string]fileStamp {
	out := map[string]fileStamp{}
	each(func(p string) {
		if st, ok := stampOf(p); ok {
			out[p] = st
		}
	})
	return out
}

// changedSince lists, sorted, each file that each names and that was
// created or changed since before, with why it matters.
func changedSince(before map[string]fileStamp, each func(fn func(string)), why string) []string {
	var out []string
	seen := map[string]bool{}
	each(func(p string) {
		st, ok := stampOf(p)
		if !ok || seen[p] {
			return
		}
		seen[p] = true
		if b, was := before[p]; !was || b != st {
			out = append(out, safetext.Escape(p)+": "+why)
		}
	})
	slices.Sort(out)
	return out
}

// sourcedWhy is the warning for a sourced file a session made or changed.
const sourcedWhy = "created or changed in this session; a host tool reads it without asking (direnv, npm, mise, pre-commit or your editor) and it may not show in git diff"
