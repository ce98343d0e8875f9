package vendorfetch

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
	"github.com/cco-dev/cco/vendorfetch/npmtest"
)

// nativeAgent is one of the agents whose native build a platform package
// holds, as the test registry publishes it.
type nativeAgent struct {
	name, step, dir string
	// entry is the binary in the platform package's tarball.
	entry string
	// platformPkg names the platform package of a cco platform.
	platformPkg func(platform string) string
}

var nativeAgents = []nativeAgent{
	{AgentOpencode, StepOpencode, OpencodeDir, "package/bin/opencode", func(p string) string { return "opencode-" + p }},
	{AgentDroid, StepDroid, DroidDir, "package/bin/droid", func(p string) string { return NpmDroid + "-" + p }},
	{AgentCopilot, StepCopilot, CopilotDir, "package/copilot", func(p string) string {
		arch := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(p, "linux-"), "darwin-"), "-musl")
		if strings.HasSuffix(p, "-musl") {
			return NpmCopilot + "-linuxmusl-" + arch
		}
		return NpmCopilot + "-" + strings.TrimSuffix(p, "-"+arch) + "-" + arch
	}},
}

// elf is a native binary's stand-in: ELF magic, then its version.
func elf(version string) string { return "\x7fELF fake binary " + version + "\n" }

// publishNative publishes the main package at release, listing build
// (default: release) of platform, and the platform package at each of
// builds with its binary.
func (r *npmReg) publishNative(a nativeAgent, release, build, platform string, builds []string, tags ...string) {
	if build == "" {
		build = release
	}
	p, _ := lookupProfile(a.name)
	plat := a.platformPkg(platform)
	for _, b := range builds {
		pj, _ := json.Marshal(map[string]any{"name": plat, "version": b})
		r.Publish(npmtest.Pub{Name: plat, Version: b, Tarball: npmTarball(r.t, []tarEntry{
			{name: a.entry, body: elf(b), mode: 0o755},
			{name: "package/package.json", body: string(pj)},
		})})
	}
	r.Publish(npmtest.Pub{Name: p, Version: release, Tarball: npmTarball(r.t, []tarEntry{{name: "package/package.json", body: "{}"}}),
		Optional: map[string]string{plat: build, a.platformPkg("darwin-arm64"): build}, Tags: tags})
}

// nativeSetup is a test registry and a configuration that installs a from
// it on this machine's platform; it returns the platform and a's target.
func nativeSetup(t *testing.T, a nativeAgent) (*npmReg, Config, string, string) {
	t.Helper()
	plat := testPlatform(t)
	r := newNpmReg(t, newStore(t))
	cfg := r.config(a.name)
	cfg.Platform = plat
	return r, cfg, plat, nativeTarget(a, plat)
}

// lookupProfile is the agent's npm package.
func lookupProfile(name string) (string, bool) {
	return npmLayoutOf(name).pkg, true
}

// Each native agent installs from its platform package: the binary alone,
// executable, at <dir>/<build>/<name>, with current pointing there, in the
// receipt, and the state naming the platform; a second run fetches
// nothing.
func TestNativeAgentsInstallFromRegistry(t *testing.T) {
	plat := testPlatform(t)
	for _, a := range nativeAgents {
		t.Run(a.name, func(t *testing.T) {
			if a.name == AgentDroid && strings.HasSuffix(plat, "-musl") {
				t.Skip("droid has no musl build")
			}
			s := newStore(t)
			r := newNpmReg(t, s)
			root := t.TempDir()
			cfg := r.config(a.name)
			cfg.Platform = plat
			r.publishNative(a, "1.2.3", "", nativeTarget(a, plat), []string{"1.2.3"}, "latest")
			sr := wantStatus(t, install(t, root, cfg), a.step, provision.StatusChanged)
			if !strings.Contains(sr.Detail, "registry signature (key "+r.KeyID+")") {
				t.Errorf("detail %q", sr.Detail)
			}
			bin := filepath.Join(root, a.dir, "1.2.3", a.name)
			fi, err := os.Stat(bin)
			if err != nil || fi.Mode().Perm()&0o111 == 0 {
				t.Fatalf("%s: %v %v", bin, fi, err)
			}
			if b, _ := os.ReadFile(bin); string(b) != elf("1.2.3") {
				t.Errorf("binary %q", b)
			}
			if ents, _ := os.ReadDir(filepath.Join(root, a.dir, "1.2.3")); len(ents) != 1 {
				t.Errorf("the version directory holds %v, want the binary alone", ents)
			}
			if l, _ := os.Readlink(filepath.Join(root, a.dir, "current")); l != "1.2.3" {
				t.Errorf("current -> %q", l)
			}
			st := loadStateFromStep(t, root, a.step)
			if st.Version != "1.2.3" || st.Platform != nativeTarget(a, plat) || st.Channel != "latest" {
				t.Errorf("state %+v", st)
			}
			r.Reset()
			wantStatus(t, install(t, root, cfg), a.step, provision.StatusOK)
			if n := r.Count("/" + a.platformPkg(nativeTarget(a, plat)) + "/-/"); n != 0 {
				t.Errorf("a no-op run fetched the tarball %d times", n)
			}
			assertNoLeftovers(t, root)
		})
	}
}

// nativeTarget is the receipt's platform of a native agent: the baseline
// build on an x64 processor without AVX2.
func nativeTarget(a nativeAgent, plat string) string {
	return npmLayoutOf(a.name).target(plat)
}

// A mirror that lacks the exact build a release names: @factory/cli
// 0.225.1 names @factory/cli-linux-x64 0.225.1, the mirror has 0.215.0 and
// 0.225.2. The channel and a pin of the release install 0.225.2, the
// nearest later build of 0.225, and say so; a pin of the build installs it
// directly; with no later build of the release, the error names what the
// mirror has and the fix.
func TestNativeMirrorLacksTheExactBuild(t *testing.T) {
	plat := "linux-x64"
	a := nativeAgents[1] // droid
	defer func(f func() bool) { hasAVX2 = f }(hasAVX2)
	hasAVX2 = func() bool { return true }
	s := newStore(t)
	r := newNpmReg(t, s)
	cfg := r.config(a.name)
	cfg.Platform = plat
	r.publishNative(a, "0.225.1", "0.225.1", plat, []string{"0.215.0", "0.225.2", "0.226.0"}, "latest")
	root := t.TempDir()
	sr := wantStatus(t, install(t, root, cfg), a.step, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "installed droid 0.225.2") {
		t.Errorf("detail %q", sr.Detail)
	}
	warned := strings.Join(sr.Warnings, "\n")
	for _, w := range []string{"has no @factory/cli-linux-x64@0.225.1", "which @factory/cli@0.225.1 names", "installing 0.225.2, the nearest later build of 0.225"} {
		if !strings.Contains(warned, w) {
			t.Errorf("warnings %q lack %q", warned, w)
		}
	}
	// Pinned to the release: its build is the one installed.
	for _, c := range []struct{ pin, want, status string }{{"0.225.1", "0.225.2", provision.StatusOK}, {"0.215.0", "0.215.0", provision.StatusChanged}} {
		cfg.Npm[a.name] = NpmConfig{Version: c.pin, Registry: r.URL()}
		wantStatus(t, install(t, root, cfg), a.step, c.status)
		if l, _ := os.Readlink(filepath.Join(root, a.dir, "current")); l != c.want {
			t.Errorf("pin %s: current -> %q, want %s", c.pin, l, c.want)
		}
	}
	cfg.Npm[a.name] = NpmConfig{Version: "9.9.9", Registry: r.URL()}
	sr = wantStatus(t, install(t, t.TempDir(), cfg), a.step, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "droid.version 9.9.9 is neither a build of @factory/cli-linux-x64") || !strings.Contains(sr.Detail, "0.226.0, 0.225.2, 0.215.0") {
		t.Errorf("detail %q", sr.Detail)
	}
	// A release whose build has no later one of the same minor.
	r.publishNative(a, "0.227.0", "0.227.0", plat, nil, "latest")
	cfg.Npm[a.name] = NpmConfig{Channel: "latest", Registry: r.URL()}
	empty := t.TempDir()
	sr = wantStatus(t, install(t, empty, cfg), a.step, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "names @factory/cli-linux-x64@0.227.0, which the registry") || !strings.Contains(sr.Detail, "pin droid.version to one it has") {
		t.Errorf("detail %q", sr.Detail)
	}
	if _, err := os.Stat(filepath.Join(empty, a.dir)); err == nil {
		t.Error("a failed install left the agent's directory")
	}
}

// The platform package follows the system: musl builds where the root has
// musl (Copilot's linuxmusl), the baseline build of OpenCode on an x64
// processor without AVX2, and an agent with no build for the platform
// (Droid on musl) fails, naming it.
func TestNativePlatformPackages(t *testing.T) {
	defer func(f func() bool) { hasAVX2 = f }(hasAVX2)
	for _, c := range []struct {
		agent, platform string
		avx2            bool
		pkg             string
	}{
		{AgentOpencode, "linux-x64", true, "opencode-linux-x64"},
		{AgentOpencode, "linux-x64", false, "opencode-linux-x64-baseline"},
		{AgentOpencode, "linux-x64-musl", false, "opencode-linux-x64-baseline-musl"},
		{AgentOpencode, "linux-arm64-musl", false, "opencode-linux-arm64-musl"},
		{AgentDroid, "linux-x64", false, "@factory/cli-linux-x64-baseline"},
		{AgentDroid, "linux-arm64", true, "@factory/cli-linux-arm64"},
		{AgentCopilot, "linux-x64-musl", true, "@github/copilot-linuxmusl-x64"},
		{AgentCopilot, "linux-arm64", true, "@github/copilot-linux-arm64"},
	} {
		hasAVX2 = func() bool { return c.avx2 }
		l := npmLayoutOf(c.agent)
		if got := l.platformKey(l.target(c.platform)); got != c.pkg {
			t.Errorf("%s on %s (avx2 %v): %s, want %s", c.agent, c.platform, c.avx2, got, c.pkg)
		}
	}
	hasAVX2 = func() bool { return true }
	s := newStore(t)
	r := newNpmReg(t, s)
	cfg := r.config(AgentDroid)
	cfg.Platform = "linux-x64-musl"
	r.publishNative(nativeAgents[1], "0.225.1", "", "linux-x64", []string{"0.225.1"}, "latest")
	sr := wantStatus(t, install(t, t.TempDir(), cfg), StepDroid, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "has no build for linux-x64-musl") {
		t.Errorf("detail %q", sr.Detail)
	}
}

// A package that is not a native binary is refused, and nothing is
// installed.
func TestNativeNotABinary(t *testing.T) {
	a := nativeAgents[2]
	r, cfg, _, target := nativeSetup(t, a)
	pkg := a.platformPkg(target)
	r.Publish(npmtest.Pub{Name: pkg, Version: "1.0.0", Tarball: npmTarball(t, []tarEntry{{name: a.entry, body: "#!/bin/sh\necho hi\n", mode: 0o755}})})
	r.Publish(npmtest.Pub{Name: NpmCopilot, Version: "1.0.0", Tarball: npmTarball(t, []tarEntry{{name: "package/package.json", body: "{}"}}), Optional: map[string]string{pkg: "1.0.0"}, Tags: []string{"latest"}})
	root := t.TempDir()
	sr := wantStatus(t, install(t, root, cfg), a.step, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "copilot is not an ELF binary") {
		t.Errorf("detail %q", sr.Detail)
	}
	if _, err := os.Stat(filepath.Join(root, a.dir, "current")); err == nil {
		t.Error("installed anyway")
	}
	assertNoLeftovers(t, root)
}

// An offline bundle carries the build and its platform packument; the
// install from it reaches nothing and verifies the same.
func TestNativeBundle(t *testing.T) {
	a := nativeAgents[0]
	r, cfg, plat, target := nativeSetup(t, a)
	r.publishNative(a, "1.18.33", "", target, []string{"1.18.33"}, "latest")
	out := filepath.Join(t.TempDir(), "b.tar.xz")
	if err := WriteBundle(context.Background(), cfg, out); err != nil {
		t.Fatal(err)
	}
	r.Close()
	inst := DefaultConfig()
	inst.Agents, inst.Bundle, inst.NpmKeys, inst.Progress, inst.Platform = []string{a.name}, out, r.KeysFile, "never", plat
	root := t.TempDir()
	sr := wantStatus(t, install(t, root, inst), a.step, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "registry signature") || !strings.Contains(sr.Detail, "the bundle") {
		t.Errorf("detail %q", sr.Detail)
	}
	if b, _ := os.ReadFile(filepath.Join(root, a.dir, "1.18.33", a.name)); string(b) != elf("1.18.33") {
		t.Errorf("binary %q", b)
	}
}

// Upgrade, rollback and a second upgrade prune as for every agent.
func TestNativeUpgradeRollback(t *testing.T) {
	a := nativeAgents[2]
	r, cfg, _, target := nativeSetup(t, a)
	r.publishNative(a, "1.0.101", "", target, []string{"1.0.101"}, "latest")
	root := t.TempDir()
	wantStatus(t, install(t, root, cfg), a.step, provision.StatusChanged)
	r.publishNative(a, "1.0.102", "", target, []string{"1.0.102"}, "latest")
	cfg.Upgrade = map[string]bool{a.name: true}
	wantStatus(t, install(t, root, cfg), a.step, provision.StatusChanged)
	if st := loadStateFromStep(t, root, a.step); st.Version != "1.0.102" || st.Previous != "1.0.101" {
		t.Fatalf("state %+v", st)
	}
	rep := provisiontest.Execute(t, root, RollbackSteps(cfg, []string{a.name}))
	wantStatus(t, rep, "rollback."+a.name, provision.StatusChanged)
	if l, _ := os.Readlink(filepath.Join(root, a.dir, "current")); l != "1.0.101" {
		t.Errorf("after rollback: current -> %q", l)
	}
}
