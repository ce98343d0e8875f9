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

	"github.com/cco-dev/cco/agent"
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
	for _, id := range []string{vendorfetch.StepClaude, vendorfetch.StepCodex, vendorfetch.StepGemini,
		vendorfetch.StepOpencode, vendorfetch.StepDroid, vendorfetch.StepPi, vendorfetch.StepCopilot} {
		found := false
		for _, s := range r.Steps {
			found = found || s.ID == id && s.Status == "changed"
		}
		if !found {
			t.Errorf("%s did not install: %+v", id, r.Steps)
		}
	}
	warned := false
	for _, st := range r.Steps {
		warned = warned || st.ID == vendorfetch.StepDroid && strings.Contains(strings.Join(st.Warnings, " "), "installing "+realagents.Droid.Version+", the nearest later build")
	}
	if !warned {
		t.Errorf("droid: no warning that the mirror's build %s stands in for the one %s names: %+v", realagents.Droid.Version, realagents.DroidMain.Key(), r.Steps)
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
		{[]string{filepath.Join(root, vendorfetch.OpencodeDir, "current", "opencode"), "--version"}, realagents.Opencode.Version},
		// The mirror lacks the build 0.225.1 that @factory/cli 0.225.1
		// names: cco installed 0.225.2, the nearest later build.
		{[]string{filepath.Join(root, vendorfetch.DroidDir, "current", "droid"), "--version"}, realagents.Droid.Version},
		{[]string{filepath.Join(root, vendorfetch.CopilotDir, "current", "copilot"), "--version"}, "GitHub Copilot CLI " + realagents.Copilot.Version},
		{[]string{filepath.Join(root, vendorfetch.PiDir, "current", "node"), filepath.Join(root, vendorfetch.PiDir, "current", "node_modules", vendorfetch.NpmPi, "dist/cli.js"), "--version"}, realagents.Pi.Version},
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
	// The agents only npm serves: each main package with its own
	// package.json (its optional dependencies name the builds), and the
	// linux-x64 build; Pi's whole tree, with a stub of each other
	// platform's optional build the lockfile names.
	for _, m := range [][2]realagents.Pack{{realagents.OpencodeMain, realagents.Opencode}, {realagents.DroidMain, realagents.Droid},
		{realagents.CopilotMain, realagents.Copilot}} {
		publishPack(t, reg, m[1], false)
		publishPack(t, reg, m[0], true)
	}
	_, packs, stubs := realagents.Tree(t, realagents.Pi)
	for _, p := range packs {
		pub := npmtest.Pub{Name: p.Name, Version: p.Version, TarballFile: p.File, Fields: p.Manifest}
		if p.Name == realagents.Pi.Name && p.Version == realagents.Pi.Version {
			pub.Tags = []string{"latest"}
		}
		reg.Publish(pub)
	}
	for _, s := range stubs {
		fields := map[string]any{"os": s.OS, "cpu": s.CPU}
		if len(s.Libc) > 0 {
			fields["libc"] = s.Libc
		}
		reg.Publish(npmtest.Pub{Name: s.Name, Version: s.Version, Tarball: emptyTarball(t), Fields: fields})
	}
	env := []string{
		"CCO_AGENTS=" + strings.Join(agent.Names(), ","),
		"CCO_CLAUDE_SOURCE=npm", "CCO_CODEX_SOURCE=npm",
		"CCO_NPM_KEYS=" + reg.KeysFile, "CCO_PROGRESS=never",
	}
	for _, a := range agent.Names() {
		env = append(env, "CCO_"+strings.ToUpper(a)+"_REGISTRY="+reg.URL())
	}
	return reg, env
}

// publishPack serves a cached pack with its own package.json's manifest,
// tagged latest when main.
func publishPack(t *testing.T, reg *npmtest.Registry, p realagents.Pack, main bool) {
	t.Helper()
	f := packFile(t, p)
	m, err := realagents.Manifest(f)
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	pub := npmtest.Pub{Name: p.Name, Version: p.Version, TarballFile: f, Fields: m}
	if main {
		pub.Tags = []string{"latest"}
	}
	reg.Publish(pub)
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
