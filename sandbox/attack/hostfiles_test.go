package attack

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailscale/hujson"

	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
)

// hostCargo is the host's cargo (rustup's proxy), looked for where rustup
// puts it for root, then on the system paths; "" when absent.
func hostCargo() string {
	for _, p := range []string{"/root/.cargo/bin/cargo", "/usr/local/bin/cargo", "/usr/bin/cargo"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// effect is a directory outside the workspace where the planted programs
// leave a mark when a host tool runs them: the proof that the file the
// audit reports does make the tool run the session's code. It is not the
// sentinel directory, which the verdict holds must stay empty.
func (w *world) effect() string { return filepath.Join(w.Base, "effect") }

// hostLoaded are the files a session plants that a host tool loads on its
// own, workspace-relative, with what the warning must name (the tool and
// the key or line); tcproj, crate and crate2 are directories of their
// own, so that the toolchain file does not cover the crate, and cargo
// reads the crate's config.toml (it prefers a config beside it).
func (w *world) hostLoaded() []plantCase {
	e := w.effect()
	return []plantCase{
		{"tcproj/rust-toolchain.toml", fmt.Sprintf("[toolchain]\npath = %q\n", w.ws+"/tc"), []string{"rustup's cargo and rustc", `toolchain.path = "` + w.ws + `/tc"`}},
		{"tcproj2/rust-toolchain", w.ws + "/tc\n", []string{"rustup's cargo and rustc", "a path toolchain: " + w.ws + "/tc"}},
		{"crate/.cargo/config.toml", fmt.Sprintf("[build]\nrustc-wrapper = %q\n", w.ws+"/tc/bin/wrap"), []string{"cargo runs these", `build.rustc-wrapper = "` + w.ws + `/tc/bin/wrap"`}},
		{"crate2/.cargo/config", "[target.x86_64-unknown-linux-gnu]\nrunner = \"./evil\"\n[alias]\nb = \"run\"\n", []string{"cargo", `runner = "./evil"`, `alias.b = "run"`}},
		{"hgrepo/.hg/hgrc", "[hooks]\npre-status = touch " + e + "/hg\n", []string{"hg runs these", "[hooks] pre-status = touch " + e + "/hg"}},
		{"newhg/.hg/hgrc", "[hooks]\nupdate = touch " + e + "/hg2\n", []string{"hg runs these", "[hooks] update"}},
		{"bunfig.toml", "preload = [\"./evil.ts\"]\n", []string{"bun", `preload = ["./evil.ts"]`}},
		{".yarnrc.yml", "yarnPath: ./evil.cjs\n", []string{"yarn", "yarnPath: ./evil.cjs"}},
		{".pnpmfile.cjs", "require('child_process').execSync('touch " + e + "/pnpm')\n", []string{"pnpm", "execSync"}},
		{".mise.toml", "[hooks]\nenter = \"touch " + e + "/mise\"\n", []string{"mise", "hooks.enter"}},
		{".tool-versions", "rust path:" + w.ws + "/tc\n", []string{"mise and asdf", "rust path:"}},
		{".Rprofile", "system('touch " + e + "/r')\n", []string{"R runs it", "system("}},
		{".irbrc", "system('touch " + e + "/irb')\n", []string{"irb", "system("}},
		{".pdbrc", "import os; os.system('touch " + e + "/pdb')\n", []string{"pdb", "os.system"}},
		{".envrc", "touch " + e + "/direnv\n", []string{"direnv", "touch " + e + "/direnv"}},
		{".env", "API_URL=x\nNODE_OPTIONS=--require ./evil.js\n", []string{"dotenv", "NODE_OPTIONS=--require ./evil.js"}},
		{".npmrc", "fund=false\nnode-options=--require ./evil.js\n", []string{"npm and pnpm", "node-options=--require ./evil.js"}},
		{".vscode/tasks.json", `{"version":"2.0.0","tasks":[{"label":"t","command":"touch ` + e + `/code","runOptions":{"runOn":"folderOpen"}}]}`, []string{"VS Code runs these when the folder opens", `task "t"`}},
	}
}

// plantCase is one file a session writes and what the warning names.
type plantCase struct {
	rel, content string
	want         []string
}

// inertPlanted run nothing: the audit must stay quiet about them.
var inertPlanted = []plantCase{
	{".env.example", "API_URL=x\n", nil},
	{"app/.vscode/settings.json", "{}", nil},
	{"crate/rust-toolchain.toml", "[toolchain]\nchannel = \"stable\"\n", nil},
}

// TestHostLoadedFilesReported: a session plants, in the workspace and its
// subdirectories, every file a host tool loads on its own (a path
// toolchain for rustup, a cargo config's rustc-wrapper, runner and alias,
// hooks in a repository's .hg/hgrc and in a new one's, bunfig's preload,
// yarnPath, a pnpmfile, mise's hooks and a path tool version, .Rprofile,
// .irbrc, .pdbrc, an .envrc, a folderOpen task), and three that run
// nothing (an .env.example of URLs, an empty settings.json, a toolchain
// channel). After the session the shadow names each running file, with
// the tool and the key or line, and none of the inert ones. The host's
// verdict: its cargo in the toolchain's directory runs the session's
// cargo, its cargo in the crate runs the session's rustc-wrapper, and its
// hg in the repository runs the hook: the warnings are about what really
// runs.
func TestHostLoadedFilesReported(t *testing.T) {
	hg, _ := exec.LookPath("hg")
	cargo := hostCargo()
	runAttacks(t, []attack{{
		name: "plant files host tools load on their own",
		only: func(a string, _ jailtest.RunAs) bool { return a == "claude" },
		prep: func(t *testing.T, w *world) {
			os.MkdirAll(w.effect(), 0o777)
			os.Chmod(w.effect(), 0o777)
			for _, d := range []string{"tcproj", "tcproj2", "crate/src", "app", "hgrepo"} {
				os.MkdirAll(filepath.Join(w.ws, d), 0o755)
			}
			os.WriteFile(filepath.Join(w.ws, "crate/Cargo.toml"), []byte("[package]\nname = \"c\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"), 0o644)
			os.WriteFile(filepath.Join(w.ws, "crate/src/main.rs"), []byte("fn main() {}\n"), 0o644)
			w.Own(t)
			if hg != "" {
				if out, err := w.Host(filepath.Join(w.ws, "hgrepo"), hg, "init").CombinedOutput(); err != nil {
					t.Fatalf("hg init: %v\n%s", err, out)
				}
			}
		},
		probe: func(w *world, _ string) probe {
			var b strings.Builder
			fmt.Fprintf(&b, "set -e\nmkdir -p tc/bin\nprintf '#!/bin/sh\\ntouch %s/cargo\\n' > tc/bin/cargo\n", w.effect())
			fmt.Fprintf(&b, "printf '#!/bin/sh\\ntouch %s/wrapper\\nexec \"$@\"\\n' > tc/bin/wrap\nchmod +x tc/bin/cargo tc/bin/wrap\n", w.effect())
			for _, c := range append(w.hostLoaded(), inertPlanted...) {
				fmt.Fprintf(&b, "mkdir -p %s\nprintf '%%s' %s > %s\n", shq(filepath.Dir(c.rel)), shq(c.content), shq(c.rel))
			}
			b.WriteString("echo DONE\n")
			return probe{Steps: steps("plant", b.String())}
		},
		verdict: func(w *world) verdict { return verdict{allowPlanted: []string{w.ws}} },
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			succeeded(t, sess, "plant")
			for _, c := range w.hostLoaded() {
				p := filepath.Join(w.ws, c.rel)
				line := warningFor(sess.Stderr, p)
				if line == "" {
					t.Errorf("no warning for %s after the session:\n%s", c.rel, sess.Stderr)
					continue
				}
				for _, want := range c.want {
					if !strings.Contains(line, want) {
						t.Errorf("the warning for %s does not name %q:\n%s", c.rel, want, line)
					}
				}
			}
			for _, c := range inertPlanted {
				if line := warningFor(sess.Stderr, filepath.Join(w.ws, c.rel)); line != "" {
					t.Errorf("a warning for %s, which runs nothing:\n%s", c.rel, line)
				}
			}
			w.hostToolsRun(t, cargo, hg)
		},
	}})
}

// warningFor is the line of the shadow's stderr that reports path.
func warningFor(stderr, path string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), path+": ") {
			return l
		}
	}
	return ""
}

// hostToolsRun is the host's verdict on the planted toolchain, cargo
// config and hgrc: the host's cargo and hg, run where a user would, run
// what the session planted (each leaves its mark in effect()). A tool the
// host lacks is named and its part left out: the file's effect is then
// what the warning says.
func (w *world) hostToolsRun(t *testing.T, cargo, hg string) {
	t.Helper()
	mark := func(name string) bool {
		_, err := os.Stat(filepath.Join(w.effect(), name))
		return err == nil
	}
	if cargo == "" {
		t.Log("no cargo on the host: the toolchain file's and the cargo config's effect are left to the warnings")
	} else {
		// rustup is root's here (/root/.cargo): run as root, with root's
		// home, in the session's directories.
		for _, dir := range []string{"tcproj", "tcproj2"} {
			os.Remove(filepath.Join(w.effect(), "cargo"))
			c := exec.Command(cargo, "--version")
			c.Dir = filepath.Join(w.ws, dir)
			c.Env = []string{"HOME=/root", "PATH=/root/.cargo/bin:/usr/bin:/bin"}
			res := jailtest.Run(t, c, 30*time.Second)
			if !mark("cargo") {
				t.Errorf("the host's cargo in %s did not run the session's toolchain (the class the warning names): %s%s", dir, res.Stdout, res.Stderr)
			}
		}
		c := exec.Command(cargo, "build", "--offline", "-q")
		c.Dir = filepath.Join(w.ws, "crate")
		c.Env = []string{"HOME=/root", "PATH=/root/.cargo/bin:/usr/bin:/bin", "CARGO_TARGET_DIR=" + t.TempDir()}
		res := jailtest.Run(t, c, 120*time.Second)
		if !mark("wrapper") {
			t.Errorf("the host's cargo build in crate did not run the session's rustc-wrapper: %s%s", res.Stdout, res.Stderr)
		}
	}
	if hg == "" {
		t.Error("no hg on the host (fix: apt-get install mercurial, as scripts/test.sh does)")
		return
	}
	res := jailtest.Run(t, w.Host(filepath.Join(w.ws, "hgrepo"), hg, "status"), 30*time.Second)
	if !mark("hg") {
		t.Errorf("the host's hg status did not run the session's hook: %s%s", res.Stdout, res.Stderr)
	}
}

// TestTrustListsRestored: a session widens its agent's trust list in the
// file that also holds its login, and refreshes the login there: Copilot
// CLI's trustedFolders (and the older trusted_folders) set to "/", Claude
// Code's "/" project marked trusted with every project MCP server enabled
// and a project's trust widened. On the host after the session: the trust
// keys are as they were at launch, the login is the session's refresh, and
// the shadow's stderr names the file and the keys in one line. A session
// that replaces the file by a link to a file of its own gets the launch's
// file back, a regular file, and the link's target is untouched.
func TestTrustListsRestored(t *testing.T) {
	type plan struct {
		file, launch, session string
		// want are in the one warning; keys are checked on the host.
		want []string
		host func(t *testing.T, m map[string]any)
	}
	plans := map[string]plan{
		"copilot": {
			file:    ".copilot/config.json",
			launch:  "// managed\n{\n  \"trustedFolders\": [],\n  \"token\": \"old\"\n}\n",
			session: `{"trustedFolders":["/"],"trusted_folders":["/"],"token":"refreshed"}`,
			want:    []string{"copilot's trust list", `trustedFolders = ["/"]`, `trusted_folders = ["/"]`},
			host: func(t *testing.T, m map[string]any) {
				if fmt.Sprint(m["trustedFolders"]) != "[]" || m["trusted_folders"] != nil {
					t.Errorf("LEAK: the session's trust stayed on the host: %v", m)
				}
			},
		},
		"claude": {
			file:    ".claude/.claude.json",
			launch:  `{"token":"old","projects":{"/srv/p":{"hasTrustDialogAccepted":false,"history":[]}}}`,
			session: `{"token":"refreshed","projects":{"/":{"hasTrustDialogAccepted":true,"enableAllProjectMcpServers":true},"/srv/p":{"hasTrustDialogAccepted":true,"history":[1]}}}`,
			want:    []string{"claude's trust list", `projects."/".hasTrustDialogAccepted = true`, `projects."/".enableAllProjectMcpServers = true`},
			host: func(t *testing.T, m map[string]any) {
				projects, _ := m["projects"].(map[string]any)
				root, _ := projects["/"].(map[string]any)
				p, _ := projects["/srv/p"].(map[string]any)
				if root["hasTrustDialogAccepted"] != nil || root["enableAllProjectMcpServers"] != nil || p["hasTrustDialogAccepted"] != false {
					t.Errorf("LEAK: the session's trust stayed on the host: %v", projects)
				}
				if fmt.Sprint(p["history"]) != "[1]" {
					t.Errorf("the session's other writes were lost: %v", p)
				}
			},
		},
	}
	var classes []attack
	for _, mode := range []string{"edit", "link"} {
		classes = append(classes, attack{
			name:       "widen the agent's trust list (" + mode + ")",
			everyAgent: true,
			only:       func(a string, _ jailtest.RunAs) bool { _, ok := plans[a]; return ok },
			prep: func(t *testing.T, w *world) {
				for _, pl := range plans {
					p := filepath.Join(w.Home, pl.file)
					os.MkdirAll(filepath.Dir(p), 0o700)
					os.WriteFile(p, []byte(pl.launch), 0o600)
				}
				w.Own(t)
			},
			probe: func(w *world, a string) probe {
				pl := plans[a]
				if mode == "link" {
					return probe{Steps: steps("widen", fmt.Sprintf("d=$(dirname ~/%s) && printf '%%s' %s > $d/own.json && ln -sf $d/own.json ~/%s.new && mv ~/%s.new ~/%s && echo DONE",
						pl.file, shq(pl.session), pl.file, pl.file, pl.file))}
				}
				return probe{Steps: steps("widen", fmt.Sprintf("printf '%%s' %s > ~/%s.tmp && mv ~/%s.tmp ~/%s && echo DONE", shq(pl.session), pl.file, pl.file, pl.file))}
			},
			check: func(t *testing.T, w *world, a string, sess jailtest.Result) {
				succeeded(t, sess, "widen")
				pl := plans[a]
				p := filepath.Join(w.Home, pl.file)
				line := warningFor(strings.ReplaceAll(sess.Stderr, "cco: WARNING: ", ""), p)
				fi, err := os.Lstat(p)
				if err != nil || !fi.Mode().IsRegular() {
					t.Fatalf("LEAK: %s is not a regular file on the host after the session: %v %v", p, fi, err)
				}
				if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != w.U.UID {
					t.Errorf("%s is owned by %d after the restore, want %d", p, st.Uid, w.U.UID)
				}
				b, _ := os.ReadFile(p)
				if mode == "link" {
					if line == "" || !strings.Contains(line, "a link") {
						t.Errorf("no line naming the link after the session:\n%s", sess.Stderr)
					}
					if string(b) != pl.launch {
						t.Errorf("LEAK: %s is not the launch's file:\n%s", p, b)
					}
					return
				}
				if line == "" {
					t.Fatalf("no line naming %s after the session:\n%s", p, sess.Stderr)
				}
				for _, want := range pl.want {
					if !strings.Contains(line, want) {
						t.Errorf("the line does not name %q:\n%s", want, line)
					}
				}
				m := jsoncMap(t, b)
				if m["token"] != "refreshed" {
					t.Errorf("the login's refresh was lost: %s", b)
				}
				pl.host(t, m)
			},
		})
	}
	// The agent's own trust dialog in the jail trusts the workspace: that
	// stays, with no line.
	classes = append(classes, attack{
		name:       "trust the workspace, as the agent's dialog does",
		everyAgent: true,
		only:       func(a string, _ jailtest.RunAs) bool { return a == "copilot" },
		prep: func(t *testing.T, w *world) {
			p := filepath.Join(w.Home, ".copilot/config.json")
			os.MkdirAll(filepath.Dir(p), 0o700)
			os.WriteFile(p, []byte(`{"trustedFolders":[],"token":"old"}`), 0o600)
			w.Own(t)
		},
		probe: func(w *world, _ string) probe {
			return probe{Steps: steps("trust", fmt.Sprintf(`printf '{"trustedFolders":[%%s],"token":"refreshed"}' '"%s"' > ~/.copilot/config.json && echo DONE`, w.ws))}
		},
		check: func(t *testing.T, w *world, _ string, sess jailtest.Result) {
			succeeded(t, sess, "trust")
			p := filepath.Join(w.Home, ".copilot/config.json")
			if strings.Contains(sess.Stderr, "trust list") {
				t.Errorf("a line about the workspace's own trust:\n%s", sess.Stderr)
			}
			b, _ := os.ReadFile(p)
			if m := jsoncMap(t, b); fmt.Sprint(m["trustedFolders"]) != "["+w.ws+"]" || m["token"] != "refreshed" {
				t.Errorf("the workspace's trust or the login's refresh was lost: %s", b)
			}
		},
	})
	runAttacks(t, classes)
}

// jsoncMap decodes a JSON or JSONC file's object.
func jsoncMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	std, err := hujson.Standardize(b)
	if err != nil {
		t.Fatalf("the file no longer parses: %v\n%s", err, b)
	}
	var m map[string]any
	if err := json.Unmarshal(std, &m); err != nil {
		t.Fatalf("the file is not an object: %v\n%s", err, b)
	}
	return m
}

// modelCalled: copilot's output shows its first model call, which it makes
// after the session's hooks (offline, in a network namespace, it fails).
func modelCalled(out string) bool {
	return strings.Contains(out, "Response was interrupted") || strings.Contains(out, "Failed to get response")
}

// TestRealCopilotTrustsNothingTheJailWrote: the user's Copilot CLI (the
// real pinned binary, unwrapped, offline) after a hostile session that set
// trustedFolders to ["/"] does not trust a folder the user opens later: a
// repository's .github/hooks sessionStart hook does not run there. The
// control shows that the session's file, left on the host, makes the same
// hook run: the verdict could fail.
func TestRealCopilotTrustsNothingTheJailWrote(t *testing.T) {
	realagents.Require(t)
	testenv.RequireRoot(t)
	bin := filepath.Join(realagents.Dir(t, realagents.Copilot), realagents.CopilotBinary)
	const hostile = `{"trustedFolders":["/"],"trusted_folders":["/"],"token":"refreshed"}`
	// A repository cloned after the session, with a hook that leaves a
	// marker, and the unwrapped copilot run in it until the hook ran or the
	// model call (which comes after the hooks) failed.
	unwrapped := func(t *testing.T, home, marker string) string {
		repo := t.TempDir()
		os.MkdirAll(filepath.Join(repo, ".github/hooks"), 0o755)
		os.WriteFile(filepath.Join(repo, ".github/hooks/x.json"),
			[]byte(fmt.Sprintf(`{"version":1,"hooks":{"sessionStart":[{"type":"command","bash":"touch %s"}]}}`, marker)), 0o644)
		if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		c := exec.Command("unshare", "--net", bin, "-p", "hi", "--allow-all-tools")
		c.Dir = repo
		c.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "TERM=dumb", "NO_COLOR=1", "COPILOT_OFFLINE=true",
			"COPILOT_PROVIDER_BASE_URL=http://127.0.0.1:9/v1", "COPILOT_PROVIDER_API_KEY=dummy", "COPILOT_MODEL=gpt-4.1"}
		return realagents.RunUntil(t, c, filepath.Join(t.TempDir(), "out"), 90*time.Second, func(out string) bool {
			_, err := os.Stat(marker)
			return err == nil || modelCalled(out)
		})
	}
	t.Run("control", func(t *testing.T) {
		home := t.TempDir()
		os.MkdirAll(filepath.Join(home, ".copilot"), 0o700)
		os.WriteFile(filepath.Join(home, ".copilot/config.json"), []byte(hostile), 0o600)
		marker := filepath.Join(t.TempDir(), "control")
		out := unwrapped(t, home, marker)
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the real copilot with trustedFolders [\"/\"] did not run a repository's hook: the test cannot tell a leak (%v)\n%s", err, out)
		}
	})
	r := shared.Get(t)
	for _, u := range users {
		t.Run(u.Name, func(t *testing.T) {
			w := newWorld(t, u)
			cfg := filepath.Join(w.Home, ".copilot/config.json")
			os.MkdirAll(filepath.Dir(cfg), 0o700)
			os.WriteFile(cfg, []byte(`{"trustedFolders":[],"token":"old"}`), 0o600)
			w.Own(t)
			sess := w.launch(t, r, "copilot", w.ws, probe{Steps: steps("widen",
				fmt.Sprintf("printf '%%s' %s > ~/.copilot/config.json && echo DONE", shq(hostile)))})
			succeeded(t, sess, "widen")
			if !strings.Contains(sess.Stderr, cfg+": this session changed copilot's trust list") {
				t.Errorf("no line naming %s after the session:\n%s", cfg, sess.Stderr)
			}
			marker := filepath.Join(w.effect(), "copilot-hook")
			os.MkdirAll(w.effect(), 0o777)
			out := unwrapped(t, w.Home, marker)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("LEAK: the user's copilot, after the session, trusted a folder the session chose and ran its hook\n%s", out)
			}
			if !modelCalled(out) {
				t.Errorf("the real copilot did not get as far as its model call, after the hooks: the verdict says nothing\n%s", out)
			}
			b, _ := os.ReadFile(cfg)
			if m := jsoncMap(t, b); m["token"] != "refreshed" {
				t.Errorf("the login's refresh was lost: %s", b)
			}
		})
	}
}
