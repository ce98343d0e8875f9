package workspace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/tailscale/hujson"
)

// What each host file runs or loads, as the audit names it: "key = value"
// or the line. Each reader takes what the tool would run without being
// asked and nothing else, so that a file that runs nothing is not
// reported. A file a reader cannot parse is reported whole (its first
// lines): the tool may read it otherwise.

// maxRunLines bounds what one reader returns.
const maxRunLines = 64

// shellLines is a script's lines that are not blank and not comments: a
// file the tool runs as code (an .envrc, an .Rprofile, a pnpmfile) runs
// every such line.
func shellLines(comment string) func([]byte) []string {
	return func(b []byte) []string {
		var out []string
		for _, l := range lines(b) {
			if l == "" || strings.HasPrefix(l, comment) {
				continue
			}
			if out = append(out, l); len(out) == maxRunLines {
				break
			}
		}
		return out
	}
}

// lines are b's lines, trimmed.
func lines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		out = append(out, strings.TrimSpace(sc.Text()))
	}
	return out
}

// envRunVars are the variables that make a program run another, or load
// code, when set: a dotenv file that sets one changes what runs.
var envRunVars = map[string]bool{
	"PATH": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true, "NODE_OPTIONS": true, "NODE_PATH": true,
	"BASH_ENV": true, "ENV": true, "ZDOTDIR": true, "PROMPT_COMMAND": true, "SHELL": true, "PYTHONPATH": true,
	"PYTHONSTARTUP": true, "PYTHONHOME": true, "PERL5OPT": true, "PERL5LIB": true, "PERLLIB": true, "RUBYOPT": true,
	"RUBYLIB": true, "JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true, "MAVEN_OPTS": true,
	"GRADLE_OPTS": true, "EDITOR": true, "VISUAL": true, "PAGER": true, "BROWSER": true, "SSH_ASKPASS": true,
	"SUDO_ASKPASS": true, "RUSTC": true, "RUSTC_WRAPPER": true, "RUSTC_WORKSPACE_WRAPPER": true, "RUSTDOC": true,
	"CC": true, "CXX": true, "LD": true, "GOFLAGS": true, "GOTOOLCHAIN": true, "CGO_CFLAGS": true, "CGO_LDFLAGS": true,
	"LESSOPEN": true, "MANPAGER": true, "HGEDITOR": true, "HGMERGE": true, "PIP_INDEX_URL": true, "PIP_EXTRA_INDEX_URL": true,
}

// envRunPrefixes are families of such variables.
var envRunPrefixes = []string{"GIT_", "DYLD_", "NPM_CONFIG_", "YARN_", "CARGO_BUILD_", "CARGO_TARGET_", "HGRC", "MISE_", "DIRENV_"}

// envRuns is a dotenv file's assignments of envRunVars, and each whose
// value holds a command substitution (a loader that goes through the
// shell runs it).
func envRuns(b []byte) []string {
	var out []string
	for _, l := range lines(b) {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(l, "export "), "=")
		k = strings.TrimSpace(k)
		if !ok {
			continue
		}
		up := strings.ToUpper(k)
		run := envRunVars[up] || strings.Contains(v, "$(") || strings.Contains(v, "`")
		for _, p := range envRunPrefixes {
			run = run || strings.HasPrefix(up, p)
		}
		if run {
			if out = append(out, l); len(out) == maxRunLines {
				break
			}
		}
	}
	return out
}

// flatTOML is a TOML document's leaves, dotted keys to values (arrays
// whole); nil and false when it does not parse.
func flatTOML(b []byte) (map[string]any, bool) {
	var doc map[string]any
	if _, err := toml.Decode(string(b), &doc); err != nil {
		return nil, false
	}
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			if sub, ok := v.(map[string]any); ok {
				walk(key, sub)
				continue
			}
			out[key] = v
		}
	}
	walk("", doc)
	return out, true
}

// tomlKeys is a TOML file's leaves that run reports, sorted; a file that
// does not parse is reported by its first lines.
func tomlKeys(run func(key string, v any) bool) func([]byte) []string {
	return func(b []byte) []string {
		flat, ok := flatTOML(b)
		if !ok {
			return unparsed(b)
		}
		var out []string
		for k, v := range flat {
			if run(k, v) {
				out = append(out, k+" = "+show(v))
			}
		}
		sort.Strings(out)
		return out[:min(len(out), maxRunLines)]
	}
}

// unparsed is a file no reader understood, as its first lines: the tool
// may still read it.
func unparsed(b []byte) []string {
	l := shellLines("#")(b)
	if len(l) == 0 {
		return nil
	}
	return []string{"(does not parse) " + l[0]}
}

func show(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

// rustToolchain is a toolchain file's path toolchain: rustup runs
// <path>/bin/cargo. The legacy rust-toolchain file may be one line, a
// channel name or a path.
func rustToolchain(b []byte) []string {
	if flat, ok := flatTOML(b); ok {
		if p, ok := flat["toolchain.path"]; ok {
			return []string{"toolchain.path = " + show(p)}
		}
		return nil
	}
	l := shellLines("#")(b)
	if len(l) == 1 && strings.ContainsAny(l[0], `/\`) {
		return []string{"a path toolchain: " + l[0]}
	}
	if len(l) > 1 {
		return unparsed(b)
	}
	return nil
}

// cargoConfig is what a cargo config makes cargo run: the compiler and its
// wrappers, runners and linkers, aliases, environment for build scripts,
// credential providers, source replacements and path overrides (code
// compiled and run at build), config includes, git through the CLI.
func cargoConfig(b []byte) []string {
	return tomlKeys(func(k string, v any) bool {
		parts := strings.Split(k, ".")
		last := parts[len(parts)-1]
		switch parts[0] {
		case "alias", "env", "source", "patch", "paths", "include", "credential-alias":
			return true
		case "build":
			return slices.Contains([]string{"rustc", "rustc-wrapper", "rustc-workspace-wrapper", "rustdoc"}, last) ||
				last == "rustflags" && linkerFlag(v)
		case "target", "host":
			return slices.Contains([]string{"runner", "linker", "ar"}, last) || last == "rustflags" && linkerFlag(v)
		case "registry", "registries":
			return strings.Contains(last, "credential-provider")
		case "net":
			return last == "git-fetch-with-cli"
		case "doc":
			return last == "browser"
		}
		return false
	})(b)
}

// linkerFlag: rustflags that name a program (a linker) or load a plugin.
func linkerFlag(v any) bool {
	s := show(v)
	return strings.Contains(s, "linker") || strings.Contains(s, "link-arg") || strings.Contains(s, "plugin")
}

// bunRunKey: bunfig's preload (top level, [test], [run]) and the shell of
// bun run.
func bunRunKey(k string, _ any) bool {
	return strings.HasSuffix(k, "preload") || k == "run.shell" || k == "run.bun"
}

// miseRunKey: mise's hooks, its env directives that source or load files
// and move PATH, a template that runs a command, a tool version that is a
// local path, and its tasks' run lines that a hook may start.
func miseRunKey(k string, v any) bool {
	parts := strings.Split(k, ".")
	switch parts[0] {
	case "hooks":
		return true
	case "env":
		if len(parts) > 1 && (parts[1] == "_" || envRunVars[strings.ToUpper(parts[1])]) {
			return true
		}
	case "tools":
		return strings.Contains(show(v), "path:")
	case "settings":
		return strings.Contains(k, "plugin") || strings.Contains(k, "shell")
	}
	return strings.Contains(show(v), "exec(")
}

// toolVersions: a .tool-versions line whose version is a local path.
func toolVersions(b []byte) []string {
	var out []string
	for _, l := range shellLines("#")(b) {
		if strings.Contains(l, "path:") {
			out = append(out, l)
		}
	}
	return out
}

// preCommit: a pre-commit config's repositories (it fetches and runs their
// hooks) and local hooks' entries.
func preCommit(b []byte) []string {
	var out []string
	for _, l := range lines(b) {
		t := strings.TrimSpace(strings.TrimPrefix(l, "-"))
		if strings.HasPrefix(t, "repo:") || strings.HasPrefix(t, "entry:") {
			if out = append(out, t); len(out) == maxRunLines {
				break
			}
		}
	}
	return out
}

// lefthook: a lefthook config's commands and scripts, and the remote
// configs it fetches and runs.
func lefthook(b []byte) []string {
	var out []string
	for _, l := range lines(b) {
		t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "-"))
		for _, k := range []string{"run:", "script:", "runner:", "git_url:", "extends:"} {
			if strings.HasPrefix(t, k) {
				out = append(out, t)
				break
			}
		}
		if len(out) == maxRunLines {
			break
		}
	}
	return out
}

// yamlTopKeys: the top-level keys of a YAML file that are named, with
// their value (the first line of it).
func yamlTopKeys(keys ...string) func([]byte) []string {
	return func(b []byte) []string {
		var out []string
		ls := strings.Split(string(b), "\n")
		for i, l := range ls {
			k, v, ok := strings.Cut(l, ":")
			if !ok || !slices.Contains(keys, strings.TrimSpace(k)) || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
				continue
			}
			v = strings.TrimSpace(v)
			if v == "" && i+1 < len(ls) {
				v = strings.TrimSpace(ls[i+1])
			}
			out = append(out, strings.TrimSpace(k)+": "+v)
		}
		return out
	}
}

// yarnrc: yarn 1's yarn-path (the yarn it runs instead of itself) and the
// shell of its scripts.
func yarnrc(b []byte) []string {
	var out []string
	for _, l := range lines(b) {
		k, _, _ := strings.Cut(strings.Trim(l, `"`), " ")
		k = strings.Trim(k, `"`)
		if k == "yarn-path" || k == "script-shell" || strings.HasSuffix(k, "yarn-path") {
			out = append(out, l)
		}
	}
	return out
}

// npmRunKeys are the .npmrc keys (npm's and pnpm's) that name a program or
// code it runs, or another config file it reads.
var npmRunKeys = []string{"node-options", "script-shell", "shell", "onload-script", "git", "init-module", "editor",
	"browser", "viewer", "userconfig", "globalconfig", "prefix", "pnpmfile", "global-pnpmfile", "node-gyp", "npm-path"}

// iniKeys: an ini file's key = value lines whose key is one of keys.
func iniKeys(keys []string) func([]byte) []string {
	return func(b []byte) []string {
		var out []string
		for _, l := range lines(b) {
			k, _, ok := strings.Cut(l, "=")
			if ok && slices.Contains(keys, strings.ToLower(strings.TrimSpace(k))) {
				out = append(out, l)
			}
		}
		return out
	}
}

// hgrc is what an hgrc makes hg run: every hook, each extension loaded
// from a path, shell aliases, the editor, merge and diff tools, the pager,
// ssh, and the files it includes.
func hgrc(b []byte) []string {
	var out []string
	section := ""
	for _, l := range lines(b) {
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
			continue
		case strings.HasPrefix(l, "%include"):
			out = append(out, l)
			continue
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = strings.ToLower(strings.TrimSpace(l[1 : len(l)-1]))
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		run := false
		switch section {
		case "hooks", "extdiff", "merge-tools", "diff-tools", "pager":
			run = section != "merge-tools" || strings.HasSuffix(k, ".executable") || strings.HasSuffix(k, ".args")
		case "extensions":
			run = v != "" && !strings.HasPrefix(v, "!")
		case "alias":
			run = strings.HasPrefix(v, "!")
		case "ui":
			run = slices.Contains([]string{"editor", "merge", "ssh", "remotecmd"}, k)
		default:
			run = strings.HasSuffix(k, "command") || strings.HasSuffix(k, "cmd") || strings.HasSuffix(k, "_exe") || strings.HasSuffix(k, "executable")
		}
		if run {
			if out = append(out, "["+section+"] "+k+" = "+v); len(out) == maxRunLines {
				break
			}
		}
	}
	return out
}

// jsonc parses a JSON-with-comments file (VS Code's) into x.
func jsonc(b []byte, x any) bool {
	v, err := hujson.Standardize(b)
	return err == nil && json.Unmarshal(v, x) == nil
}

// vscodeTasks: each task VS Code runs when the folder opens
// (runOptions.runOn = "folderOpen"), with its command.
func vscodeTasks(b []byte) []string {
	var doc struct {
		Tasks []struct {
			Label      string `json:"label"`
			Command    any    `json:"command"`
			Args       any    `json:"args"`
			RunOptions struct {
				RunOn string `json:"runOn"`
			} `json:"runOptions"`
		} `json:"tasks"`
	}
	if !jsonc(b, &doc) {
		return unparsed(b)
	}
	var out []string
	for _, t := range doc.Tasks {
		if t.RunOptions.RunOn == "folderOpen" {
			line := fmt.Sprintf("task %q (runOn folderOpen) runs %s", t.Label, show(t.Command))
			if t.Args != nil {
				line += " " + show(t.Args)
			}
			out = append(out, line)
		}
	}
	return out
}

// vscodeSettingSuffixes: a setting whose name ends so names a program, an
// interpreter or code an extension runs (python.defaultInterpreterPath,
// rust-analyzer.server.path, typescript.tsdk, go.alternateTools,
// eslint.runtime, clangd.path, git.path, ...).
var vscodeSettingSuffixes = []string{"path", "paths", "executable", "command", "commands", "cmd", "interpreter",
	"tsdk", "runtime", "binary", "wrapper", "shell", "home", "goroot", "tools", "args", "server", "exe", "env", "vars", "commandline"}

// vscodeSettingPrefixes: settings families that run programs.
var vscodeSettingPrefixes = []string{"terminal.integrated.", "task.", "emeraldwalk.runonsave", "runonsave", "triggertaskonsave"}

// vscodeSettings: the settings that name what VS Code or an extension
// runs when the folder opens.
func vscodeSettings(b []byte) []string {
	var doc map[string]any
	if !jsonc(b, &doc) {
		return unparsed(b)
	}
	var out []string
	for k, v := range doc {
		low := strings.ToLower(k)
		last := low[strings.LastIndexByte(low, '.')+1:]
		run := false
		for _, s := range vscodeSettingSuffixes {
			run = run || strings.HasSuffix(last, strings.ToLower(s))
		}
		for _, p := range vscodeSettingPrefixes {
			run = run || strings.HasPrefix(low, p)
		}
		if run {
			out = append(out, k+" = "+show(v))
		}
	}
	sort.Strings(out)
	return out[:min(len(out), maxRunLines)]
}

// vscodeLaunch: each debug configuration's program and the tasks it runs
// first.
func vscodeLaunch(b []byte) []string {
	var doc struct {
		Configurations []map[string]any `json:"configurations"`
	}
	if !jsonc(b, &doc) {
		return unparsed(b)
	}
	var out []string
	for _, c := range doc.Configurations {
		for _, k := range []string{"program", "runtimeExecutable", "preLaunchTask", "postDebugTask", "miDebuggerPath", "debugServerPath", "pipeTransport"} {
			if v, ok := c[k]; ok {
				out = append(out, fmt.Sprintf("configuration %s: %s = %s", show(c["name"]), k, show(v)))
			}
		}
	}
	return out
}
