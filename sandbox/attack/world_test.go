package attack

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/jailtest"
	"github.com/cco-dev/cco/internal/keytest"
	"github.com/cco-dev/cco/internal/testenv"
)

var shared = jailtest.Shared{Options: jailtest.RootOptions{Agent: "sandbox/attack/testdata/probe"}}

func TestMain(m *testing.M) {
	// Most of a session is waiting (for process starts, and for a shadow
	// that a planted FIFO holds until its timeout): more classes at once
	// than processors, unless -parallel says otherwise.
	flag.Parse()
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == f.DefValue {
		f.Value.Set("4")
	}
	code := m.Run()
	shared.Cleanup()
	fixture.cleanup()
	os.Exit(code)
}

// tag tells this test binary's secrets and host paths apart from any other.
var tag = func() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// secret is a string that must never leave where the test put it.
type secret struct {
	name, path, value string
	rootOnly          bool
}

// fixture is made once per test binary: a template world (a real
// repository with a submodule, a nested repository, one with a
// core.hooksPath, a linked worktree and a bare remote; a home with
// credentials) copied into each test's world, and the root-only secrets.
var fixture fixtureState

type fixtureState struct {
	once     sync.Once
	template string
	rootOnly []secret // made by root, readable by root alone
	dirs     []string // to remove
	err      error
}

func (f *fixtureState) cleanup() {
	for _, d := range f.dirs {
		os.RemoveAll(d)
	}
}

// world is one test's copy of the template, owned by its user.
type world struct {
	*jailtest.World
	ws, wt, sentinel string
	secrets          []secret
	// What a class's preparation made: host sockets, a git server's URL.
	socks    []string
	fetchURL string
	// during is what the host saw while the session ran; ended is closed
	// once the session has ended.
	during chan map[string]string
	ended  chan struct{}
	key    *keytest.Key // the invoking session's key
}

// home-relative credentials every world holds.
var homeSecrets = map[string]string{"ssh": ".ssh/id_ed25519", "aws": ".aws/credentials", "gh": ".config/gh/hosts.yml"}

func newWorld(t *testing.T, u jailtest.RunAs) *world {
	t.Helper()
	testenv.RequireRoot(t)
	fixture.once.Do(func() { fixture.err = makeFixture() })
	if fixture.err != nil {
		t.Fatal(fixture.err)
	}
	w := &world{World: jailtest.NewWorld(t, u)}
	w.ws, w.wt, w.sentinel = filepath.Join(w.Base, "ws"), filepath.Join(w.Base, "wt"), filepath.Join(w.Base, "cco-planted")
	if out, err := exec.Command("cp", "-a", fixture.template+"/.", w.Base+"/").CombinedOutput(); err != nil {
		t.Fatalf("copying the template world: %v\n%s", err, out)
	}
	// cp -a gives the base the template's own mode: keep it enterable by
	// every user (root's jail runs as an unprivileged uid, ADR 18).
	os.Chmod(w.Base, 0o755)
	// git writes a linked worktree's and a submodule's paths absolute.
	for _, f := range []string{"wt/.git", "ws/.git/worktrees/wt/gitdir", "ws/.gitmodules", "ws/.git/modules/sub/config"} {
		p := filepath.Join(w.Base, f)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(p, []byte(strings.ReplaceAll(string(b), fixture.template, w.Base)), 0o644)
	}
	if err := os.Mkdir(w.sentinel, 0o755); err != nil {
		t.Fatal(err)
	}
	w.Own(t)
	os.Chmod(w.Home, 0o700)
	for name, rel := range homeSecrets {
		w.secrets = append(w.secrets, secret{name: name, path: filepath.Join(w.Home, rel), value: "CCO-SECRET-" + name + "-" + tag})
	}
	w.secrets = append(w.secrets, fixture.rootOnly...)
	return w
}

// touch is a shell command that leaves evidence, on the host, that planted
// code ran: the sentinel directory is read-only in the jail.
func (w *world) touch(label string) string { return "touch " + w.sentinel + "/" + label }

// hook is a planted hook's text.
func (w *world) hook(label string) string { return "#!/bin/sh\n" + w.touch(label) + "\n" }

// hooks git runs for the host verdict's commands.
var hookNames = []string{"pre-commit", "commit-msg", "post-commit", "post-checkout", "pre-push", "reference-transaction", "post-index-change", "pre-auto-gc"}

// plantGit is a shell script that writes hooks into hooksDir and, when
// config is not "", the config keys that run programs into config; each
// write is tried alone, and the script's output says which failed.
func (w *world) plantGit(label, hooksDir, config string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mkdir -p %q 2>&1\n", hooksDir)
	for _, h := range hookNames {
		fmt.Fprintf(&b, "printf '%%s' %s > %q && chmod +x %q || echo 'refused %s'\n", shq(w.hook(label+"-"+h)), hooksDir+"/"+h, hooksDir+"/"+h, h)
	}
	if config != "" {
		fmt.Fprintf(&b, "printf '%%s' %s >> %q || echo 'refused %s'\n", shq(w.evilConfig(label)), config, config)
	}
	return b.String()
}

// evilConfig holds git keys that run programs.
func (w *world) evilConfig(label string) string {
	return fmt.Sprintf("[core]\n\tfsmonitor = \"%s-fsmonitor; false\"\n[diff]\n\texternal = \"%s-diff; true\"\n[alias]\n\tst = \"!%s-alias\"\n",
		w.touch(label), w.touch(label), w.touch(label))
}

// shq quotes s for the shell.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// sentinels are the labels of planted code that ran on the host.
func (w *world) sentinels() []string {
	ents, _ := os.ReadDir(w.sentinel)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func makeFixture() error {
	base, err := os.MkdirTemp("/var/lib", "cco-attack-template-")
	if err != nil {
		return err
	}
	fixture.template = base
	fixture.dirs = append(fixture.dirs, base)
	home := filepath.Join(base, "home")
	files := map[string]string{
		"home/.claude/settings.json":       "{}\n",
		"home/.claude/.credentials.json":   `{"token":"claude-login"}`,
		"home/.claude.json":                "{}\n",
		"home/.codex/config.toml":          "model = \"o3\"\n",
		"home/.codex/auth.json":            `{"token":"codex-login"}`,
		"home/.gemini/settings.json":       "{}\n",
		"home/.gemini/oauth_creds.json":    `{"token":"gemini-login"}`,
		"home/.config/gh/config.yml":       "git_protocol: https\n",
		"home/.config/glab-cli/config.yml": "git_protocol: https\n",
		"home/.gitconfig": "[user]\n\tname = Attack Tester\n\temail = tester@example.org\n[init]\n\tdefaultBranch = main\n" +
			"[protocol \"file\"]\n\tallow = always\n[advice]\n\tdetachedHead = false\n",
		"home/.bashrc":              "# the user's own\n",
		"ws/README":                 "a project\n",
		"ws/.git-hook-pre-commit":   "#!/bin/sh\nexit 0\n",
		"ws/.claude/settings.json":  "{}\n",
		"ws/.codex/config.toml":     "model = \"o3\"\n",
		"ws/.gemini/settings.json":  "{}\n",
		"ws/hooked/README":          "a repository with core.hooksPath\n",
		"ws/hooked/.githooks/.keep": "",
		"ws/nested/README":          "a nested repository\n",
		"subsrc/README":             "a submodule\n",
	}
	for name, rel := range homeSecrets {
		files["home/"+rel] = "CCO-SECRET-" + name + "-" + tag + "\n"
	}
	// Every agent's login files and command-bearing config, from the
	// profiles, and its directories in the workspace (.github for
	// .github/hooks/ too).
	for _, p := range agent.All() {
		for _, rel := range p.Secrets {
			if _, ok := files["home/"+rel]; !ok {
				files["home/"+rel] = `{"token":"` + p.Name + `-login"}`
			}
		}
		for _, rel := range p.HomeReadOnly {
			if _, ok := files["home/"+rel]; !ok && !strings.HasSuffix(rel, "/") {
				files["home/"+rel] = "{}\n"
			}
		}
		for _, rel := range p.WorkspaceReadOnly {
			if d, ok := strings.CutSuffix(rel, "/"); ok {
				files["ws/"+path.Dir(d)+"/README"] = "the project's own\n"
				files["ws/"+d+"/settings.json"] = "{}\n"
			}
		}
	}
	for p, c := range files {
		full := filepath.Join(base, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			return err
		}
	}
	git := func(dir string, args ...string) error {
		c := exec.Command("git", args...)
		c.Dir = filepath.Join(base, dir)
		c.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v in %s: %v\n%s", args, dir, err, out)
		}
		return nil
	}
	for _, s := range [][]string{
		{"", "init", "-q", "--bare", "remote.git"},
		{"subsrc", "init", "-q"}, {"subsrc", "add", "."}, {"subsrc", "commit", "-qm", "sub"},
		{"ws/nested", "init", "-q"}, {"ws/nested", "add", "."}, {"ws/nested", "commit", "-qm", "nested"},
		{"ws/hooked", "init", "-q"}, {"ws/hooked", "config", "core.hooksPath", ".githooks"},
		{"ws/hooked", "add", "."}, {"ws/hooked", "commit", "-qm", "hooked"},
		{"ws", "init", "-q"}, {"ws", "remote", "add", "origin", "../remote.git"},
		{"ws", "add", "README", ".claude", ".codex", ".gemini"}, {"ws", "commit", "-qm", "start"},
		{"ws", "submodule", "add", "-q", filepath.Join(base, "subsrc"), "sub"}, {"ws", "commit", "-qm", "submodule"},
		{"ws", "push", "-q", "origin", "main"},
		{"ws", "worktree", "add", "-q", "-b", "side", "../wt"},
	} {
		if err := git(s[0], s[1:]...); err != nil {
			return err
		}
	}
	// The user's own pre-commit hook, executable, in place.
	if err := os.Rename(filepath.Join(base, "ws/.git-hook-pre-commit"), filepath.Join(base, "ws/.git/hooks/pre-commit")); err != nil {
		return err
	}
	os.Chmod(filepath.Join(base, "ws/.git/hooks/pre-commit"), 0o755)
	// Root-only secrets: a 0600 file in /etc, a file in a 0700 directory
	// in /var/lib.
	etc := "/etc/cco-attack-" + tag + ".key"
	dir := "/var/lib/cco-attack-secret-" + tag
	fixture.dirs = append(fixture.dirs, etc, dir)
	if err := os.WriteFile(etc, []byte("CCO-SECRET-etc-"+tag+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(dir+"/key", []byte("CCO-SECRET-varlib-"+tag+"\n"), 0o644); err != nil {
		return err
	}
	fixture.rootOnly = []secret{{"root-only /etc file", etc, "CCO-SECRET-etc-" + tag, true}, {"file in a root-only /var/lib dir", dir + "/key", "CCO-SECRET-varlib-" + tag, true}}
	return nil
}

// probe is the probe agent's parameters (testdata/probe's Params).
type probe struct {
	Mode    string   `json:"mode,omitempty"`
	Code    int      `json:"code,omitempty"`
	Steps   []step   `json:"steps,omitempty"`
	Loot    []string `json:"loot,omitempty"`
	Connect []string `json:"connect,omitempty"`
	Suid    string   `json:"suid,omitempty"`
	Fill    []string `json:"fill,omitempty"`
	FillMax int64    `json:"fill_max,omitempty"`
	Fork    int      `json:"fork,omitempty"`
	Nested  string   `json:"nested,omitempty"`
	// The listener on the login ports, the flood of the egress proxy, and
	// mode "ask"'s address (testdata/probe's Params).
	Listen       []string    `json:"listen,omitempty"`
	ListenAnswer string      `json:"listen_answer,omitempty"`
	Ready        string      `json:"ready,omitempty"`
	Until        string      `json:"until,omitempty"`
	Flood        *flood      `json:"flood,omitempty"`
	Addr         string      `json:"addr,omitempty"`
	Keys         *keys       `json:"keys,omitempty"`
	Swap         *swapParams `json:"swap,omitempty"`
}

type flood struct {
	Count   int      `json:"count"`
	Size    int      `json:"size"`
	Targets []string `json:"targets"`
}

type step struct {
	Name string `json:"name"`
	Sh   string `json:"sh"`
}

func (p probe) arg() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// launchTimeout bounds a session: every one the suite starts ends in a
// few seconds (and a signal must end one within 5), so a longer one hangs.
const launchTimeout = 20 * time.Second

// launch runs the shadow as the world's user in dir with the probe's
// parameters; the whole session is bounded, so a hang fails the test.
func (w *world) launch(t *testing.T, r *jailtest.Root, name, dir string, p probe) jailtest.Result {
	t.Helper()
	// Every session tries the home's credentials; the root-only secrets
	// are tried by their own class, so that each class's verdict is its own.
	if p.Mode == "" {
		for _, s := range w.secrets {
			if !s.rootOnly {
				p.Loot = append(p.Loot, s.path)
			}
		}
	}
	// Not while another test binary binds host sockets the jail would mask.
	defer testenv.Launching(t)()
	return jailtest.Run(t, w.Cmd(r, name, dir, "probe", p.arg()), launchTimeout)
}
