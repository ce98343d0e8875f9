package vendorfetch

import (
	"github.com/cco-dev/cco/provision/provisiontest/treehash"

	"archive/tar"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/npmtest"
)

func geminiSetup(t *testing.T) (*store, *npmReg, Config, string) {
	s := newStore(t)
	r := newNpmReg(t, s)
	root := t.TempDir()
	writeNode(t, root, "v20.20.2")
	return s, r, r.config(AgentGemini), root
}

func TestGeminiInstallsFromRegistry(t *testing.T) {
	_, r, cfg, root := geminiSetup(t)
	r.publishGemini("0.61.0", "latest")
	r.publishGemini("0.62.0-preview.1", "preview")
	rep := install(t, root, cfg)
	sr := wantStatus(t, rep, StepGemini, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "registry signature (key "+r.KeyID+")") {
		t.Errorf("detail %q does not say the signature was checked", sr.Detail)
	}
	// The channel is resolved from the abbreviated packument; the install
	// reads the full one, whose publish times judge an expired key.
	if a := r.Accepts("/" + NpmGemini); len(a) != 2 || !strings.HasPrefix(a[0], "application/vnd.npm.install-v1+json") || a[1] != "" {
		t.Errorf("packument requests' Accept: %q", a)
	}
	vdir := filepath.Join(root, GeminiDir, "0.61.0")
	if l, err := os.Readlink(filepath.Join(root, GeminiDir, "current")); err != nil || l != "0.61.0" {
		t.Fatalf("current -> %q (%v), want the relative 0.61.0", l, err)
	}
	for _, f := range []string{GeminiEntry, "bundle/chunk-1.js", "package.json", "LICENSE"} {
		if _, err := os.Stat(filepath.Join(vdir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	rc := readReceipt(t, root)
	if e := rc.Paths[GeminiDir+"/0.61.0/"+GeminiEntry]; e == nil || e.Step != StepGemini {
		t.Errorf("the entry script is not in the receipt: %+v", e)
	}
	var st agentState
	json.Unmarshal(rc.Extra[StepGemini], &st)
	if st.Version != "0.61.0" || st.Channel != "latest" || st.Node != "/usr/bin/node" || st.Platform != "node" {
		t.Errorf("state %+v", st)
	}
	if node, err := exec.LookPath("node"); err == nil {
		// The unpacked bundle runs under real Node.
		out, err := exec.Command(node, filepath.Join(vdir, GeminiEntry)).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "0.61.0" {
			t.Errorf("node %s: %q %v", GeminiEntry, out, err)
		}
	}
	// A second run downloads nothing: not even the packument.
	r.Reset()
	cfg.Retries = 0
	rep = install(t, root, cfg)
	wantStatus(t, rep, StepGemini, provision.StatusOK)
	if n := r.Count("/" + NpmGemini + "/-/"); n != 0 {
		t.Errorf("a no-op run fetched the tarball %d times", n)
	}
	assertNoLeftovers(t, root)
}

func TestGeminiChannelOrPin(t *testing.T) {
	_, r, cfg, root := geminiSetup(t)
	r.publishGemini("0.61.0", "latest")
	r.publishGemini("0.62.0-preview.1", "preview")
	r.publishGemini("0.62.0-nightly.20261201.abc", "nightly")
	cfg.Gemini.Channel = "preview"
	wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
	if l, _ := os.Readlink(filepath.Join(root, GeminiDir, "current")); l != "0.62.0-preview.1" {
		t.Fatalf("preview: current -> %q", l)
	}
	// A pin may go back; the channel would not.
	cfg.Gemini.Channel, cfg.Gemini.Version = "", "0.61.0"
	wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
	if l, _ := os.Readlink(filepath.Join(root, GeminiDir, "current")); l != "0.61.0" {
		t.Fatalf("pin: current -> %q", l)
	}
	cfg.Gemini.Version, cfg.Gemini.Channel = "", "stable"
	sr := wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusFailed)
	if !strings.Contains(sr.Detail, `no dist-tag "stable" (it has latest, nightly, preview)`) {
		t.Errorf("detail %q", sr.Detail)
	}
	cfg.Gemini.Version, cfg.Gemini.Channel = "0.60.0", ""
	sr = wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "has no version 0.60.0") {
		t.Errorf("detail %q", sr.Detail)
	}
}

// failsAndChangesNothing runs cfg on an installed root and asserts the
// gemini step failed with want in its detail and left the tree as it was.
func failsAndChangesNothing(t *testing.T, root string, cfg Config, step, want string) {
	t.Helper()
	cfg.Upgrade = map[string]bool{AgentGemini: true, AgentCodex: true, AgentClaude: true}
	before := treehash.Shape(t, root)
	sr := wantStatus(t, install(t, root, cfg), step, provision.StatusFailed)
	if !strings.Contains(sr.Detail, want) {
		t.Errorf("detail %q, want %q", sr.Detail, want)
	}
	if after := treehash.Shape(t, root); after != before {
		t.Errorf("a failed run changed the tree:\n%s\n---\n%s", before, after)
	}
	assertNoLeftovers(t, root)
}

func TestNpmVerificationFailuresChangeNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		pub  func(r *npmReg, p *npmtest.Pub)
		want string
	}{
		{"tampered tarball", func(r *npmReg, p *npmtest.Pub) { p.IntegrityOf = []byte("the published bytes") }, "integrity mismatch"},
		{"bad signature", func(r *npmReg, p *npmtest.Pub) { p.SignAs = NpmGemini + "@0.62.0:sha512-other" }, "does not verify"},
		{"untrusted key", func(r *npmReg, p *npmtest.Pub) { p.OtherKey = true }, "signed only by keys cco does not trust"},
		{"no sha512", func(r *npmReg, p *npmtest.Pub) { p.Integrity = "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk=" }, "has no sha512"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, r, cfg, root := geminiSetup(t)
			r.publishGemini("0.61.0", "latest")
			wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
			p := npmtest.Pub{Name: NpmGemini, Version: "0.62.0", Tarball: npmTarball(t, geminiEntries("0.62.0")), Tags: []string{"latest"}}
			c.pub(r, &p)
			r.Publish(p)
			failsAndChangesNothing(t, root, cfg, StepGemini, c.want)
		})
	}
}

func TestNpmMissingSignatureWarnsOnce(t *testing.T) {
	_, r, cfg, root := geminiSetup(t)
	r.Publish(npmtest.Pub{Name: NpmGemini, Version: "0.61.0", Tarball: npmTarball(t, geminiEntries("0.61.0")), Tags: []string{"latest"}, NoSig: true})
	rep := install(t, root, cfg)
	sr := wantStatus(t, rep, StepGemini, provision.StatusChanged)
	if len(sr.Warnings) != 1 || !strings.Contains(sr.Warnings[0], "serves no signature for "+NpmGemini) {
		t.Fatalf("warnings %q, want one about the missing signature", sr.Warnings)
	}
	if !strings.Contains(sr.Detail, "sha512 (dist.integrity) only") {
		t.Errorf("detail %q", sr.Detail)
	}
	r.Publish(npmtest.Pub{Name: NpmGemini, Version: "0.62.0", Tarball: npmTarball(t, geminiEntries("0.62.0")), Tags: []string{"latest"}, NoSig: true})
	cfg.Upgrade = map[string]bool{AgentGemini: true}
	sr = wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
	if len(sr.Warnings) != 0 {
		t.Errorf("the missing signature was said again: %q", sr.Warnings)
	}
}

func TestNpmHostileTarballs(t *testing.T) {
	target := codexTarget(testPlatform(t))
	pre := "package/vendor/" + target + "/"
	for _, c := range []struct {
		name  string
		agent string
		es    []tarEntry
		want  string
	}{
		{"traversal", AgentGemini, append(geminiEntries("0.62.0"), tarEntry{name: "package/../../etc/evil", body: "x"}), "archive member"},
		{"absolute", AgentGemini, append(geminiEntries("0.62.0"), tarEntry{name: "/etc/evil", body: "x"}), "archive member"},
		{"link out of the package", AgentGemini, append(geminiEntries("0.62.0"), tarEntry{name: "package/bundle/x", typ: tar.TypeSymlink, link: "../../../../etc/shadow"}), "leaves the tree"},
		{"another package", AgentGemini, []tarEntry{{name: "package/package.json", body: `{"name": "evil", "version": "0.62.0"}`}, {name: "package/bundle/gemini.js", body: "x"}}, "not @google/gemini-cli@0.62.0"},
		{"no entry", AgentGemini, geminiEntries("0.62.0")[:1], "no bundle/gemini.js"},
		{"package is a link", AgentGemini, []tarEntry{{name: "package", typ: tar.TypeSymlink, link: "."}, {name: "other/package.json", body: "{}"}}, "package is not a directory"},
		{"codex link out of its tree", AgentCodex, codexNpmEntries("0.170.0", target, tarEntry{name: pre + "bin/evil", typ: tar.TypeSymlink, link: "../../../package.json"}), "outside package/vendor/" + target},
		{"codex without its tree", AgentCodex, []tarEntry{{name: "package/package.json", body: "{}"}}, "package/vendor is not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, r, cfg, root := geminiSetup(t)
			cfg.Agents = []string{c.agent}
			step := StepGemini
			if c.agent == AgentCodex {
				step = StepCodex
				cfg.Codex.Source = SourceNpm
				r.publishCodex("0.169.0", target)
				wantStatus(t, install(t, root, cfg), step, provision.StatusChanged)
				suffix := "-linux-x64"
				if strings.HasPrefix(target, "aarch64") {
					suffix = "-linux-arm64"
				}
				r.Publish(npmtest.Pub{Name: NpmCodex, Version: "0.170.0" + suffix, Tarball: npmTarball(t, c.es)})
				r.Publish(npmtest.Pub{Name: NpmCodex, Version: "0.170.0", Tarball: npmTarball(t, nil), Optional: map[string]string{NpmCodex + suffix: "npm:" + NpmCodex + "@0.170.0" + suffix}, Tags: []string{"latest"}})
			} else {
				r.publishGemini("0.61.0", "latest")
				wantStatus(t, install(t, root, cfg), step, provision.StatusChanged)
				r.Publish(npmtest.Pub{Name: NpmGemini, Version: "0.62.0", Tarball: npmTarball(t, c.es), Tags: []string{"latest"}, Engines: map[string]string{"node": ">=20"}})
			}
			failsAndChangesNothing(t, root, cfg, step, c.want)
			if _, err := os.Lstat(filepath.Join(root, "etc/evil")); err == nil {
				t.Error("a member was written outside the tree")
			}
		})
	}
}

func TestGeminiNodeMissingOrOld(t *testing.T) {
	s, r, cfg, root := geminiSetup(t)
	r.publishGemini("0.61.0", "latest")
	s.addClaude("2.1.330", nil, false, testPlatform(t))
	s.put("/claude/stable", []byte("2.1.330"))
	cfg.Agents = []string{AgentClaude, AgentGemini}
	writeNode(t, root, "v18.19.0")
	rep := install(t, root, cfg)
	sr := wantStatus(t, rep, StepGemini, provision.StatusFailed)
	for _, w := range []string{"needs Node.js >=20", "/usr/bin/node is v18.19.0", "gemini.node"} {
		if !strings.Contains(sr.Detail, w) {
			t.Errorf("detail %q lacks %q", sr.Detail, w)
		}
	}
	// Gemini's failure costs no other agent.
	wantStatus(t, rep, StepClaude, provision.StatusChanged)
	if _, err := os.Lstat(filepath.Join(root, GeminiDir)); err == nil {
		t.Error("a refused gemini left its directory")
	}
	os.Remove(filepath.Join(root, "usr/bin/node"))
	sr = wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusFailed)
	if !strings.Contains(sr.Detail, `no "node" on the system PATH`) {
		t.Errorf("detail %q", sr.Detail)
	}
	// gemini.node names another Node.
	writeNode(t, filepath.Join(root, "opt/node22"), "v22.1.0")
	cfg.Gemini.Node = "/opt/node22/usr/bin/node"
	wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
	if st := loadStateFromStep(t, root, StepGemini); st.Node != "/opt/node22/usr/bin/node" {
		t.Errorf("state node %q", st.Node)
	}
}

func loadStateFromStep(t *testing.T, root, step string) agentState {
	t.Helper()
	var st agentState
	if err := json.Unmarshal(readReceipt(t, root).Extra[step], &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestGeminiUpgradeRollbackPrune(t *testing.T) {
	_, r, cfg, root := geminiSetup(t)
	for _, v := range []string{"0.59.0", "0.60.0", "0.61.0"} {
		r.publishGemini(v, "latest")
		cfg.Upgrade = map[string]bool{AgentGemini: true}
		wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
	}
	if _, err := os.Stat(filepath.Join(root, GeminiDir, "0.59.0")); err == nil {
		t.Error("0.59.0 was not pruned (only the current and the previous version stay)")
	}
	if _, err := os.Stat(filepath.Join(root, GeminiDir, "0.60.0", GeminiEntry)); err != nil {
		t.Fatalf("the previous version is gone: %v", err)
	}
	sr := rollback(t, root, cfg, AgentGemini)
	if sr.Status != provision.StatusChanged {
		t.Fatalf("rollback: %s %s", sr.Status, sr.Detail)
	}
	if l, _ := os.Readlink(filepath.Join(root, GeminiDir, "current")); l != "0.60.0" {
		t.Fatalf("current -> %q after the rollback", l)
	}
	// Each kept version has its own interpreter link.
	for _, v := range []string{"0.60.0", "0.61.0"} {
		if l, err := os.Readlink(filepath.Join(root, GeminiDir, v, "node")); err != nil || l != "/usr/bin/node" {
			t.Errorf("%s's interpreter link: %q %v", v, l, err)
		}
	}
	// The channel does not move it forward again without --upgrade, and a
	// store naming an older release than the installed one is refused.
	cfg.Upgrade = nil
	wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusOK)
}

func TestClaudeAndCodexFromNpm(t *testing.T) {
	s := newStore(t)
	r := newNpmReg(t, s)
	plat := testPlatform(t)
	target := codexTarget(plat)
	bin := r.publishClaude("2.1.330", plat, "latest")
	r.publishCodex("0.169.0", target)
	cfg := r.config(AgentClaude, AgentCodex)
	cfg.Claude.Source, cfg.Codex.Source = SourceNpm, SourceNpm
	cfg.Claude.Channel = DefaultChannel(AgentClaude, SourceNpm)
	root := t.TempDir()
	rep := install(t, root, cfg)
	wantStatus(t, rep, StepClaude, provision.StatusChanged)
	wantStatus(t, rep, StepCodex, provision.StatusChanged)
	got, err := os.ReadFile(filepath.Join(root, ClaudeDir, "2.1.330", "claude"))
	if err != nil || string(got) != string(bin) {
		t.Fatalf("claude binary: %v", err)
	}
	// Only the binary: the package's README and package.json stay out.
	if ents, _ := os.ReadDir(filepath.Join(root, ClaudeDir, "2.1.330")); len(ents) != 1 {
		t.Errorf("the version directory holds %d entries, want the binary alone", len(ents))
	}
	for _, f := range []string{"bin/codex", "codex-package.json", "codex-resources/voice/lib/libz.so"} {
		if _, err := os.Lstat(filepath.Join(root, CodexDir, "0.169.0", f)); err != nil {
			t.Errorf("codex %s: %v", f, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, CodexDir, "0.169.0", "package.json")); err == nil {
		t.Error("the npm wrapper's package.json was installed into the Codex tree")
	}
	if l, _ := os.Readlink(filepath.Join(root, CodexDir, "current")); l != "0.169.0" {
		t.Errorf("codex current -> %q", l)
	}
	if st := loadStateFromStep(t, root, StepCodex); st.Platform != target || !strings.Contains(st.Verified, "registry signature") {
		t.Errorf("codex state %+v", st)
	}
	// The store's own check holds for the npm build: a Codex tree whose
	// codex-package.json is another version is refused.
	arch := "-linux-x64"
	if strings.HasPrefix(target, "aarch64") {
		arch = "-linux-arm64"
	}
	r.Publish(npmtest.Pub{Name: NpmCodex, Version: "0.170.0" + arch, Tarball: npmTarball(t, codexNpmEntries("0.169.5", target))})
	r.Publish(npmtest.Pub{Name: NpmCodex, Version: "0.170.0", Tarball: npmTarball(t, nil), Optional: map[string]string{NpmCodex + arch: "npm:" + NpmCodex + "@0.170.0" + arch}, Tags: []string{"latest"}})
	cfg.Agents = []string{AgentCodex}
	cfg.Upgrade = map[string]bool{AgentCodex: true}
	failsAndChangesNothing(t, root, cfg, StepCodex, "not the resolved 0.170.0")
	// A main package that names another vendor's package as its build.
	r.Publish(npmtest.Pub{Name: NpmCodex, Version: "0.171.0", Tarball: npmTarball(t, nil), Optional: map[string]string{NpmCodex + arch: "npm:evil@0.171.0" + arch}, Tags: []string{"latest"}})
	failsAndChangesNothing(t, root, cfg, StepCodex, "not a build of this release")
}

func TestTarballOnAnotherHostIsFetchedFromTheRegistry(t *testing.T) {
	_, r, cfg, root := geminiSetup(t)
	tb := npmTarball(t, geminiEntries("0.61.0"))
	r.Publish(npmtest.Pub{Name: NpmGemini, Version: "0.61.0", Tarball: tb, Tags: []string{"latest"}, TarballURL: "https://elsewhere.invalid/gemini-cli-0.61.0.tgz"})
	wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
	if n := r.Count("/" + NpmGemini + "/-/gemini-cli-0.61.0.tgz"); n != 1 {
		t.Errorf("the tarball was fetched %d times from the registry, want once", n)
	}
}

func TestGeminiBundle(t *testing.T) {
	_, r, cfg, _ := geminiSetup(t)
	r.publishGemini("0.61.0", "latest")
	out := filepath.Join(t.TempDir(), "b.tar.xz")
	if err := WriteBundle(context.Background(), cfg, out); err != nil {
		t.Fatal(err)
	}
	r.Close() // the install reaches nothing
	inst := DefaultConfig()
	inst.Agents, inst.Bundle, inst.NpmKeys, inst.Progress = []string{AgentGemini}, out, r.KeysFile, "never"
	// The bundle carries no Node: the link is made from the installing
	// machine's gemini.node.
	root := t.TempDir()
	writeNodeAt(t, root, "/opt/node/bin/node", "v22.1.0")
	inst.Gemini.Node = "/opt/node/bin/node"
	sr := wantStatus(t, install(t, root, inst), StepGemini, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "registry signature") || !strings.Contains(sr.Detail, "the bundle") {
		t.Errorf("detail %q", sr.Detail)
	}
	if _, err := os.Stat(filepath.Join(root, GeminiDir, "0.61.0", GeminiEntry)); err != nil {
		t.Fatal(err)
	}
	if l := interpreterLink(t, root); l != "/opt/node/bin/node" {
		t.Errorf("the interpreter link points at %q, want this machine's gemini.node", l)
	}
}

func TestNpmKeysFile(t *testing.T) {
	_, r, cfg, root := geminiSetup(t)
	r.publishGemini("0.61.0", "latest")
	// Without npm_keys the registry's own key is unknown: it is not
	// fetched from the registry, which could serve any key.
	cfg.NpmKeys = ""
	sr := wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "set npm_keys") {
		t.Errorf("detail %q", sr.Detail)
	}
	bad := filepath.Join(t.TempDir(), "keys.json")
	os.WriteFile(bad, []byte(`{"keys": [{"keyid": "x", "keytype": "ssh-rsa", "scheme": "x", "key": "AAAA"}]}`), 0o644)
	cfg.NpmKeys = bad
	sr = wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "npm_keys "+bad) || !strings.Contains(sr.Detail, "ecdsa-sha2-nistp256") {
		t.Errorf("detail %q", sr.Detail)
	}
}

// The shipped keys are npm's: a real registry signature (that of
// @anthropic-ai/claude-code 2.1.98, whose integrity the registry serves)
// verifies with them, and fails with one byte changed.
func TestShippedKeysVerifyARealSignature(t *testing.T) {
	keys, err := loadNpmKeys("")
	if err != nil {
		t.Fatal(err)
	}
	const integ = "sha512-qecREauMWXHplkpjqsuDuUv4ww+NprMl71k9sMuLkZU7qwjLMkTPxRBjuKvZWWMrAPvZWdGZE9LljUTfCQ1lWQ=="
	sig := []npmSignature{{KeyID: "SHA256:DhQ8wR5APBvFHLF/+Tc+AYvPOdTpcIDqOhxsBHRwC7U", Sig: "MEQCIGvolW/eLJuocfuN94cinl0Vz9arMrshmIhulXk/9JEBAiAW18CskQ+uEkWf90x4Dc0TqDoRBQ7lmCAXhpXpqbEJDA=="}}
	published := time.Date(2026, 4, 9, 19, 21, 16, 0, time.UTC)
	if kid, err := verifyNpmSignatures(keys, sig, NpmClaude, "2.1.98", integ, published); err != nil || kid != sig[0].KeyID {
		t.Fatalf("the real signature does not verify: %q %v", kid, err)
	}
	if _, err := verifyNpmSignatures(keys, sig, NpmClaude, "2.1.99", integ, published); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("another version verified: %v", err)
	}
	// The first key expired on 2025-01-29: it vouches for what was
	// published before, not after, and not when the time is unknown.
	old := []npmSignature{{KeyID: "SHA256:jl3bwswu80PjjokCgh0o2w5c2U4LhQAE57gj9cz1kzA", Sig: "MEUCIQ=="}}
	for _, when := range []time.Time{{}, published} {
		if _, err := verifyNpmSignatures(keys, old, NpmClaude, "2.1.98", integ, when); err == nil || !strings.Contains(err.Error(), "expired 2025-01-29") {
			t.Errorf("published %v: an expired key's signature: %v", when, err)
		}
	}
	if _, err := verifyNpmSignatures(keys, old, NpmClaude, "0.1.0", integ, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a key that had not expired at publication was not used: %v", err)
	}
}
