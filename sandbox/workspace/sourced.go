package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/sandbox/saferead"
)

// Files that a host tool reads from a project on its own, without the user
// asking for that file: direnv sources .envrc when the shell enters the
// directory; cargo and rustup take .cargo/config.toml and
// rust-toolchain.toml from the directory and its parents; hg reads
// .hg/hgrc at every command; npm, yarn, pnpm and bun read their rc files
// and pnpmfile at every command; mise runs its config's hooks on cd; R,
// irb and pdb source their rc files at start; pre-commit runs its config's
// hooks at the next commit; VS Code runs a folder's folderOpen tasks and
// takes its interpreter and tool paths when the folder opens. Many of them
// are gitignored, so a session's change does not show in the diff a user
// reads: the shadow warns after each session about every one that the
// session created or changed and that now holds something the tool runs
// or loads, naming the key or the line. A file that runs nothing (an
// .env.example of URLs, an empty settings.json) is not reported.
//
// They are watched in the workspace's top, each repository's top, and each
// directory the walk (Find) sees holding one.

// hostFile is one name a host tool loads from a directory.
type hostFile struct {
	// name is directory-relative; a family (prefix) matches every entry
	// of the directory that starts with it (.env.local, .envrc.private).
	name   string
	prefix bool
	// tool and when say who runs it: "direnv runs it in your shell when
	// you enter the directory".
	tool, when string
	// runs lists what in the file the tool runs or loads: key = value, or
	// the line; none for a file that runs nothing.
	runs func(b []byte) []string
}

var hostFiles = append([]hostFile{
	{name: ".envrc", tool: "direnv", when: "runs it in your shell when you enter the directory", runs: shellLines("#")},
	{name: ".envrc.", prefix: true, tool: "direnv", when: "runs it in your shell when an .envrc sources it", runs: shellLines("#")},
	{name: ".env", tool: "direnv, mise and dotenv loaders", when: "put it in the environment of what they run", runs: envRuns},
	{name: ".env.", prefix: true, tool: "direnv, mise and dotenv loaders", when: "put it in the environment of what they run when asked to load it", runs: envRuns},
	{name: "rust-toolchain.toml", tool: "rustup's cargo and rustc", when: "run that toolchain's programs in this directory and below", runs: rustToolchain},
	{name: "rust-toolchain", tool: "rustup's cargo and rustc", when: "run that toolchain's programs in this directory and below", runs: rustToolchain},
	{name: ".cargo/config.toml", tool: "cargo", when: "runs these in this directory and below", runs: cargoConfig},
	{name: ".cargo/config", tool: "cargo", when: "runs these in this directory and below", runs: cargoConfig},
	{name: ".hg/hgrc", tool: "hg", when: "runs these at every command in the repository", runs: hgrc},
	{name: ".npmrc", tool: "npm and pnpm", when: "run these at every command here", runs: iniKeys(npmRunKeys)},
	{name: ".yarnrc", tool: "yarn", when: "runs these at every command here", runs: yarnrc},
	{name: ".yarnrc.yml", tool: "yarn", when: "runs these at every command here", runs: yamlTopKeys("yarnPath", "plugins", "injectEnvironmentFiles")},
	{name: ".pnpmfile.cjs", tool: "pnpm", when: "runs it at every install here", runs: shellLines("//")},
	{name: "bunfig.toml", tool: "bun", when: "loads these at every run here", runs: tomlKeys(bunRunKey)},
	{name: "mise.toml", tool: "mise", when: "runs these on cd and at every command here", runs: tomlKeys(miseRunKey)},
	{name: ".mise.toml", tool: "mise", when: "runs these on cd and at every command here", runs: tomlKeys(miseRunKey)},
	{name: "mise.local.toml", tool: "mise", when: "runs these on cd and at every command here", runs: tomlKeys(miseRunKey)},
	{name: ".mise.local.toml", tool: "mise", when: "runs these on cd and at every command here", runs: tomlKeys(miseRunKey)},
	{name: ".config/mise.toml", tool: "mise", when: "runs these on cd and at every command here", runs: tomlKeys(miseRunKey)},
	{name: ".config/mise/config.toml", tool: "mise", when: "runs these on cd and at every command here", runs: tomlKeys(miseRunKey)},
	{name: ".tool-versions", tool: "mise and asdf", when: "run that tool's programs from the path named", runs: toolVersions},
	{name: ".pre-commit-config.yaml", tool: "pre-commit", when: "runs these at the next commit", runs: preCommit},
	{name: ".Rprofile", tool: "R", when: "runs it at every start here", runs: shellLines("#")},
	{name: ".irbrc", tool: "irb", when: "runs it at every start here", runs: shellLines("#")},
	{name: ".pdbrc", tool: "pdb", when: "runs it at every start here", runs: shellLines("#")},
	{name: ".vscode/tasks.json", tool: "VS Code", when: "runs these when the folder opens", runs: vscodeTasks},
	{name: ".vscode/settings.json", tool: "VS Code and its extensions", when: "run the programs these name when the folder opens", runs: vscodeSettings},
	{name: ".vscode/launch.json", tool: "VS Code", when: "runs these when you start debugging", runs: vscodeLaunch},
	{name: "lefthook.yml", tool: "lefthook", when: "runs these at git's hooks", runs: lefthook},
	{name: "lefthook.yaml", tool: "lefthook", when: "runs these at git's hooks", runs: lefthook},
	{name: ".lefthook.yml", tool: "lefthook", when: "runs these at git's hooks", runs: lefthook},
	{name: ".lefthook.yaml", tool: "lefthook", when: "runs these at git's hooks", runs: lefthook},
	{name: "lefthook-local.yml", tool: "lefthook", when: "runs these at git's hooks", runs: lefthook},
	{name: ".lefthook-local.yml", tool: "lefthook", when: "runs these at git's hooks", runs: lefthook},
}, huskyHooks()...)

// huskyHooks are the project's husky hook scripts: husky 9 sets git's
// core.hooksPath to .husky/_ (read-only in the jail, as every hooksPath
// is), whose scripts run .husky/<hook>, which is not.
func huskyHooks() []hostFile {
	var out []hostFile
	for _, h := range []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-merge-commit",
		"pre-rebase", "post-checkout", "post-merge", "post-rewrite", "pre-push"} {
		out = append(out, hostFile{name: ".husky/" + h, tool: "husky (core.hooksPath .husky/_)", when: "runs it at git's " + h + " hook", runs: shellLines("#")})
	}
	return out
}

// hostFileFirst are the first path elements of hostFiles' names, for the
// walk; hostFilePrefixes their families.
var hostFileFirst, hostFilePrefixes = func() (map[string]bool, []string) {
	first := map[string]bool{}
	var pre []string
	for _, h := range hostFiles {
		if h.prefix {
			pre = append(pre, h.name)
			continue
		}
		f, _, _ := strings.Cut(h.name, "/")
		first[f] = true
	}
	return first, pre
}()

// holdsHostFile reports whether a directory entry's name is, or leads to,
// a file of hostFiles.
func holdsHostFile(name string) bool {
	if hostFileFirst[name] {
		return true
	}
	for _, p := range hostFilePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// sourcedDirs are the directories whose host files are watched: the
// workspace, the top of each repository below it, and the directories the
// walk found holding one (or an agent's config).
func sourcedDirs(ws string, repos, dirs []string) []string {
	out := []string{ws}
	add := func(d string) {
		if paths.Within(d, ws) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, r := range repos {
		add(filepath.Dir(r))
	}
	for _, d := range dirs {
		add(d)
	}
	return out
}

// eachSourced calls fn with every host file that dirs may hold: the fixed
// names, and the families' members a listing of each directory shows.
func eachSourced(dirs []string, fn func(string, *hostFile)) {
	for _, d := range dirs {
		for i := range hostFiles {
			if !hostFiles[i].prefix {
				fn(filepath.Join(d, hostFiles[i].name), &hostFiles[i])
			}
		}
		for _, e := range (&repoFinder{}).list(d) {
			for i := range hostFiles {
				h := &hostFiles[i]
				if h.prefix && strings.HasPrefix(e.name, h.name) {
					fn(filepath.Join(d, e.name), h)
				}
			}
		}
	}
}

// loaded is one host file at launch: its stamp and what it ran then.
type loaded struct {
	stamp fileStamp
	runs  []string
}

// snapshotSourced stamps, and reads, every host file dirs hold.
func snapshotSourced(dirs []string) map[string]loaded {
	out := map[string]loaded{}
	eachSourced(dirs, func(p string, h *hostFile) {
		if st, ok := stampOf(p); ok {
			l := loaded{stamp: st}
			if st.mode&syscall.S_IFMT == syscall.S_IFREG {
				if b, err := saferead.ReadCapped(p); err == nil {
					l.runs = h.runs(b)
				}
			}
			out[p] = l
		}
	})
	return out
}

// maxRunsShown is how many entries of one file a warning names.
const maxRunsShown = 3

// sourcedWarnings lists, sorted, each host file created or changed since
// before that holds something its tool runs which it did not hold at
// launch, with the tool, and the keys or lines.
func sourcedWarnings(before map[string]loaded, dirs []string) []string {
	var out []string
	seen := map[string]bool{}
	eachSourced(dirs, func(p string, h *hostFile) {
		st, ok := stampOf(p)
		if !ok || seen[p] {
			return
		}
		seen[p] = true
		b, was := before[p]
		if was && b.stamp == st {
			return
		}
		name := safetext.Escape(p)
		switch st.mode & syscall.S_IFMT {
		case syscall.S_IFREG:
		case syscall.S_IFLNK:
			t, _ := os.Readlink(p)
			out = append(out, fmt.Sprintf("%s: made a link to %s in this session; %s reads what it names", name, safetext.Escape(t), h.tool))
			return
		default:
			out = append(out, fmt.Sprintf("%s: made in this session, and not a regular file; %s reads it", name, h.tool))
			return
		}
		data, err := saferead.ReadCapped(p)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: changed in this session, and cco could not read it (%s); %s reads it: check it before running %s there", name, safetext.Escape(err.Error()), h.tool, h.tool))
			return
		}
		var added []string
		for _, r := range h.runs(data) {
			if !slices.Contains(b.runs, r) {
				added = append(added, r)
			}
		}
		if len(added) == 0 {
			return
		}
		shown := added[:min(len(added), maxRunsShown)]
		for i := range shown {
			shown[i] = safetext.Escape(shown[i])
		}
		more := ""
		if n := len(added) - len(shown); n > 0 {
			more = fmt.Sprintf(" (and %d more)", n)
		}
		out = append(out, fmt.Sprintf("%s: %s %s: %s%s", name, h.tool, h.when, strings.Join(shown, "; "), more))
	})
	slices.Sort(out)
	return out
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
