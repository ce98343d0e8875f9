package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/realagents"
	"github.com/cco-dev/cco/vendorfetch"
	"github.com/cco-dev/cco/vendorfetch/npmtest"
)

// packFile is a pinned pack's file in the shared cache (internal/realagents
// holds the pins and fetches a missing pack).
func packFile(t *testing.T, p realagents.Pack) string { return realagents.Fetch(t, p) }

func emptyTarball(t *testing.T) []byte {
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	body := []byte("{}")
	tw.WriteHeader(&tar.Header{Name: "package/package.json", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write(body)
	tw.Close()
	gz.Close()
	return b.Bytes()
}

// TestRealAgentsFromNpm installs the real Gemini CLI, Claude Code and Codex
// with cco-install from npm packages served by a test registry on loopback
// (the packs from the cache, the packuments and their signatures made
// here), then runs each installed agent's --version with no network.
func TestRealAgentsFromNpm(t *testing.T) {
	realagents.Require(t)
	reg, env := realRegistry(t)
	gv, cv := realagents.Gemini.Version, realagents.Claude.Version
	codexV := strings.TrimSuffix(realagents.Codex.Version, "-linux-x64")
	root := t.TempDir()
	hostNodeIn(t, root)
	shadow := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(shadow, []byte("#!/bin/sh\necho shadow\n"), 0o755)
	r := runReport(t, installer(t, root, shadow, env))
	if r.Failed != 0 {
		t.Fatalf("install: %+v", r)
	}
	for _, id := range []string{vendorfetch.StepClaude, vendorfetch.StepCodex, vendorfetch.StepGemini} {
		found := false
		for _, s := range r.Steps {
			found = found || s.ID == id && s.Status == "changed"
		}
		if !found {
			t.Errorf("%s did not install: %+v", id, r.Steps)
		}
	}
	if l, err := os.Readlink(filepath.Join(root, vendorfetch.GeminiDir, "current")); err != nil || l != gv {
		t.Errorf("gemini current -> %q (%v), want %s", l, err, gv)
	}
	reg.Close()
	// Offline: a network namespace of the test's own with nothing in it.
	for _, c := range []struct {
		argv []string
		want string
	}{
		// The interpreter link the jail runs (to /usr/bin/node: the
		// host's, the same file).
		{[]string{filepath.Join(root, vendorfetch.GeminiDir, "current", "node"), filepath.Join(root, vendorfetch.GeminiDir, "current", vendorfetch.GeminiEntry), "--version"}, gv},
		{[]string{filepath.Join(root, vendorfetch.ClaudeDir, "current", "claude"), "--version"}, cv + " (Claude Code)"},
		{[]string{filepath.Join(root, vendorfetch.CodexDir, "current", "bin", "codex"), "--version"}, "codex-cli " + codexV},
	} {
		cmd := exec.Command("unshare", append([]string{"-rn"}, c.argv...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "GEMINI_API_KEY=dummy", "DISABLE_AUTOUPDATER=1"}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%v: %v\n%s\nwant %q", c.argv, err, out, c.want)
		}
	}
	// A second run is a no-op and reaches no registry (it is closed).
	r = runReport(t, installer(t, root, shadow, env))
	if r.Failed != 0 || r.Changed != 0 {
		t.Errorf("second run: %+v", r)
	}
}

// realRegistry serves the pinned packs (the shared cache) from a test
// registry on loopback, as the vendors publish them on npm, and returns it
// with cco-install's settings that install all three agents from it.
func realRegistry(t *testing.T) (*npmtest.Registry, []string) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Fatalf("the pinned packs are the linux-x64 builds; this machine is %s", runtime.GOARCH)
	}
	reg := npmtest.New(t)
	reg.Publish(npmtest.Pub{Name: vendorfetch.NpmGemini, Version: realagents.Gemini.Version, TarballFile: packFile(t, realagents.Gemini), Engines: map[string]string{"node": ">=20"}, Tags: []string{"latest"}})
	claudePkg := realagents.Claude.Name
	cv := realagents.Claude.Version
	reg.Publish(npmtest.Pub{Name: claudePkg, Version: cv, TarballFile: packFile(t, realagents.Claude)})
	reg.Publish(npmtest.Pub{Name: vendorfetch.NpmClaude, Version: cv, Tarball: emptyTarball(t), Optional: map[string]string{claudePkg: cv}, Tags: []string{"latest"}})
	xv := realagents.Codex.Version
	codexV := strings.TrimSuffix(xv, "-linux-x64")
	reg.Publish(npmtest.Pub{Name: vendorfetch.NpmCodex, Version: xv, TarballFile: packFile(t, realagents.Codex)})
	reg.Publish(npmtest.Pub{Name: vendorfetch.NpmCodex, Version: codexV, Tarball: emptyTarball(t), Optional: map[string]string{vendorfetch.NpmCodex + "-linux-x64": "npm:" + vendorfetch.NpmCodex + "@" + xv}, Tags: []string{"latest"}})
	return reg, []string{
		"CCO_AGENTS=claude,codex," + vendorfetch.AgentGemini,
		"CCO_CLAUDE_SOURCE=npm", "CCO_CODEX_SOURCE=npm",
		"CCO_CLAUDE_REGISTRY=" + reg.URL(), "CCO_CODEX_REGISTRY=" + reg.URL(), "CCO_GEMINI_REGISTRY=" + reg.URL(),
		"CCO_NPM_KEYS=" + reg.KeysFile, "CCO_PROGRESS=never",
	}
}

// hostNodeIn puts the host's Node in root as the target's (found on the
// system PATH there): a link out of the root would not resolve in it.
func hostNodeIn(t *testing.T, root string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("Gemini CLI needs Node.js 20 or later on PATH (package nodejs): %v", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := linkOrCopy(node, filepath.Join(root, "usr/bin/node")); err != nil {
		t.Fatal(err)
	}
}

// linkOrCopy makes to the same file as from: a hard link, or a copy where
// the two are on different file systems.
func linkOrCopy(from, to string) error {
	from, err := filepath.EvalSymlinks(from)
	if err != nil {
		return err
	}
	if os.Link(from, to) == nil {
		return nil
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}
