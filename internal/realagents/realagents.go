// Package realagents gives tests the vendors' real agents, from the npm
// registry, for the questions only a real agent answers ("does codex's
// login callback reach it through the jail?"). Those tests run only when
// CCO_REAL_AGENTS=1 (CI sets it); the packs are pinned here, in one place,
// and cached across runs in /var/cache/cco-npm-packs, one file per pack
// named <name>@<version>.tgz (a scoped name keeps its scope as a
// directory: @openai/codex@0.169.0-linux-x64.tgz). Unpacked trees are kept
// beside them, in unpacked/<name>@<version>/.
//
// The real agents run offline: a test starts them in a network namespace
// with only a loopback device, so nothing they do leaves the machine.
package realagents

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cco-dev/cco/vendorfetch/extract"
)

// Env is the switch: the real-agent tests run only when it is "1".
const Env = "CCO_REAL_AGENTS"

// CacheDir holds the packs; a package variable so that a test of this
// package can move it.
var CacheDir = "/var/cache/cco-npm-packs"

// Pack is one npm package at one version.
type Pack struct{ Name, Version string }

// The pinned packs. The platform packages carry the native binaries; the
// versions are those docs/how-to/first-login.md was measured on.
var (
	// Codex: package/vendor/x86_64-unknown-linux-musl/ is the standalone
	// package tree (codex-package.json, bin/codex, ...).
	Codex = Pack{"@openai/codex", "0.169.0-linux-x64"}
	// Claude: package/claude is the native binary.
	Claude = Pack{"@anthropic-ai/claude-code-linux-x64", "2.1.328"}
	// Gemini: a bundled Node program, package/bundle/gemini.js.
	Gemini = Pack{"@google/gemini-cli", "0.61.0"}
	// OpenCode: package/bin/opencode is the Bun-compiled binary; its main
	// package lists it at the same version.
	Opencode     = Pack{"opencode-linux-x64", "1.18.33"}
	OpencodeMain = Pack{"opencode-ai", "1.18.33"}
	// Droid: package/bin/droid. The main package 0.225.1 lists the build
	// 0.225.1, which the registry these were taken from does not have: the
	// test registry serves 0.225.2 alone, as that mirror does.
	Droid     = Pack{"@factory/cli-linux-x64", "0.225.2"}
	DroidMain = Pack{"@factory/cli", "0.225.1"}
	// Copilot CLI: package/copilot is a Node single-executable.
	Copilot     = Pack{"@github/copilot-linux-x64", "1.0.102"}
	CopilotMain = Pack{"@github/copilot", "1.0.102"}
	// Pi: a Node program with its dependency tree (Tree).
	Pi = Pack{"@mariozechner/pi-coding-agent", "0.73.1"}
)

// CodexTree, ClaudeBinary, GeminiMain and the others are where the agent
// is inside its unpacked pack.
const (
	CodexTree      = "package/vendor/x86_64-unknown-linux-musl"
	ClaudeBinary   = "package/claude"
	GeminiMain     = "package/bundle/gemini.js"
	OpencodeBinary = "package/bin/opencode"
	DroidBinary    = "package/bin/droid"
	CopilotBinary  = "package/copilot"
)

// Key is the pack's cache name, <name>@<version>.
func (p Pack) Key() string { return p.Name + "@" + p.Version }

// Path is the pack's file in the cache.
func (p Pack) Path() string { return filepath.Join(CacheDir, p.Key()+".tgz") }

// Require skips the test unless the switch is on. With it on, every
// missing piece fails the test: a real-agent test that was asked for never
// passes by skipping.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(Env) != "1" {
		t.Skipf("real agents are off (set %s=1 to run this test with the vendors' npm packs)", Env)
	}
}

// Fetch returns the pack's path in the cache, fetching it with `npm pack`
// when it is not there yet.
func Fetch(t testing.TB, p Pack) string {
	t.Helper()
	Require(t)
	path := p.Path()
	if _, err := os.Stat(path); err == nil {
		return path
	}
	unlock := lock(t)
	defer unlock()
	if _, err := os.Stat(path); err == nil {
		return path // another test binary fetched it meanwhile
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("%s is not cached at %s and npm is not installed to fetch it (fix: install nodejs with npm, or put the pack there: npm pack %s)", p.Key(), path, p.Key())
	}
	tmp, err := os.MkdirTemp(CacheDir, ".fetch-")
	if err != nil {
		t.Fatalf("a staging directory in %s: %v", CacheDir, err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(npm, "pack", "--silent", p.Key())
	cmd.Dir = tmp
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("npm pack %s: %v (fix: check that registry.npmjs.org is reachable, or put the pack at %s)", p.Key(), err, path)
	}
	name := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(name, '\n'); i >= 0 {
		name = name[i+1:]
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(tmp, name), path); err != nil {
		t.Fatalf("npm pack %s wrote %q: %v", p.Key(), name, err)
	}
	return path
}

// Dir returns the pack unpacked (its "package/" is inside), unpacking it
// once into the cache. The tree is shared: a test must not write in it.
func Dir(t testing.TB, p Pack) string {
	t.Helper()
	tgz := Fetch(t, p)
	dir := filepath.Join(CacheDir, "unpacked", p.Key())
	if _, err := os.Stat(filepath.Join(dir, "package")); err == nil {
		return dir
	}
	unlock := lock(t)
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "package")); err == nil {
		return dir
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".unpack-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := os.Open(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := extract.Extract(f, d, 2<<30); err != nil {
		t.Fatalf("unpacking %s: %v (fix: remove it, and the next run fetches it again)", tgz, err)
	}
	// Readable by the unprivileged users the tests run the agents as.
	filepath.Walk(tmp, func(p string, fi os.FileInfo, err error) error {
		if err == nil && (fi.Mode().IsRegular() || fi.IsDir()) {
			m := fi.Mode().Perm() | 0o044
			if m&0o100 != 0 {
				m |= 0o011
			}
			os.Chmod(p, m)
		}
		return nil
	})
	os.Chmod(tmp, 0o755)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// lock serialises fetching and unpacking across the test binaries go test
// runs side by side.
func lock(t testing.TB) func() {
	t.Helper()
	if err := os.MkdirAll(CacheDir, 0o755); err != nil {
		t.Fatalf("creating %s: %v (fix: run the tests as root, or create it writable)", CacheDir, err)
	}
	f, err := os.OpenFile(filepath.Join(CacheDir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(fmt.Errorf("locking %s: %w", f.Name(), err))
	}
	return func() { f.Close() }
}
