// Package jailtest builds what the real-jail tests run: a system root with
// the shadow, the helper, the egress proxy and a test agent in place of both
// vendor binaries, and host worlds (a home and workspaces) for root or an
// unprivileged user.
package jailtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/engine"
)

// RootOptions say what goes into a system root besides the shadow and the
// egress proxy.
type RootOptions struct {
	// Agent is the directory, relative to the module's root, of the
	// program installed as both vendor binaries (a test agent).
	Agent string
	// SetuidID adds bin/suid-id, a setuid-root copy of /usr/bin/id, for
	// "a setuid binary does not elevate".
	SetuidID bool
}

// Root is a built system root.
type Root struct {
	// Dir is the root; the shadow has it linked in as sandbox.SystemRoot.
	Dir string
	// Agent is the test agent's path on the host (bin/agent).
	Agent string
}

// Shadow is the installed shadow under an agent's name.
func (r *Root) Shadow(name string) string { return filepath.Join(r.Dir, "usr/local/bin", name) }

// Config is the root's sandbox.toml.
func (r *Root) Config() string { return filepath.Join(r.Dir, "etc/cco/sandbox.toml") }

// WithConfig writes the root's sandbox.toml until the test ends.
func (r *Root) WithConfig(t testing.TB, text string) {
	t.Helper()
	if err := os.WriteFile(r.Config(), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(r.Config()) })
}

// Shared builds one root per test binary and hands it to every test that
// asks; Cleanup (from TestMain, after m.Run) removes it.
type Shared struct {
	Options RootOptions
	once    sync.Once
	root    *Root
	err     error
}

// Get returns the shared root, building it on first use. It needs bwrap.
func (s *Shared) Get(t testing.TB) *Root {
	t.Helper()
	testenv.RequireBwrap(t)
	s.once.Do(func() { s.root, s.err = BuildRoot(s.Options) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.root
}

// Cleanup removes the shared root, if one was built.
func (s *Shared) Cleanup() {
	if s.root != nil {
		os.RemoveAll(s.root.Dir)
	}
}

// ModuleRoot is the directory holding go.mod, found from the working
// directory (a test runs in its package's directory).
func ModuleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("no go.mod above the working directory")
		}
		d = up
	}
}

// goBuild builds the package in dir (module-relative) to out, statically.
func goBuild(mod, dir, out string, ldflags ...string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is not on PATH: %w", err)
	}
	args := []string{"build"}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags", ldflags[0])
	}
	c := exec.Command(gobin, append(args, "-o", out, "./"+dir)...)
	c.Dir = mod
	// Static, as the release builds it (no dynamic loader at every start).
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", dir, err, b)
	}
	return nil
}

// RootsBase holds the system roots: not /tmp or /var/tmp, which are
// private in the jail, where the helper must be visible.
const RootsBase = "/var/lib/cco-test-roots"

// BuildRoot builds a system root: the shadow with the root linked in (the
// production binary honours no variable for it) under every agent's name and
// as the helper, the egress proxy, the guard's hook scripts, the test agent
// as every vendor binary (behind a pass-through script where the profile
// has an interpreter), and /usr/bin/bwrap. It lives under RootsBase.
func BuildRoot(o RootOptions) (*Root, error) {
	mod, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	os.MkdirAll(RootsBase, 0o755)
	dir, err := os.MkdirTemp(RootsBase, "cco-jail-root-")
	if err != nil {
		return nil, err
	}
	r := &Root{Dir: dir, Agent: filepath.Join(dir, "bin/agent")}
	fail := func(err error) (*Root, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	dirs := []string{"usr/local/bin", "usr/libexec/cco/guard", "usr/bin", "etc/cco", "bin"}
	for _, p := range agent.All() {
		dirs = append(dirs, filepath.Dir(p.Binary))
		if p.Interpreter != "" {
			dirs = append(dirs, filepath.Dir(p.Interpreter))
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fail(err)
		}
	}
	// The three builds run side by side: they share the build cache, and
	// the linker is most of the time.
	names := agent.Names()
	shadow := r.Shadow(names[0])
	builds := [][]string{
		{"cmd/shadow", shadow, "-X github.com/cco-dev/cco/sandbox.SystemRoot=" + dir + engine.LinkFlag(os.Getenv(engine.EnvVar))},
		{"cmd/egress-proxy", filepath.Join(dir, "usr/libexec/cco/egress-proxy")},
		{o.Agent, r.Agent},
	}
	errs := make([]error, len(builds))
	var wg sync.WaitGroup
	for i, b := range builds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = goBuild(mod, b[0], b[1], b[2:]...)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	links := [][2]string{{shadow, "usr/libexec/cco/sandbox-helper"}}
	for _, p := range agent.All() {
		if p.Name != names[0] {
			links = append(links, [2]string{shadow, "usr/local/bin/" + p.Name})
		}
		links = append(links, [2]string{r.Agent, p.Binary})
	}
	for _, l := range links {
		if err := os.Link(l[0], filepath.Join(dir, l[1])); err != nil {
			return fail(err)
		}
	}
	// An interpreter runs the script it is given, as Node runs Gemini
	// CLI's: the fake agent then sees the arguments a real agent sees.
	for _, p := range agent.All() {
		if p.Interpreter == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, p.Interpreter), []byte("#!/bin/sh\nexec \"$@\"\n"), 0o755); err != nil {
			return fail(err)
		}
	}
	for _, g := range []string{"session-start", "prompt-gate"} {
		if err := os.WriteFile(filepath.Join(dir, "usr/libexec/cco/guard", g), []byte("#!/bin/sh\nexec /usr/libexec/cco/sandbox-helper guard "+g+"\n"), 0o755); err != nil {
			return fail(err)
		}
	}
	if err := os.Symlink("/usr/bin/bwrap", filepath.Join(dir, "usr/bin/bwrap")); err != nil {
		return fail(err)
	}
	if o.SetuidID {
		id, err := os.ReadFile("/usr/bin/id")
		if err == nil {
			p := filepath.Join(dir, "bin/suid-id")
			if err = os.WriteFile(p, id, 0o755); err == nil {
				err = os.Chmod(p, 0o4755)
			}
		}
		if err != nil {
			return fail(err)
		}
	}
	return r, nil
}
