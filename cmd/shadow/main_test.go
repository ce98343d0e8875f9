package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/engine"
	"github.com/cco-dev/cco/sandbox/seccomp"
)

// rootEnv names the system root for the in-process commands of the
// testscript scenarios; only this test binary reads it.
const rootEnv = "CCO_TEST_SYSTEM_ROOT"

func TestMain(m *testing.M) {
	if r := os.Getenv(rootEnv); r != "" {
		sandbox.SystemRoot = r
	}
	cmd := func() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) }
	testscript.Main(wrapM{m}, map[string]func(){"claude": cmd, "codex": cmd, "sandbox-helper": cmd})
}

// wrapM removes the shared root after the tests.
type wrapM struct{ m *testing.M }

func (w wrapM) Run() int {
	code := w.m.Run()
	if shared.root != "" {
		os.RemoveAll(shared.root)
	}
	return code
}

// shared is the system root every jail test uses: the shadow built with
// its SystemRoot linked in (the production binary honours no variable for
// it), installed as claude, codex and the helper, the egress proxy, and the
// fake agent as both vendor binaries. It lives under /var/tmp, because the jail's /tmp is
// private and the helper must be visible inside.
var shared struct {
	once sync.Once
	root string
	fake string
	err  error
}

func goTool() string { return testenv.GoTool() }

func systemRoot(t testing.TB) string {
	t.Helper()
	testenv.RequireBwrap(t)
	shared.once.Do(func() { shared.root, shared.err = buildRoot() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.root
}

// testRoots holds the system roots the tests build: not /tmp or /var/tmp,
// which are private in the jail.
const testRoots = "/var/lib/cco-test-roots"

func buildRoot() (string, error) {
	os.MkdirAll(testRoots, 0o755)
	root, err := os.MkdirTemp(testRoots, "cco-shadow-test-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return root, err
	}
	dirs := []string{"usr/local/bin", "usr/libexec/cco/guard", "usr/bin", "etc/cco", "bin"}
	for _, p := range agent.All() {
		dirs = append(dirs, filepath.Dir(p.Binary))
		if p.Interpreter != "" {
			dirs = append(dirs, filepath.Dir(p.Interpreter))
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return root, err
		}
	}
	shadow := filepath.Join(root, "usr/local/bin/claude")
	// Static, as the release builds it (no dynamic loader at every start).
	build := exec.Command(goTool(), "build", "-ldflags", "-X github.com/cco-dev/cco/sandbox.SystemRoot="+root+engine.LinkFlag(os.Getenv(engine.EnvVar)),
		"-o", shadow, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return root, fmt.Errorf("building the shadow: %v\n%s", err, out)
	}
	proxy := filepath.Join(root, "usr/libexec/cco/egress-proxy")
	if out, err := exec.Command(goTool(), "build", "-o", proxy, "../egress-proxy").CombinedOutput(); err != nil {
		return root, fmt.Errorf("building the egress proxy: %v\n%s", err, out)
	}
	fake := filepath.Join(root, "bin/fakeagent")
	if out, err := exec.Command(goTool(), "build", "-o", fake, "./testdata/fakeagent").CombinedOutput(); err != nil {
		return root, fmt.Errorf("building the fake agent: %v\n%s", err, out)
	}
	// The shadow under every agent's name, the fake agent as every vendor
	// binary; an interpreter (the link the vendor step makes to
	// <agent>.node) is a shell that runs the script, here the fake agent.
	links := [][2]string{{shadow, "usr/libexec/cco/sandbox-helper"}}
	for _, p := range agent.All() {
		if l := "usr/local/bin/" + p.Name; filepath.Join(root, l) != shadow {
			links = append(links, [2]string{shadow, l})
		}
		links = append(links, [2]string{fake, p.Binary})
	}
	for _, l := range links {
		if err := os.Link(l[0], filepath.Join(root, l[1])); err != nil {
			return root, err
		}
	}
	for _, p := range agent.All() {
		if p.Interpreter == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(root, p.Interpreter), []byte("#!/bin/sh\nexec \"$@\"\n"), 0o755); err != nil {
			return root, err
		}
	}
	for _, g := range []string{"session-start", "prompt-gate"} {
		if err := os.WriteFile(filepath.Join(root, "usr/libexec/cco/guard", g), []byte("#!/bin/sh\nexec /usr/libexec/cco/sandbox-helper guard "+g+"\n"), 0o755); err != nil {
			return root, err
		}
	}
	if err := os.Symlink("/usr/bin/bwrap", filepath.Join(root, "usr/bin/bwrap")); err != nil {
		return root, err
	}
	// A setuid-root program, for "a setuid binary does not elevate".
	id, err := os.ReadFile("/usr/bin/id")
	if err == nil {
		p := filepath.Join(root, "bin/suid-id")
		if err = os.WriteFile(p, id, 0o755); err == nil {
			err = os.Chmod(p, 0o4755)
		}
	}
	return root, err
}

// runAs is who runs the shadow: root, or nobody with a home of its own.
type runAs struct {
	name     string
	uid, gid int
}

var (
	asRoot   = runAs{"root", 0, 0}
	asNobody = runAs{"nobody", 65534, 65534}
)

// world is a host home and workspaces for one user.
type world struct {
	base, home, ws, ws2, outside string
	u                            runAs
}

func newWorld(t *testing.T, u runAs) *world {
	t.Helper()
	// Outside /tmp and /var/tmp: the jail refuses workspaces there.
	base := testenv.WorkDir(t)
	// The link target lies outside the workspace on a tree the jail shows
	// read-only (/tmp and /var/tmp are private inside), and the user may
	// write it on the host: only the jail stops the write.
	os.MkdirAll(testRoots, 0o755)
	out, err := os.CreateTemp(testRoots, "cco-outside-")
	if err != nil {
		t.Fatal(err)
	}
	out.WriteString("outside")
	out.Close()
	os.Chown(out.Name(), u.uid, u.gid)
	t.Cleanup(func() { os.Remove(out.Name()) })
	w := &world{base: base, home: base + "/home", ws: base + "/ws", ws2: base + "/ws2", outside: out.Name(), u: u}
	files := map[string]string{
		"home/.claude/settings.json":     `{"hooks":{}}`,
		"home/.claude/.credentials.json": "claude-secret",
		"home/.claude.json":              `{"carried":true}`,
		"home/.codex/auth.json":          "codex-secret",
		"home/.codex/config.toml":        "model = \"o3\"\n",
		"home/.codex/packages/pkgfile":   "pkg",
		"home/.gemini/settings.json":     `{"hooks":{}}`,
		"home/.gemini/oauth_creds.json":  "gemini-secret",
		"home/.ssh/id_ed25519":           "ssh-secret",
		"home/.aws/credentials":          "aws-secret",
		"home/.netrc":                    "machine x password y",
		"home/.config/gh/hosts.yml":      "gh-secret",
		"home/.gitconfig":                "[user]\n\tname = Nobody Tester\n\temail = nobody@example.org\n",
		"ws/.git/config":                 "[core]\n",
		"ws/.git/hooks/pre-commit":       "#!/bin/sh\n",
		"ws/.claude/settings.json":       "{}",
		"ws/.codex/config.toml":          "",
		"ws/.gemini/settings.json":       "{}",
		"ws2/.git/HEAD":                  "ref: refs/heads/main\n",
		"ws2/.claude/.keep":              "",
	}
	for p, c := range files {
		full := filepath.Join(base, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(w.outside, w.ws+"/escape"); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })
	os.Chmod(w.home, 0o700)
	return w
}

// shadow runs the installed shadow under name as the world's user.
func (w *world) cmd(root, name, dir string, args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(root, "usr/local/bin", name), args...)
	c.Dir = dir
	c.Env = []string{"HOME=" + w.home, "USER=" + w.u.name, "PATH=/usr/bin:/bin", "TERM=xterm", "LANG=C.UTF-8",
		"SENTINEL_VAR=leak", "SSH_AUTH_SOCK=/tmp/ssh-XXXX/agent.1", "GITHUB_TOKEN=ghp_leak", "XDG_RUNTIME_DIR=/run/user/4242"}
	if w.u.uid != 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(w.u.uid), Gid: uint32(w.u.gid)}}
	}
	return c
}

type result struct {
	code           int
	stdout, stderr string
	report         map[string]string
}

func runCmd(t *testing.T, c *exec.Cmd) result {
	t.Helper()
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	if c.Stdin == nil {
		c.Stdin = strings.NewReader("")
	}
	defer testenv.Launching(t)()
	err := c.Run()
	r := result{stdout: o.String(), stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", c.Args, err)
	}
	if strings.HasPrefix(r.stdout, "{") {
		if err := json.Unmarshal([]byte(r.stdout), &r.report); err != nil {
			t.Fatalf("report: %v\n%s", err, r.stdout)
		}
	}
	return r
}

func params(p map[string]any) string {
	b, _ := json.Marshal(p)
	return string(b)
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var _ = io.Discard

// bareBwrap is bwrap running a Spec itself, with the descriptors the shadow
// hands it: the seccomp program on 3, a status sink on 4, the jail's data
// files from 5 and the bind sources after them.
type bareBwrap struct {
	argv  []string
	files [][]byte // the contents of 3, then of 5 on
	spec  *sandbox.Spec
	dir   string
}

func newBareBwrap(t testing.TB, spec *sandbox.Spec, dir string) *bareBwrap {
	t.Helper()
	prog, err := seccomp.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	data := sandbox.DataFiles(spec)
	spec.SeccompFD, spec.StatusFD, spec.DataFD, spec.BindFD = 3, 4, 5, 5+len(data)
	srcs, err := sandbox.OpenBindSources(spec) // decides which Try binds are left out
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range srcs {
		f.Close()
	}
	return &bareBwrap{argv: sandbox.Argv(spec), files: append([][]byte{prog}, data...), spec: spec, dir: dir}
}

// cmd is one run's command; done closes this side's descriptors after it.
func (b *bareBwrap) cmd(t testing.TB) (c *exec.Cmd, done func()) {
	t.Helper()
	var files []*os.File
	for i, d := range b.files {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.Write(d)
		w.Close()
		files = append(files, r)
		if i == 0 {
			null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, null)
		}
	}
	srcs, err := sandbox.OpenBindSources(b.spec)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, srcs...)
	c = exec.Command("/usr/bin/bwrap", b.argv...)
	c.ExtraFiles, c.Dir = files, b.dir
	return c, func() {
		for _, f := range files {
			f.Close()
		}
	}
}
