package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox"
)

// A developer's day in the jail, with real tools, offline: the user's own
// toolchains from the home, read-only; Go's module and build caches and
// npm's cache lasting from one session to the next, in a tree of the
// agent's own; the host's caches never touched; each agent its own key;
// a start in the home. As root and as an unprivileged user.

func TestDeveloperDay(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	goBin := hostGo(t)
	for _, u := range []runAs{asRoot, asNobody} {
		t.Run(u.name, func(t *testing.T) {
			w := newWorld(t, u)
			day := newDevWorld(t, w)
			t.Run("toolchains", func(t *testing.T) { toolchainsVisible(t, root, w, day) })
			t.Run("caches", func(t *testing.T) { cachesLast(t, root, w, day, goBin) })
			t.Run("keys", func(t *testing.T) { keysPerAgent(t, root, w) })
			t.Run("home", func(t *testing.T) { startInHome(t, root, w) })
		})
	}
}

// hostGo is the go command, which must lie where every jail sees it.
func hostGo(t *testing.T) string {
	p, err := exec.LookPath(testenv.GoTool())
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	if p, err = filepath.EvalSymlinks(p); err != nil || !strings.HasPrefix(p, "/usr/") {
		t.Fatalf("the go command %s must lie under /usr for the jail to run it (install Go in /usr/local/go)", p)
	}
	return p
}

// devWorld is a world with a developer's home: toolchains installed the
// way rustup, nvm and uv install them, host caches with sentinels, a Go
// module proxy and an npm tarball on disk, and a Go project.
type devWorld struct {
	proxy, tarball string
	hostPath       string
	hostCaches     []string
}

func newDevWorld(t *testing.T, w *world) *devWorld {
	d := &devWorld{proxy: filepath.Join(w.base, "goproxy"), tarball: filepath.Join(w.base, "cco-test-pkg-1.0.0.tgz")}
	script := func(name string) string { return "#!/bin/sh\necho " + name + "-from-home\n" }
	files := map[string]string{
		".cargo/bin/cargo":                            script("cargo"),
		".cargo/credentials.toml":                     "[registry]\ntoken = \"cargo-secret\"\n",
		".rustup/toolchains/stable/bin/rustc":         script("rustc"),
		".nvm/versions/node/v20.0.0/bin/nodefake":     script("node"),
		".nvm/versions/node/v20.0.0/etc/npmrc":        "//registry.example/:_authToken=npm-secret\n",
		".local/bin/uvfake":                           script("uv"),
		".local/share/uv/python/cpython-3.12/bin/py3": script("python"),
		".hidden-tools/bin/hiddenfake":                script("hidden"),
		"go/pkg/mod/cache/download/sentinel":          "host module cache",
		".npm/sentinel":                               "host npm cache",
		".cache/go-build/sentinel":                    "host build cache",
	}
	for rel, c := range files {
		p := filepath.Join(w.home, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(c), 0o755))
	}
	d.hostCaches = []string{filepath.Join(w.home, "go"), filepath.Join(w.home, ".npm"), filepath.Join(w.home, ".cache", "go-build")}
	// The host PATH: three toolchains, a relative entry, one the jail
	// does not show, and the system.
	d.hostPath = strings.Join([]string{w.home + "/.cargo/bin", w.home + "/.nvm/versions/node/v20.0.0/bin", "bin",
		w.home + "/.hidden-tools/bin", w.home + "/.local/bin", "/usr/bin", "/bin"}, ":")

	writeGoProxy(t, d.proxy, "example.com/hello", "v1.0.0", map[string]string{
		"go.mod":   "module example.com/hello\n\ngo 1.21\n",
		"hello.go": "package hello\n\nfunc Greeting() string { return \"hello from the module\" }\n",
	})
	must(t, os.WriteFile(d.tarball, npmTarball(t, map[string]string{
		"package.json": `{"name":"cco-test-pkg","version":"1.0.0","main":"index.js"}`,
		"index.js":     "module.exports = 'from the tarball';\n",
	}), 0o644))
	for rel, c := range map[string]string{
		"go.mod":  "module example.com/proj\n\ngo 1.21\n\nrequire example.com/hello v1.0.0\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/hello\"\n)\n\nfunc main() { fmt.Println(hello.Greeting()) }\n",
	} {
		must(t, os.WriteFile(filepath.Join(w.ws, rel), []byte(c), 0o644))
	}
	filepath.Walk(w.base, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, w.u.uid, w.u.gid) })
	return d
}

// writeGoProxy lays out one module version as a GOPROXY=file:// serves it.
func writeGoProxy(t *testing.T, dir, mod, ver string, files map[string]string) {
	d := filepath.Join(dir, mod, "@v")
	must(t, os.MkdirAll(d, 0o755))
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	for name, c := range files {
		f, err := z.Create(mod + "@" + ver + "/" + name)
		must(t, err)
		f.Write([]byte(c))
	}
	must(t, z.Close())
	must(t, os.WriteFile(filepath.Join(d, ver+".zip"), b.Bytes(), 0o644))
	must(t, os.WriteFile(filepath.Join(d, ver+".mod"), []byte(files["go.mod"]), 0o644))
	must(t, os.WriteFile(filepath.Join(d, ver+".info"), []byte(`{"Version":"`+ver+`","Time":"2026-01-01T00:00:00Z"}`), 0o644))
	must(t, os.WriteFile(filepath.Join(d, "list"), []byte(ver+"\n"), 0o644))
}

// npmTarball is a package tarball as npm pack makes it (package/...).
func npmTarball(t *testing.T, files map[string]string) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for name, c := range files {
		must(t, tw.WriteHeader(&tar.Header{Name: "package/" + name, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}))
		tw.Write([]byte(c))
	}
	must(t, tw.Close())
	must(t, gz.Close())
	return b.Bytes()
}

// sh runs script in name's jail as the world's user, in dir, with the
// host PATH and extra variables.
func (w *world) sh(t *testing.T, root, name, dir, script string, env ...string) result {
	t.Helper()
	c := w.cmd(root, name, dir, "probe", params(map[string]any{"mode": "sh", "script": script}))
	c.Env = append(c.Env, env...)
	return runCmd(t, c)
}

func withPath(c []string, path string) []string {
	out := []string{"PATH=" + path}
	for _, kv := range c {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return out
}

func toolchainsVisible(t *testing.T, root string, w *world, d *devWorld) {
	c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "sh", "script": `
echo "PATH=$PATH"
cargo && nodefake && uvfake && ~/.rustup/toolchains/stable/bin/rustc && ~/.local/share/uv/python/cpython-3.12/bin/py3
echo "cred=[$(cat ~/.cargo/credentials.toml)] npmrc=[$(cat ~/.nvm/versions/node/v20.0.0/etc/npmrc)]"
for p in ~/.cargo/bin/planted ~/.rustup/planted ~/.nvm/planted ~/.local/bin/planted; do
	if touch "$p" 2>/dev/null; then echo "wrote $p"; fi
done
rm -f ~/.cargo/bin/cargo 2>/dev/null && echo "removed cargo"
echo "hidden=$(command -v hiddenfake)"
`}))
	c.Env = withPath(c.Env, d.hostPath)
	r := runCmd(t, c)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"cargo-from-home", "node-from-home", "uv-from-home", "rustc-from-home", "python-from-home", "cred=[] npmrc=[]", "hidden=\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the jail's output lacks %q:\n%s", want, r.stdout)
		}
	}
	wantPath := "PATH=" + strings.Join([]string{w.home + "/.cargo/bin", w.home + "/.nvm/versions/node/v20.0.0/bin", w.home + "/.local/bin",
		"/usr/bin", "/bin", "/usr/local/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"}, ":") + "\n"
	if !strings.Contains(r.stdout, wantPath) {
		t.Errorf("the jail's PATH is not the host's, kept in order, without the relative and unseen entries:\n%s\nwant %s", r.stdout, wantPath)
	}
	if strings.Contains(r.stdout, "wrote ") || strings.Contains(r.stdout, "removed cargo") {
		t.Errorf("the jail changed a toolchain:\n%s", r.stdout)
	}
	if readFile(t, w.home+"/.cargo/credentials.toml") == "" {
		t.Error("the host's cargo credentials were emptied")
	}
	for _, p := range []string{"/.cargo/bin/planted", "/.rustup/planted", "/.nvm/planted", "/.local/bin/planted"} {
		if _, err := os.Lstat(w.home + p); err == nil {
			t.Errorf("%s reached the host", p)
		}
	}
	// A link planted at an entry refuses the launch, naming the key.
	must(t, os.Rename(w.home+"/.nvm", w.home+"/.nvm-real"))
	must(t, os.Symlink(w.home+"/.ssh", w.home+"/.nvm"))
	defer func() { os.Remove(w.home + "/.nvm"); os.Rename(w.home+"/.nvm-real", w.home+"/.nvm") }()
	r = w.sh(t, root, "claude", w.ws, "cat ~/.nvm/id_ed25519")
	if r.code != 126 || !strings.Contains(r.stderr, "home_read_only") || !strings.Contains(r.stderr, "~/.nvm") || strings.Contains(r.stdout, "ssh-secret") {
		t.Errorf("a link at a home_read_only entry: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func cachesLast(t *testing.T, root string, w *world, d *devWorld, goBin string) {
	before := map[string]string{}
	for _, c := range d.hostCaches {
		before[c] = treeHash(t, c)
	}
	goEnv := "export GOTOOLCHAIN=local GOSUMDB=off GOFLAGS='-mod=mod -buildvcs=false' GOPROXY=file://" + d.proxy + "\n"
	timed := `s=$(date +%s%N); ` + goBin + ` build -o /tmp/proj . || exit 1; e=$(date +%s%N); echo "build_ns=$((e-s))"; /tmp/proj` + "\n"
	// The first session downloads the module and builds cold; it also
	// installs an npm tarball and leaves a mark in ~/.cache.
	r := w.sh(t, root, "claude", w.ws, goEnv+timed+`
npm install --no-audit --no-fund --offline --no-update-notifier `+d.tarball+` >/dev/null || exit 2
node -e 'console.log(require("cco-test-pkg"))' || exit 3
echo claude > ~/.cache/mark
`)
	if r.code != 0 || !strings.Contains(r.stdout, "hello from the module") || !strings.Contains(r.stdout, "from the tarball") {
		t.Fatalf("first session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	cold := buildNs(t, r.stdout)
	tree := filepath.Join(w.home, ".cache/cco/claude")
	for _, p := range []string{"cco-go-mod/example.com/hello@v1.0.0/hello.go", "go-build", "mark"} {
		if _, err := os.Lstat(filepath.Join(tree, p)); err != nil {
			t.Errorf("the agent's cache tree lacks %s after the session: %v", p, err)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(tree, "cco-npm")); err != nil || len(ents) == 0 {
		t.Errorf("npm's cache was not kept in the agent's tree: %v %v", ents, err)
	}
	// The next session finds the module with the network off, and builds
	// warm.
	r = w.sh(t, root, "claude", w.ws, "export GOTOOLCHAIN=local GOSUMDB=off GOFLAGS='-mod=mod -buildvcs=false' GOPROXY=off\n"+timed+`cat ~/.cache/mark`)
	if r.code != 0 || !strings.Contains(r.stdout, "hello from the module") || !strings.Contains(r.stdout, "claude") {
		t.Fatalf("second session: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if warm := buildNs(t, r.stdout); cold < 3*warm {
		t.Errorf("the second go build took %v ns against the first's %v: not warm (want at least 3x faster)", warm, cold)
	}
	// claude's cache is not codex's.
	r = w.sh(t, root, "codex", w.ws, `cat ~/.cache/mark 2>&1; ls ~/go/pkg/mod 2>&1`)
	if strings.Contains(r.stdout, "claude") || strings.Contains(r.stdout, "example.com") {
		t.Errorf("codex sees claude's cache:\n%s", r.stdout)
	}
	// A link planted in the cache tree does not make the next launch bind
	// or show a host path.
	r = w.sh(t, root, "claude", w.ws, `rm -rf ~/.cache/cco-npm && ln -s `+w.home+`/.ssh ~/.cache/cco-npm && echo planted`)
	if !strings.Contains(r.stdout, "planted") {
		t.Fatalf("planting the link: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = w.sh(t, root, "claude", w.ws, `cat ~/.npm/id_ed25519 2>&1; ls ~/.npm/ 2>&1; touch ~/.npm/ok && echo writable`)
	if r.code != 0 || strings.Contains(r.stdout, "ssh-secret") || !strings.Contains(r.stdout, "writable") {
		t.Errorf("after a planted link: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if fi, err := os.Lstat(filepath.Join(tree, "cco-npm")); err != nil || !fi.IsDir() {
		t.Errorf("the planted link in the cache tree was not replaced by a directory: %v %v", fi, err)
	}
	// The host's own caches are byte-identical, and the host's go build
	// does not take the module the jail downloaded.
	for _, c := range d.hostCaches {
		if after := treeHash(t, c); after != before[c] {
			t.Errorf("the host's %s changed during the sessions", c)
		}
	}
	host := exec.Command(goBin, "build", "-o", os.DevNull, ".")
	host.Dir = w.ws
	host.Env = []string{"HOME=" + w.home, "PATH=/usr/bin:/bin", "GOTOOLCHAIN=local", "GOSUMDB=off", "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off",
		"GOCACHE=" + filepath.Join(w.base, "hostgocache")}
	if w.u.uid != 0 {
		host.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(w.u.uid), Gid: uint32(w.u.gid)}}
	}
	out, err := host.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "example.com/hello") {
		t.Errorf("the host's go build found the module the jail downloaded: %v\n%s", err, out)
	}
}

func buildNs(t *testing.T, out string) int64 {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "build_ns="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("no build time in %q", out)
	return 0
}

// treeHash hashes a tree's names, modes, link targets and contents.
func treeHash(t *testing.T, dir string) string {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v\n", p, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintln(h, l)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("hashing %s: %v", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func keysPerAgent(t *testing.T, root string, w *world) {
	keys := []string{"ANTHROPIC_API_KEY=ak", "OPENAI_API_KEY=ok", "GEMINI_API_KEY=gk", "ANTHROPIC_BASE_URL=https://gw.example"}
	own := map[string][]string{
		"claude": {"ANTHROPIC_API_KEY=ak", "ANTHROPIC_BASE_URL=https://gw.example"},
		"codex":  {"OPENAI_API_KEY=ok"},
		"gemini": {"GEMINI_API_KEY=gk"},
	}
	for name, want := range own {
		r := w.sh(t, root, name, w.ws, `env | grep -E '_API_KEY|_BASE_URL' | sort`, keys...)
		got := strings.Fields(r.stdout)
		if strings.Join(got, " ") != strings.Join(slices.Sorted(slices.Values(want)), " ") {
			t.Errorf("%s's jail has %q, want only its own %q", name, got, want)
		}
		if n := strings.Count(r.stderr, "not passing"); n != 1 || !strings.Contains(r.stderr, "another agent's login") {
			t.Errorf("%s: want one line naming the other agents' keys, got:\n%s", name, r.stderr)
		}
		for _, kv := range keys {
			k, _, _ := strings.Cut(kv, "=")
			if isOwn := strings.Contains(strings.Join(want, " "), k+"="); !isOwn && strings.HasSuffix(k, "_API_KEY") && !strings.Contains(r.stderr, k) {
				t.Errorf("%s: the line does not name %s:\n%s", name, k, r.stderr)
			}
		}
	}
}

// startInHome: the agent starts in the home with no workspace, as it
// starts unwrapped there: --version works, nothing of the home but the
// login state is writable, and one line says so.
func startInHome(t *testing.T, root string, w *world) {
	r := w.sh(t, root, "claude", w.home, `pwd; ls -A | wc -l; touch ~/x 2>/dev/null && echo "home writable"; touch ~/.claude/ok && echo "login writable"; touch ./here && echo "cwd writable"`)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, sandbox.NoWorkspaceDir+"\n0\n") || strings.Contains(r.stdout, "home writable") || !strings.Contains(r.stdout, "login writable") {
		t.Errorf("in the home:\n%s", r.stdout)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "no workspace") {
		t.Errorf("want one line saying there is no workspace, got:\n%s", r.stderr)
	}
	if _, err := os.Lstat(w.home + "/x"); err == nil {
		t.Error("a write to the home reached the host")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
