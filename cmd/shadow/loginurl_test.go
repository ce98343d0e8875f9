package main

import (
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/internal/testenv"
)

// The logins of Claude Code and Gemini CLI need no loopback callback through
// the jail (ADR 0054): each prints a URL whose redirect is the vendor's own
// page, which shows a code to paste at the agent's prompt. The real agents
// (the pinned packs, internal/realagents) show it here through the shadow,
// as uid 65534 and as root, offline: egress is off, so the jail has only a
// loopback device and nothing leaves the machine.

// loginRoot is a system root (buildRoot) with place putting the real agent
// at the vendor's current/, and egress off.
func loginRoot(t *testing.T, vendor, sandboxToml string, place func(current string) error) string {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireBwrap(t)
	root, err := buildRoot()
	t.Cleanup(func() { os.RemoveAll(root) })
	if err != nil {
		t.Fatal(err)
	}
	current := filepath.Join(root, "usr/libexec/cco", vendor, "current")
	if err := os.RemoveAll(current); err != nil {
		t.Fatal(err)
	}
	if err := place(current); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/cco/sandbox.toml"), []byte(sandboxToml), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// loopbackRedirect matches a redirect to this machine, escaped or not.
var loopbackRedirect = regexp.MustCompile(`(?i)redirect_uri=(https?(://|%3A%2F%2F))?(localhost|127\.0\.0\.1|\[?::1\]?|%5B%3A%3A1%5D)`)

// loginURL finds the URL that starts with prefix in text, running to the
// first whitespace after it, or, when stop is given, to stop with every
// whitespace dropped (a URL a terminal wrapped); it parses it and checks
// its redirect_uri and state.
func loginURL(t *testing.T, text, prefix, stop, redirect string) {
	t.Helper()
	i := strings.Index(text, prefix)
	if i < 0 {
		t.Fatalf("no %s URL in the output:\n%s", prefix, text)
	}
	raw := text[i:]
	if stop != "" {
		if j := strings.Index(raw, stop); j >= 0 {
			raw = raw[:j]
		}
		raw = strings.Join(strings.Fields(raw), "")
	} else if j := strings.IndexFunc(raw, func(r rune) bool { return r == ' ' || r == '\n' || r == '\r' || r == '\t' }); j >= 0 {
		raw = raw[:j]
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("the login URL %q does not parse: %v", raw, err)
	}
	q := u.Query()
	if got := q.Get("redirect_uri"); got != redirect {
		t.Errorf("redirect_uri %q, want %q (in %s)", got, redirect, raw)
	}
	if q.Get("state") == "" {
		t.Errorf("the login URL carries no state: %s", raw)
	}
	if m := loopbackRedirect.FindString(text); m != "" {
		t.Errorf("the output has a loopback redirect %q:\n%s", m, text)
	}
}

// TestClaudeLoginURLThroughTheJail: `claude auth login` through the shadow
// (stdin a pipe that stays open) prints an authorize URL that redirects to
// platform.claude.com's code page, never to a loopback callback, and asks
// for the code that page shows.
func TestClaudeLoginURLThroughTheJail(t *testing.T) {
	realagents.Require(t)
	pkg := filepath.Join(realagents.Dir(t, realagents.Claude), filepath.Dir(realagents.ClaudeBinary))
	root := loginRoot(t, "claude", "egress = \"off\"\n", func(current string) error { return os.Symlink(pkg, current) })
	const (
		visit  = "If the browser didn't open, visit: "
		prompt = "Paste code here if prompted >"
	)
	for _, u := range []runAs{asNobody, asRoot} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			c := w.cmd(root, "claude", w.ws, "auth", "login")
			c.Env = append(c.Env, "NO_COLOR=1")
			if c.SysProcAttr == nil {
				c.SysProcAttr = &syscall.SysProcAttr{}
			}
			c.SysProcAttr.Setpgid = true
			outPath := filepath.Join(w.base, "claude.out")
			f, err := os.Create(outPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// A stdin that stays open while the test waits: the prompt
			// waits for a code rather than seeing end of input.
			stdin, keep, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer keep.Close()
			defer stdin.Close()
			c.Stdin, c.Stdout, c.Stderr = stdin, f, f
			defer testenv.Launching(t)()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			stdin.Close()
			output := func() string { b, _ := os.ReadFile(outPath); return string(b) }
			text := realagents.WaitFor(t, c, output, 60*time.Second, func(s string) bool {
				return strings.Contains(s, visit) && strings.Contains(s, prompt)
			})
			if !strings.Contains(text, visit) || !strings.Contains(text, prompt) {
				t.Fatalf("claude did not print the login URL and the paste prompt (%q, %q):\n%s", visit, prompt, text)
			}
			loginURL(t, text, "https://claude.com/cai/oauth/authorize?", "", "https://platform.claude.com/oauth/code/callback")
		})
	}
}

// termEscapes are a terminal's control sequences: CSI, OSC, and the
// two-byte ones.
var termEscapes = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()*+][0-9A-Za-z]|\x1b[ -~]`)

// TestGeminiLoginURLThroughTheJail: the interactive gemini on a terminal,
// through the shadow, with "Login with Google" chosen in the user's
// settings, takes its user-code flow: an accounts.google.com URL that
// redirects to codeassist.google.com's code page, and a prompt for the
// code. DISPLAY is set on the host: the jail clears it, and where
// sandbox.toml passes it in (pass_env), in which case Gemini would
// otherwise open the browser and wait on a loopback port, the profile's
// NO_BROWSER keeps the user-code flow.
func TestGeminiLoginURLThroughTheJail(t *testing.T) {
	realagents.Require(t)
	pkg := filepath.Join(realagents.Dir(t, realagents.Gemini), "package")
	node, err := exec.LookPath("node")
	if err == nil {
		node, err = filepath.EvalSymlinks(node)
	}
	if err != nil {
		t.Fatalf("node: %v (fix: apt-get install nodejs)", err)
	}
	// The package in place of the fake agent, with the host's Node as the
	// vendor step links it (gemini.node).
	root := loginRoot(t, "gemini", "egress = \"off\"\n", func(current string) error {
		if err := os.Mkdir(current, 0o755); err != nil {
			return err
		}
		for _, l := range [][2]string{{filepath.Join(pkg, "bundle"), "bundle"}, {filepath.Join(pkg, "package.json"), "package.json"}, {node, "node"}} {
			if err := os.Symlink(l[0], filepath.Join(current, l[1])); err != nil {
				return err
			}
		}
		return nil
	})
	for _, cfg := range []struct{ name, toml string }{
		{"display-cleared", "egress = \"off\"\n"},
		{"display-passed", "egress = \"off\"\npass_env = [\"DISPLAY\", \"WAYLAND_DISPLAY\"]\n"},
	} {
		for _, u := range []runAs{asNobody, asRoot} {
			t.Run(cfg.name+"/"+u.name, func(t *testing.T) {
				withConfig(t, root, cfg.toml)
				env := geminiLogin(t, root, u)
				if len(env) == 0 {
					t.Fatal("no environment of the jailed gemini")
				}
				has := func(prefix string) bool {
					return slices.ContainsFunc(env, func(v string) bool { return strings.HasPrefix(v, prefix) })
				}
				switch {
				case !slices.Contains(env, "NO_BROWSER=true"):
					t.Errorf("the jailed gemini has no NO_BROWSER=true: %q", env)
				case cfg.name == "display-passed" && !slices.Contains(env, "DISPLAY=:0"):
					t.Errorf("pass_env did not pass DISPLAY in: %q", env)
				case cfg.name == "display-cleared" && (has("DISPLAY=") || has("WAYLAND_DISPLAY=")):
					t.Errorf("the jail did not clear the display: %q", env)
				}
			})
		}
	}
}

// geminiLogin starts gemini through the shadow as u, on a terminal, and
// checks that it asks for a login with its user-code flow. It returns the
// jailed gemini's environment, read while it waits for the code.
func geminiLogin(t *testing.T, root string, u runAs) []string {
	t.Helper()
	const (
		visit  = "Please visit the following URL to authorize the application:"
		prompt = "Enter the authorization code:"
	)
	w := newWorld(t, u)
	// "Login with Google", as the user's settings hold it once chosen;
	// the jail shows the file read-only.
	settings := filepath.Join(w.home, ".gemini/settings.json")
	if err := os.WriteFile(settings, []byte(`{"security":{"auth":{"selectedType":"oauth-personal"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(w.home, ".gemini/oauth_creds.json"))
	m, s := openPty(t)
	// Wide, so that the URL is one line; lines are joined anyway.
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: 1000}); err != nil {
		t.Fatal(err)
	}
	os.Chown(s.Name(), u.uid, u.gid)
	c := w.cmd(root, "gemini", w.ws)
	c.Env = append(c.Env, "NO_COLOR=1", "DISPLAY=:0", "WAYLAND_DISPLAY=wayland-0")
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Setsid, c.SysProcAttr.Setctty, c.SysProcAttr.Ctty = true, true, 0
	c.Stdin, c.Stdout, c.Stderr = s, s, s
	var out testenv.SyncBuffer
	defer testenv.Launching(t)()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	output := func() string {
		return strings.ReplaceAll(termEscapes.ReplaceAllString(out.String(), ""), "\r", "")
	}
	var env []string
	text := realagents.WaitFor(t, c, output, 45*time.Second, func(s string) bool {
		i := strings.Index(s, visit)
		if i < 0 || !strings.Contains(s[i:], prompt) {
			return false
		}
		env = descendantEnv(c.Process.Pid, "/bundle/gemini.js")
		return true
	})
	i := strings.Index(text, visit)
	if i < 0 || !strings.Contains(text[i:], prompt) {
		t.Fatalf("gemini did not print the login URL and the code prompt (%q, %q):\n%s", visit, prompt, text)
	}
	loginURL(t, text[i:], "https://accounts.google.com/o/oauth2/v2/auth?", prompt, "https://codeassist.google.com/authcode")
	return env
}

// descendantEnv is the environment of the deepest process below pid (in
// the host's /proc) whose command line has marker: the jailed agent, not
// bwrap, whose arguments name it too.
func descendantEnv(pid int, marker string) []string {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var env []string
	deepest := 0
	for p := range parent {
		q, depth := p, 0
		for q > 1 && q != pid {
			q, depth = parent[q], depth+1
		}
		if q != pid || depth <= deepest {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/environ"); err == nil {
			deepest = depth
			env = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		}
	}
	return env
}
