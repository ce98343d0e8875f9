package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

// argvCheck makes assertions about one bwrap argv: that an option with its
// operands is present (a "pair"), absent, or ordered before another.
type argvCheck struct {
	t    *testing.T
	argv []string
	n    int
}

// find returns the index of the first occurrence of the option op with
// exactly these operands ("*" matches any one), or -1.
func (c *argvCheck) find(op string, operands ...string) int {
	for i := 0; i+len(operands) < len(c.argv); i++ {
		if c.argv[i] == op && slices.EqualFunc(c.argv[i+1:i+1+len(operands)], operands, func(a, w string) bool { return w == "*" || a == w }) {
			// Only before "--": after it come the command's arguments.
			if j := slices.Index(c.argv, "--"); j >= 0 && i > j {
				return -1
			}
			return i
		}
	}
	return -1
}

func (c *argvCheck) has(op string, operands ...string) int {
	c.t.Helper()
	c.n++
	i := c.find(op, operands...)
	if i < 0 {
		c.t.Errorf("argv lacks %s %q\nargv: %q", op, operands, c.argv)
	}
	return i
}

func (c *argvCheck) lacks(op string, operands ...string) {
	c.t.Helper()
	c.n++
	if i := c.find(op, operands...); i >= 0 {
		c.t.Errorf("argv has %s %q at %d, it must not", op, operands, i)
	}
}

func (c *argvCheck) lacksValue(v string) {
	c.t.Helper()
	c.n++
	for i, a := range c.argv {
		if strings.Contains(a, v) {
			c.t.Errorf("argv[%d] = %q contains %q", i, a, v)
		}
	}
}

// order asserts that each listed mount appears, in this order.
func (c *argvCheck) order(mounts ...[]string) {
	c.t.Helper()
	last := -1
	for _, m := range mounts {
		i := c.has(m[0], m[1:]...)
		c.n++
		if i >= 0 && i <= last {
			c.t.Errorf("%q at %d comes before the previous mount at %d", m, i, last)
		}
		if i >= 0 {
			last = i
		}
	}
}

func (c *argvCheck) count(op string, operands ...string) int {
	n := 0
	for i := 0; i+len(operands) < len(c.argv); i++ {
		if c.argv[i] == op && slices.EqualFunc(c.argv[i+1:i+1+len(operands)], operands, func(a, w string) bool { return w == "*" || a == w }) {
			n++
		}
	}
	return n
}

func m(s ...string) []string { return s }

type fixture struct {
	home, ws, rt string
}

// newFixture lays out a host home with both agents' login state and
// credentials, and a git workspace with the agents' settings files.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	base := testenv.WorkDir(t)
	base, _ = filepath.EvalSymlinks(base)
	f := &fixture{home: filepath.Join(base, "home"), ws: filepath.Join(base, "src/proj"), rt: filepath.Join(base, "rt")}
	for _, d := range []string{
		f.home + "/.claude", f.home + "/.codex/packages", f.home + "/.ssh", f.home + "/.config/gh",
		f.ws + "/.git/hooks", f.ws + "/.claude", f.ws + "/.codex", f.ws + "/.gemini", f.rt,
		f.home + "/.cache/cco/claude", f.home + "/.cache/cco/codex", f.home + "/.cache/cco/gemini",
	} {
		testenv.Must(t, os.MkdirAll(d, 0o700))
	}
	for _, p := range []string{
		f.home + "/.claude/settings.json", f.home + "/.codex/config.toml", f.home + "/.claude.json",
		f.ws + "/.git/config", f.ws + "/.claude/settings.json", f.ws + "/.codex/config.toml", f.ws + "/.gemini/settings.json",
	} {
		testenv.Must(t, os.WriteFile(p, []byte("{}"), 0o600))
	}
	// The login-state names every profile shows read-only.
	for _, p := range agent.All() {
		for _, rel := range p.HomeReadOnly {
			if strings.HasSuffix(rel, "/") {
				testenv.Must(t, os.MkdirAll(filepath.Join(f.home, rel), 0o700))
			} else if _, err := os.Lstat(filepath.Join(f.home, rel)); err != nil {
				testenv.Must(t, os.MkdirAll(filepath.Dir(filepath.Join(f.home, rel)), 0o700))
				testenv.Must(t, os.WriteFile(filepath.Join(f.home, rel), []byte("{}"), 0o600))
			}
		}
	}
	// The other agents' protected workspace entries exist: a launch here
	// needs no placeholder for them (the tests below remove Claude Code's,
	// Codex's and Gemini CLI's by name).
	own := func(rel string) bool {
		return strings.HasPrefix(rel, ".claude") || strings.HasPrefix(rel, ".codex") || strings.HasPrefix(rel, ".gemini")
	}
	for _, d := range agent.WorkspaceDirs() {
		testenv.Must(t, os.MkdirAll(filepath.Join(f.ws, d), 0o700))
	}
	for _, rel := range agent.WorkspaceReadOnly() {
		if own(rel) {
			continue
		}
		p := filepath.Join(f.ws, rel)
		if strings.HasSuffix(rel, "/") {
			testenv.Must(t, os.MkdirAll(p, 0o700))
			continue
		}
		testenv.Must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		if _, err := os.Stat(p); err != nil {
			testenv.Must(t, os.WriteFile(p, []byte("{}"), 0o600))
		}
	}
	// What git init leaves, and the two names git follows that it does not
	// make (which a launch otherwise gives placeholders).
	testenv.Must(t, os.MkdirAll(f.ws+"/.git/info", 0o700))
	testenv.Must(t, os.WriteFile(f.ws+"/.git/commondir", []byte(".\n"), 0o600))
	testenv.Must(t, os.WriteFile(f.ws+"/.git/config.worktree", nil, 0o600))
	testenv.Must(t, os.WriteFile(f.home+"/.gitconfig", []byte("[user]\n\tname = Ada L\n\temail = ada@example.org\n[alias]\n\tx = !rm -rf /\n"), 0o600))
	return f
}

func (f *fixture) plan(t *testing.T, name string, uid int, cfg *Config, env []string) (*Spec, *Prep, *argvCheck) {
	t.Helper()
	p, _ := agent.Lookup(name)
	if cfg == nil {
		cfg = &Config{}
	}
	s, pr, err := Plan(&Launch{Profile: p, Config: cfg, Home: f.home, User: "ada", UID: uid, Cwd: f.ws,
		Environ: env, Session: "s1", Args: []string{"--chrome", "-s", "read-only", "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	s.SeccompFD, s.StatusFD, s.DataFD = 3, 4, 6
	makeDirPlaceholders(t, pr)
	return s, pr, &argvCheck{t: t, argv: resolvedArgv(t, s)}
}

// makeDirPlaceholders makes the directories Prepare would make before the
// bind sources are opened: a placeholder may be a tree bound onto itself.
func makeDirPlaceholders(t testing.TB, pr *Prep) {
	t.Helper()
	for _, ph := range pr.Placeholders {
		if ph.Dir {
			testenv.Must(t, os.MkdirAll(ph.Path, 0o700))
		}
	}
}

// resolvedArgv is Argv with each bind source opened as the launcher opens
// it, and each --bind-fd N / --ro-bind-fd N written back as --bind SRC /
// --ro-bind SRC with the path of the file opened for N: assertions name
// paths, and a number that drifted from its source shows as a wrong path.
func resolvedArgv(t testing.TB, s *Spec) []string {
	t.Helper()
	s.BindFD = 100
	files, err := OpenBindSources(s)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	a := Argv(s)
	out := make([]string, 0, len(a))
	for i := 0; i < len(a); i++ {
		if (a[i] == "--bind-fd" || a[i] == "--ro-bind-fd") && i+1 < len(a) {
			n, err := strconv.Atoi(a[i+1])
			if err != nil || n-s.BindFD < 0 || n-s.BindFD >= len(files) {
				t.Fatalf("%s %s names no opened source (%d opened from %d)", a[i], a[i+1], len(files), s.BindFD)
			}
			out = append(out, strings.TrimSuffix(a[i], "-fd"), files[n-s.BindFD].Name())
			i++
			continue
		}
		out = append(out, a[i])
	}
	return out
}

var hostEnv = []string{"TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "COLORTERM=truecolor",
	"SSH_AUTH_SOCK=/tmp/ssh-x/agent.1", "GITHUB_TOKEN=ghp_secret", "SENTINEL=leak", "PATH=/host/bin",
	"HOME=/host/home", "LD_PRELOAD=/evil.so", "XDG_RUNTIME_DIR=/run/user/1000", "AWS_SECRET_ACCESS_KEY=x",
	"CCO_AGENT=codex", "KEEP_ME=1"}

func TestArgvCommon(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"claude", "codex"} {
		t.Run(name, func(t *testing.T) {
			_, _, c := f.plan(t, name, 1000, &Config{PassEnv: []string{"KEEP_ME"}}, hostEnv)
			// Namespaces, capabilities, seccomp, status: before any mount.
			c.order(m("--die-with-parent"), m("--unshare-user"), m("--disable-userns"), m("--unshare-pid"),
				m("--unshare-ipc"), m("--unshare-uts"), m("--unshare-cgroup-try"), m("--cap-drop", "ALL"),
				m("--seccomp", "3"), m("--json-status-fd", "4"), m("--clearenv"), m("--ro-bind", "/", "/"))
			c.has("--unshare-net") // always: only lo inside, traffic leaves through the proxy or not at all
			// Its own session: nothing in the jail can open the user's
			// terminal as /dev/tty; the launcher relays the agent's pty.
			c.has("--new-session")
			c.lacks("--share-net")
			// The host environment: only the allow-list.
			c.has("--setenv", "TERM", "xterm-256color")
			c.has("--setenv", "LANG", "C.UTF-8")
			c.has("--setenv", "LC_ALL", "C")
			c.has("--setenv", "TZ", "UTC")
			c.has("--setenv", "COLORTERM", "truecolor")
			c.has("--setenv", "KEEP_ME", "1")
			c.has("--setenv", "HOME", f.home)
			c.has("--setenv", "USER", "ada")
			c.has("--setenv", "LOGNAME", "ada")
			c.has("--setenv", "PATH", jailPath)
			c.has("--setenv", "GIT_CONFIG_SYSTEM", "/dev/null")
			for _, leak := range []string{"SSH_AUTH_SOCK", "GITHUB_TOKEN", "SENTINEL", "LD_PRELOAD", "AWS_SECRET_ACCESS_KEY", "CCO_AGENT", "XDG_RUNTIME_DIR"} {
				c.lacksValue(leak)
			}
			c.lacksValue("/host/bin")
			c.lacksValue("ghp_secret")
			if n := c.count("--setenv", "HOME", f.home); n != 1 {
				t.Errorf("HOME set %d times", n)
			}
			// The home and every bind come while the mount table is short;
			// /dev, /proc and the private socket directories follow. A
			// runtime directory below /run needs no tmpfs of its own.
			c.order(m("--ro-bind", "/", "/"), m("--perms", "0700", "--tmpfs", f.home), m("--bind", f.ws, f.ws),
				m("--remount-ro", f.home), m("--dev", "/dev"), m("--proc", "/proc"), m("--tmpfs", "/tmp"),
				m("--tmpfs", "/run"))
			c.lacks("--tmpfs", "/run/user")
			c.lacks("--tmpfs", "/run/user/1000")
			// The workspace, then its command-bearing files read-only.
			// The protected trees bound onto themselves, then their files.
			c.order(m("--bind", f.ws, f.ws),
				m("--bind", f.ws+"/.claude", f.ws+"/.claude"), m("--bind", f.ws+"/.codex", f.ws+"/.codex"),
				m("--bind", f.ws+"/.git", f.ws+"/.git"),
				m("--ro-bind", f.ws+"/.claude/settings.json", f.ws+"/.claude/settings.json"),
				m("--ro-bind", f.ws+"/.codex/config.toml", f.ws+"/.codex/config.toml"),
				m("--ro-bind", f.ws+"/.git/config", f.ws+"/.git/config"),
				m("--ro-bind", f.ws+"/.git/commondir", f.ws+"/.git/commondir"),
				m("--ro-bind", f.ws+"/.git/hooks", f.ws+"/.git/hooks"),
				m("--ro-bind", f.ws+"/.git/info", f.ws+"/.git/info"))
			// The curated gitconfig; the marker last, after /run's tmpfs.
			// Both are made by bwrap from descriptors (the gitconfig 6, the
			// stand-in over the missing settings.local.json 7, the marker 8):
			// nothing of them is on the host.
			c.has("--perms", "0444", "--ro-bind-data", "7", f.ws+"/.claude/settings.local.json")
			c.order(m("--perms", "0700", "--tmpfs", f.home), m("--perms", "0444", "--ro-bind-data", "6", f.home+"/.gitconfig"))
			c.order(m("--bind", f.home+"/.cache/cco/"+name, f.home+"/.cache"), m("--bind", f.ws, f.ws), m("--symlink", ".cache/cco-npm", f.home+"/.npm"), m("--remount-ro", f.home), m("--tmpfs", "/run"),
				m("--perms", "0444", "--ro-bind-data", "8", MarkerPath), m("--chdir", f.ws))
			// Credentials of the home are never bound.
			c.lacksValue(f.home + "/.ssh")
			c.lacksValue(f.home + "/.config/gh")
			c.lacks("--bind", f.home, f.home)
			c.lacks("--ro-bind", f.home, f.home)
			// Root-only masks are absent for a user.
			c.lacks("--ro-bind", "/dev/null", "/etc/shadow")
			c.lacks("--tmpfs", "/root", "--remount-ro", "/root")
			// The command: the helper, then the vendor binary, then the rewritten arguments.
			p, _ := agent.Lookup(name)
			i := slices.Index(c.argv, "--")
			want := []string{HelperPath, "exec", "--", p.Binary}
			if i < 0 || !slices.Equal(c.argv[i+1:i+5], want) {
				t.Errorf("command = %q, want prefix %q", c.argv[i+1:], want)
			}
			c.n++
			if c.argv[len(c.argv)-1] != "hi" || (name == "claude" && slices.Contains(c.argv[i:], "--chrome")) ||
				(name == "codex" && slices.Contains(c.argv[i:], "read-only")) {
				t.Errorf("user args not rewritten: %q", c.argv[i:])
			}
			t.Logf("%s: %d argv assertions", name, c.n)
		})
	}
}

func TestArgvClaude(t *testing.T) {
	f := newFixture(t)
	_, pr, c := f.plan(t, "claude", 1000, nil, hostEnv)
	h := f.home
	c.order(m("--perms", "0700", "--tmpfs", h), m("--bind", h+"/.claude", h+"/.claude"),
		m("--ro-bind", h+"/.claude/settings.json", h+"/.claude/settings.json"),
		m("--ro-bind", h+"/.claude/plugins", h+"/.claude/plugins"),
		m("--bind", f.ws, f.ws), m("--tmpfs", h+"/.local/share/claude"))
	c.has("--ro-bind", SystemRoot+"/usr/libexec/cco/claude/current/claude", h+"/.local/bin/claude")
	c.has("--setenv", "CLAUDE_CONFIG_DIR", h+"/.claude")
	c.has("--setenv", "DISABLE_AUTOUPDATER", "1")
	c.has("--setenv", "DISABLE_UPDATES", "1")
	c.lacks("--setenv", "CODEX_UPDATE_DISABLED", "1")
	c.lacksValue(h + "/.codex")
	c.lacks("--bind", h+"/.claude.json", h+"/.claude.json") // a file bind breaks rename (EBUSY)
	c.lacks("--ro-bind", h+"/.claude.json", h+"/.claude.json")
	i := slices.Index(c.argv, "--")
	c.n++
	if !slices.Equal(c.argv[i+4:], []string{SystemRoot + "/usr/libexec/cco/claude/current/claude", "--no-chrome", "-s", "read-only", "hi"}) {
		t.Errorf("claude command %q", c.argv[i+1:])
	}
	c.n++
	if !slices.Equal(pr.CarryOver, [][2]string{{h + "/.claude.json", h + "/.claude/.claude.json"}}) {
		t.Errorf("carry over %q", pr.CarryOver)
	}
	c.n++
	if !slices.Equal(pr.Watched, []string{h + "/.claude/.claude.json"}) {
		t.Errorf("watched %q", pr.Watched)
	}
	t.Logf("%d argv assertions", c.n)
}

func TestArgvCodex(t *testing.T) {
	f := newFixture(t)
	_, _, c := f.plan(t, "codex", 1000, nil, hostEnv)
	h := f.home
	c.order(m("--perms", "0700", "--tmpfs", h), m("--bind", h+"/.codex", h+"/.codex"),
		m("--ro-bind", h+"/.codex/config.toml", h+"/.codex/config.toml"), m("--ro-bind", h+"/.codex/.env", h+"/.codex/.env"),
		m("--bind", f.ws, f.ws), m("--tmpfs", h+"/.codex/packages"))
	c.has("--setenv", "CODEX_UPDATE_DISABLED", "1")
	c.lacks("--setenv", "DISABLE_UPDATES", "1")
	c.lacks("--setenv", "CLAUDE_CONFIG_DIR", h+"/.claude")
	c.lacksValue(h + "/.claude/")
	c.lacks("--bind", h+"/.claude", h+"/.claude")
	c.lacksValue(h + "/.local/bin/claude")
	c.lacksValue("/.claude.json")
	// The workspace's claude settings are protected in a codex jail too.
	c.has("--ro-bind", f.ws+"/.claude/settings.json", f.ws+"/.claude/settings.json")
	i := slices.Index(c.argv, "--")
	c.n++
	if !slices.Equal(c.argv[i+4:], []string{SystemRoot + "/usr/libexec/cco/codex-dist/current/bin/codex", "--dangerously-bypass-approvals-and-sandbox", "--chrome", "hi"}) {
		t.Errorf("codex command %q", c.argv[i+1:])
	}
	t.Logf("%d argv assertions", c.n)
}

func TestArgvRoot(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"claude", "codex"} {
		_, _, c := f.plan(t, name, 0, nil, nil)
		c.has("--cap-drop", "ALL")
		ws := c.has("--bind", f.ws, f.ws)
		for _, p := range []string{"/etc/shadow", "/etc/gshadow", "/etc/sudoers"} {
			if _, err := os.Stat(p); err == nil {
				if i := c.has("--ro-bind", "/dev/null", p); i < ws {
					t.Errorf("mask of %s at %d precedes the workspace at %d", p, i, ws)
				}
			}
		}
		keys, _ := filepath.Glob("/etc/ssh/*_key")
		for _, k := range keys {
			c.has("--ro-bind", "/dev/null", k)
		}
		for _, d := range []string{"/etc/sudoers.d", "/root"} {
			if _, err := os.Stat(d); err == nil {
				if i := c.has("--tmpfs", d, "--remount-ro", d); i < ws {
					t.Errorf("mask of %s precedes the workspace", d)
				}
			}
		}
		t.Logf("%s as root: %d argv assertions", name, c.n)
	}
}

func TestArgvRootHomeIsRootNotMasked(t *testing.T) {
	got := rootMasks("/root")
	for _, m := range got {
		if m.Path == "/root" {
			t.Fatal("/root masked although it is the home")
		}
	}
}

func TestArgvMissingProtectedFilesGetPlaceholders(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{f.ws + "/.git/hooks", f.ws + "/.git/config", f.ws + "/.git/info", f.ws + "/.git/commondir", f.ws + "/.git/config.worktree",
		f.ws + "/.claude/settings.json", f.home + "/.codex/packages"} {
		testenv.Must(t, os.RemoveAll(p))
	}
	testenv.Must(t, os.RemoveAll(f.ws+"/.codex"))
	s, pr, c := f.plan(t, "claude", 1000, nil, nil)
	// Stand-ins made by bwrap, in memory: an empty read-only directory for
	// hooks and for a missing agent directory, an empty file, "{}" for
	// JSON, "." for commondir; the descriptors count from 6 in argv order
	// (the gitconfig first), the marker last.
	c.order(m("--perms", "0444", "--ro-bind-data", "6", f.home+"/.gitconfig"), m("--bind", f.ws, f.ws),
		m("--tmpfs", f.ws+"/.codex", "--remount-ro", f.ws+"/.codex"),
		m("--perms", "0444", "--ro-bind-data", "7", f.ws+"/.claude/settings.json"),
		m("--perms", "0444", "--ro-bind-data", "8", f.ws+"/.claude/settings.local.json"),
		m("--perms", "0444", "--ro-bind-data", "9", f.ws+"/.git/config"),
		m("--perms", "0444", "--ro-bind-data", "10", f.ws+"/.git/config.worktree"),
		m("--perms", "0444", "--ro-bind-data", "11", f.ws+"/.git/commondir"),
		m("--tmpfs", f.ws+"/.git/hooks", "--remount-ro", f.ws+"/.git/hooks"),
		m("--perms", "0444", "--ro-bind-data", "12", MarkerPath))
	data := DataFiles(s)
	wantData := []string{"", "{}\n", "{}\n", "", "", ".\n"}
	// The jail's /etc/profile, where the host has one, follows the marker.
	if len(data) < 7 || len(data) > 8 || !strings.Contains(string(data[6]), `"agent":"claude"`) {
		t.Errorf("data files %q", data)
	} else {
		for i, w := range wantData[1:] {
			if string(data[i+1]) != w {
				t.Errorf("data file %d = %q, want %q", i+1, data[i+1], w)
			}
		}
	}
	// A missing agent directory is an empty read-only directory in the
	// jail, over a placeholder: a session cannot create it.
	want := []Placeholder{{Path: f.ws + "/.codex", Dir: true},
		{Path: f.ws + "/.claude/settings.json", Data: "{}\n"}, {Path: f.ws + "/.claude/settings.local.json", Data: "{}\n"},
		{Path: f.ws + "/.git/config"}, {Path: f.ws + "/.git/config.worktree"}, {Path: f.ws + "/.git/commondir", Data: ".\n"},
		{Path: f.ws + "/.git/hooks", Dir: true}, {Path: f.ws + "/.git/info", Dir: true}}
	for _, w := range want {
		if !slices.Contains(pr.Placeholders, w) {
			t.Errorf("placeholders %v lack %v", pr.Placeholders, w)
		}
	}
	_, pr, _ = f.plan(t, "codex", 1000, nil, nil)
	if !slices.Contains(pr.Placeholders, Placeholder{Path: f.home + "/.codex/packages", Dir: true}) {
		t.Errorf("codex placeholders %v lack ~/.codex/packages", pr.Placeholders)
	}
}

// TestLoginStateStandIns: the login-state names the vendor loads at start,
// missing, are made once and kept (not placeholders), then bound
// read-only; a link there refuses the launch.
func TestLoginStateStandIns(t *testing.T) {
	f := newFixture(t)
	testenv.Must(t, os.RemoveAll(f.home+"/.codex/.env"))
	testenv.Must(t, os.RemoveAll(f.home+"/.codex/rules"))
	p, _ := agent.Lookup("codex")
	l := &Launch{Profile: p, Config: &Config{}, Home: f.home, User: "ada", Cwd: f.ws, Session: "s"}
	s, pr, err := Plan(l)
	testenv.Must(t, err)
	for _, w := range []Placeholder{{Path: f.home + "/.codex/.env"}, {Path: f.home + "/.codex/rules", Dir: true}} {
		if !slices.Contains(pr.StandIns, w) {
			t.Errorf("stand-ins %v lack %v", pr.StandIns, w)
		}
		if slices.ContainsFunc(pr.Placeholders, func(ph Placeholder) bool { return ph.Path == w.Path }) {
			t.Errorf("%s is a placeholder, removed after the session: it must stay", w.Path)
		}
	}
	sess, err := Prepare(f.home, "", pr)
	testenv.Must(t, err)
	sess.Finish()
	for _, p := range []string{f.home + "/.codex/.env", f.home + "/.codex/rules"} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was not made, or not kept after the session: %v", p, err)
		}
	}
	c := &argvCheck{t: t, argv: resolvedArgv(t, s)}
	c.has("--ro-bind", f.home+"/.codex/.env", f.home+"/.codex/.env")
	c.has("--ro-bind", f.home+"/.codex/rules", f.home+"/.codex/rules")
	testenv.Must(t, os.RemoveAll(f.home+"/.codex/hooks.json"))
	testenv.Must(t, os.Symlink(f.home+"/.ssh", f.home+"/.codex/hooks.json"))
	if _, _, err := Plan(l); err == nil || !strings.Contains(err.Error(), "hooks.json is a symbolic link") {
		t.Errorf("a link at a login-state name: %v", err)
	}
}

func TestArgvProtectedLinkRefused(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("codex")
	for _, rel := range []string{".git/config", ".git/hooks", ".codex/config.toml", ".claude", ".git"} {
		t.Run(rel, func(t *testing.T) {
			f := newFixture(t)
			target := f.home + "/.ssh"
			testenv.Must(t, os.RemoveAll(f.ws+"/"+rel))
			testenv.Must(t, os.Symlink(target, f.ws+"/"+rel))
			_, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
			if err == nil || !strings.Contains(err.Error(), f.ws+"/"+rel+" is a symbolic link") || !strings.Contains(err.Error(), "fix: rm "+f.ws+"/"+rel) {
				t.Errorf("a link at %s: %v", rel, err)
			}
		})
	}
	// A link below a bind source is refused when the source is opened.
	testenv.Must(t, os.Rename(f.home+"/.codex", f.home+"/real-codex"))
	testenv.Must(t, os.Symlink(f.home+"/real-codex", f.home+"/.codex"))
	s, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws})
	if err == nil {
		_, err = OpenBindSources(s)
	}
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a linked login directory: %v", err)
	}
}

func TestArgvWritableAndForge(t *testing.T) {
	f := newFixture(t)
	extra := filepath.Join(filepath.Dir(f.ws), "cache")
	_, _, c := f.plan(t, "claude", 1000, &Config{AllowWrite: []string{extra}, Forge: []string{"github"}}, nil)
	// A missing allow_write entry is left out once its source is opened.
	c.lacksValue(extra)
	testenv.Must(t, os.MkdirAll(extra, 0o700))
	testenv.Must(t, os.WriteFile(f.home+"/.config/gh/config.yml", []byte("pager: less\n"), 0o600))
	_, _, c = f.plan(t, "claude", 1000, &Config{AllowWrite: []string{extra}, Forge: []string{"github"}}, nil)
	c.order(m("--perms", "0700", "--tmpfs", f.home), m("--bind", f.home+"/.config/gh", f.home+"/.config/gh"),
		m("--bind", extra, extra), m("--bind", f.ws, f.ws),
		m("--ro-bind", f.home+"/.config/gh/config.yml", f.home+"/.config/gh/config.yml"))
	g := string(Gitconfig(f.home, []string{"github"}))
	if !strings.Contains(g, `helper = "!gh auth git-credential"`) || !strings.Contains(g, `[credential "https://github.com"]`) {
		t.Errorf("gitconfig lacks the github helper:\n%s", g)
	}
}

func TestGitconfigCurated(t *testing.T) {
	f := newFixture(t)
	g := string(Gitconfig(f.home, nil))
	for _, want := range []string{"[user]", `name = "Ada L"`, `email = "ada@example.org"`} {
		if !strings.Contains(g, want) {
			t.Errorf("gitconfig lacks %q:\n%s", want, g)
		}
	}
	for _, bad := range []string{"alias", "rm -rf", "credential", "helper"} {
		if strings.Contains(g, bad) {
			t.Errorf("gitconfig has %q:\n%s", bad, g)
		}
	}
}

func TestArgvSkipPermissions(t *testing.T) {
	f := newFixture(t)
	_, _, c := f.plan(t, "claude", 1000, &Config{ClaudeSkipPermissions: true}, nil)
	i := slices.Index(c.argv, "--")
	if !slices.Contains(c.argv[i:], "--dangerously-skip-permissions") {
		t.Errorf("no --dangerously-skip-permissions: %q", c.argv[i:])
	}
	_, _, c = f.plan(t, "claude", 1000, nil, nil)
	i = slices.Index(c.argv, "--")
	if slices.Contains(c.argv[i:], "--dangerously-skip-permissions") {
		t.Errorf("--dangerously-skip-permissions without the setting: %q", c.argv[i:])
	}
}

// A private tree that holds a later mount (a home below /tmp) is mounted
// before it, and a private tree below /dev after bwrap's /dev; the others
// after every bind.
func TestArgvPrivateOrder(t *testing.T) {
	s := &Spec{Private: []string{"/tmp", "/run", "/dev/shm"}, Home: "/tmp/h", Workspace: "/tmp/h/w",
		HomeBinds: []Bind{{Src: "/tmp/h/.a", Dst: "/tmp/h/.a"}}, BindFD: 3, Command: []string{"/bin/agent"}}
	c := &argvCheck{t: t, argv: Argv(s)}
	c.order(m("--ro-bind", "/", "/"), m("--tmpfs", "/tmp"), m("--perms", "0700", "--tmpfs", "/tmp/h"),
		m("--bind-fd", "4", "/tmp/h/w"), m("--remount-ro", "/tmp/h"), m("--dev", "/dev"), m("--proc", "/proc"),
		m("--tmpfs", "/run"), m("--tmpfs", "/dev/shm"))
	if early, late := s.splitPrivate(); !slices.Equal(early, []string{"/tmp"}) || !slices.Equal(late, []string{"/run", "/dev/shm"}) {
		t.Errorf("splitPrivate = %q, %q", early, late)
	}
}

func TestArgvPure(t *testing.T) {
	s := &Spec{Env: []string{"A=1", "B=x=y"}, Private: []string{"/tmp"}, Home: "/h",
		HomeBinds: []Bind{{Src: "/h/.a", Dst: "/h/.a"}}, Workspace: "/w",
		ReadOnly: []Bind{{Src: "/w/.git/config", Dst: "/w/.git/config"}},
		Masks:    []Mask{{Path: "/h/.a/p", Kind: MaskTmpfs}, {Path: "/etc/shadow", Kind: MaskFile}, {Path: "/root", Kind: MaskDir}},
		Scratch:  []string{"/h/.cache"}, Marker: []byte("{}"), DataFD: 5, BindFD: 7, Chdir: "/w/sub", Command: []string{"/helper", "exec", "--", "/bin/agent", "--", "-x"}, UnshareNet: true}
	want := []string{"--die-with-parent", "--new-session", "--unshare-user", "--disable-userns", "--unshare-pid", "--unshare-ipc",
		"--unshare-uts", "--unshare-cgroup-try", "--unshare-net", "--cap-drop", "ALL", "--clearenv",
		"--setenv", "A", "1", "--setenv", "B", "x=y", "--ro-bind", "/", "/",
		"--perms", "0700", "--tmpfs", "/h", "--bind-fd", "7", "/h/.a", "--bind-fd", "8", "/w",
		"--ro-bind-fd", "9", "/w/.git/config", "--tmpfs", "/h/.a/p", "--ro-bind", "/dev/null", "/etc/shadow",
		"--tmpfs", "/root", "--remount-ro", "/root", "--tmpfs", "/h/.cache", "--remount-ro", "/h",
		"--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--remount-ro", "/dev", "--perms", "0444", "--ro-bind-data", "5", MarkerPath, "--chdir", "/w/sub",
		"--", "/helper", "exec", "--", "/bin/agent", "--", "-x"}
	a := Argv(s)
	if !slices.Equal(a, want) {
		t.Errorf("Argv =\n%q\nwant\n%q", a, want)
	}
	if b := Argv(s); !slices.Equal(a, b) {
		t.Error("Argv is not deterministic")
	}
}

func TestArgvDirectCommand(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("codex")
	s, _, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, Cwd: f.ws, Args: []string{"exec", "x"}, Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{SystemRoot + p.Binary, "exec", "--dangerously-bypass-approvals-and-sandbox", "x"}
	if !slices.Equal(s.Command, want) {
		t.Errorf("direct command %q, want %q", s.Command, want)
	}
}
