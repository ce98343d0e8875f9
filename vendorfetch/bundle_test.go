package vendorfetch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

func TestBundleInstallsWithNoServer(t *testing.T) {
	s, cfg := both(t)
	key, keyPath, fp := newKey(t)
	plat := testPlatform(t)
	s.addClaude("2.1.700", key, true, plat) // now signed
	cfg.Platform = plat
	out := filepath.Join(t.TempDir(), "cco-bundle.tar.xz")
	if err := WriteBundle(context.Background(), cfg, out); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 1 {
		t.Errorf("WriteBundle left files beside the bundle: %v", ents)
	}
	s.srv.Close()

	inst := DefaultConfig()
	inst.Bundle = out
	inst.Claude.SigningKey, inst.Claude.SigningFingerprint = keyPath, fp // the bundle carries the signature
	// Any network use would fail: the store is closed and these do not resolve.
	inst.Claude.BaseURL = "http://127.0.0.1:1/claude"
	inst.Codex.BaseURLs = []string{"http://127.0.0.1:1/codex"}
	inst.Codex.GitHubBaseURL, inst.Codex.GitHubAPIURL = "", ""
	inst.Retries = 0
	root := t.TempDir()
	rep := install(t, root, inst)
	sr := wantStatus(t, rep, StepClaude, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "OpenPGP signature") || !strings.Contains(sr.Detail, out) {
		t.Errorf("claude detail %q", sr.Detail)
	}
	wantStatus(t, rep, StepCodex, provision.StatusChanged)
	b, _ := os.ReadFile(filepath.Join(root, ClaudeDir, "2.1.700", "claude"))
	if !bytes.Equal(b, claudeBinary("2.1.700", plat, 200<<10)) {
		t.Error("the bundle's claude differs")
	}
	if _, err := os.Stat(filepath.Join(root, CodexDir, "0.300.0", "bin/codex")); err != nil {
		t.Error(err)
	}
	// A second run from the same bundle is a no-op.
	rep = install(t, root, inst)
	wantStatus(t, rep, StepClaude, provision.StatusOK)
	wantStatus(t, rep, StepCodex, provision.StatusOK)

	// A pin that the bundle does not hold is an error naming both.
	inst.Codex.Version = "0.301.0"
	if sr := wantStatus(t, install(t, t.TempDir(), inst), StepCodex, provision.StatusFailed); !strings.Contains(sr.Detail, "the bundle "+out+" holds 0.300.0") {
		t.Errorf("detail %q", sr.Detail)
	}
}

func TestBundleWithFlippedByteIsRefused(t *testing.T) {
	_, cfg := both(t)
	cfg.Platform = testPlatform(t)
	out := filepath.Join(t.TempDir(), "b.tar.xz")
	if err := WriteBundle(context.Background(), cfg, out); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(out)
	for _, at := range []int{len(good) / 3, len(good) / 2, len(good) - 20} {
		bad := append([]byte(nil), good...)
		bad[at] ^= 0x01
		p := filepath.Join(t.TempDir(), "bad.tar.xz")
		os.WriteFile(p, bad, 0o644)
		inst := DefaultConfig()
		inst.Bundle = p
		root := t.TempDir()
		rep := install(t, root, inst)
		for _, id := range []string{StepClaude, StepCodex} {
			if sr := provisiontest.Step(t, rep, id); sr.Status != provision.StatusFailed {
				t.Errorf("byte %d flipped: %s is %s (%s)", at, id, sr.Status, sr.Detail)
			}
		}
		if _, err := os.Lstat(filepath.Join(root, LibexecDir)); err == nil {
			if snap := treehash.Shape(t, filepath.Join(root, LibexecDir)); strings.Contains(snap, "claude") || strings.Contains(snap, "codex") {
				t.Errorf("byte %d flipped: something was installed:\n%s", at, snap)
			}
		}
	}
}

func TestBundleNeedsItsPlatform(t *testing.T) {
	_, cfg := both(t)
	plat := testPlatform(t)
	cfg.Agents = []string{AgentClaude}
	cfg.Platform = plat
	out := filepath.Join(t.TempDir(), "b.tar.xz")
	if err := WriteBundle(context.Background(), cfg, out); err != nil {
		// the store has only the host's glibc build
		t.Fatal(err)
	}
	inst := DefaultConfig()
	inst.Agents = []string{AgentClaude, AgentCodex}
	inst.Bundle = out
	inst.Platform = plat + "-musl"
	rep := install(t, t.TempDir(), inst)
	if sr := wantStatus(t, rep, StepClaude, provision.StatusFailed); !strings.Contains(sr.Detail, "this system is "+plat+"-musl") {
		t.Errorf("detail %q", sr.Detail)
	}
	if sr := wantStatus(t, rep, StepCodex, provision.StatusFailed); !strings.Contains(sr.Detail, "holds no codex release") {
		t.Errorf("detail %q", sr.Detail)
	}
}

func TestFailedBundleLeavesNothing(t *testing.T) {
	s, cfg := both(t)
	cfg.Platform = testPlatform(t)
	s.del("/codex/releases/0.300.0/" + SumsAsset)
	cfg.Codex.GitHubBaseURL = ""
	dir := t.TempDir()
	err := WriteBundle(context.Background(), cfg, filepath.Join(dir, "b.tar.xz"))
	if err == nil || !strings.HasPrefix(err.Error(), "bundle: codex: 0.300.0: ") {
		t.Fatalf("err = %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}
