package vendorfetch

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

func readReceipt(t *testing.T, root string) *provision.Receipt {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, provision.ReceiptPath))
	if err != nil {
		t.Fatal(err)
	}
	rc := provision.NewReceipt()
	if err := json.Unmarshal(b, rc); err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestClaudeInstallsFromChannel(t *testing.T) {
	s := newStore(t)
	plat := testPlatform(t)
	s.put("/claude/stable", []byte("2.1.300\n"))
	s.addClaude("2.1.300", nil, false, plat, "linux-x64-musl", "linux-arm64")
	root := t.TempDir()
	rep := install(t, root, s.config(AgentClaude))
	sr := wantStatus(t, rep, StepClaude, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "sha256 only") {
		t.Errorf("detail %q does not say that only the checksum was verified", sr.Detail)
	}
	if len(sr.Warnings) == 0 || !strings.Contains(sr.Warnings[0], "claude.signing_key") {
		t.Errorf("warnings %q do not point at claude.signing_key", sr.Warnings)
	}
	bin := filepath.Join(root, ClaudeDir, "2.1.300", "claude")
	b, err := os.ReadFile(bin)
	if err != nil || !bytes.Equal(b, claudeBinary("2.1.300", plat, 200<<10)) {
		t.Fatalf("installed binary wrong: %v", err)
	}
	fi, _ := os.Stat(bin)
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", fi.Mode())
	}
	if l, _ := os.Readlink(filepath.Join(root, ClaudeDir, "current")); l != "2.1.300" {
		t.Errorf("current -> %q, want the relative 2.1.300", l)
	}
	rc := readReceipt(t, root)
	if e := rc.Paths[ClaudeDir+"/2.1.300/claude"]; e == nil || e.SHA256 != sum(b) || e.Kind != provision.KindFile {
		t.Errorf("receipt entry of the binary: %+v", e)
	}
	if e := rc.Paths[ClaudeDir+"/current"]; e == nil || e.Kind != provision.KindLink || e.Target != "2.1.300" {
		t.Errorf("receipt entry of current: %+v", e)
	}
	if _, ok := rc.Dirs[ClaudeDir+"/2.1.300"]; !ok {
		t.Errorf("the version directory is not recorded: %v", rc.Dirs)
	}
	var st agentState
	json.Unmarshal(rc.Extra[StepClaude], &st)
	if st.Version != "2.1.300" || st.Channel != "stable" || st.Platform != plat || !strings.HasSuffix(st.Source, "/claude") {
		t.Errorf("state %+v", st)
	}
	if n := s.count("/claude/stable"); n != 1 {
		t.Errorf("resolving the channel took %d requests, want 1", n)
	}
	assertNoLeftovers(t, root)
}

func TestClaudeMuslHost(t *testing.T) {
	s := newStore(t)
	plat := testPlatform(t)
	musl := plat + "-musl"
	s.put("/claude/latest", []byte("2.1.301"))
	s.addClaude("2.1.301", nil, false, plat, musl)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "lib"), 0o755)
	arch := map[string]string{"linux-x64": "x86_64", "linux-arm64": "aarch64"}[plat]
	os.WriteFile(filepath.Join(root, "lib", "libc.musl-"+arch+".so.1"), []byte("musl"), 0o755)
	cfg := s.config(AgentClaude)
	cfg.Claude.Channel = "latest"
	wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	b, _ := os.ReadFile(filepath.Join(root, ClaudeDir, "2.1.301", "claude"))
	if !bytes.Equal(b, claudeBinary("2.1.301", musl, 200<<10)) {
		t.Fatal("a musl root did not get the -musl build")
	}
	if s.count("/claude/2.1.301/"+plat+"/") != 0 {
		t.Error("fetched the glibc build for a musl root")
	}
}

func TestClaudePrefersZstAndVerifiesDecompressedBytes(t *testing.T) {
	s := newStore(t)
	plat := testPlatform(t)
	s.addClaude("2.1.302", nil, true, plat)
	root := t.TempDir()
	cfg := s.config(AgentClaude)
	cfg.Claude.Version = "2.1.302"
	sr := wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "claude.zst") {
		t.Errorf("detail %q: not from the .zst", sr.Detail)
	}
	if n := s.count("/claude/2.1.302/" + plat + "/claude "); n != 0 {
		t.Errorf("also fetched the plain binary")
	}
	for _, r := range s.reqs() {
		if strings.HasSuffix(r, "/"+plat+"/claude") {
			t.Errorf("fetched the plain binary: %s", r)
		}
	}
	b, _ := os.ReadFile(filepath.Join(root, ClaudeDir, "2.1.302", "claude"))
	if !bytes.Equal(b, claudeBinary("2.1.302", plat, 200<<10)) {
		t.Fatal("decompressed bytes differ")
	}

	// A .zst whose decompressed bytes differ from the manifest is refused.
	s.addClaude("2.1.303", nil, true, plat)
	s.put("/claude/2.1.303/"+plat+"/claude.zst", zstdOf(t, claudeBinary("2.1.303", "evil", 200<<10)))
	before := treehash.Shape(t, root)
	cfg.Claude.Version = "2.1.303"
	sr = wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "checksum mismatch") {
		t.Errorf("detail %q", sr.Detail)
	}
	if after := treehash.Shape(t, root); after != before {
		t.Errorf("the installed tree changed after a failure:\n%s\n---\n%s", before, after)
	}
	assertNoLeftovers(t, root)
}

// failureCase breaks the store in one way; every case must fail, leave the
// previous install byte-identical and leave no staging or .partial behind.
func TestClaudeFailuresLeavePreviousInstall(t *testing.T) {
	plat := testPlatform(t)
	key, keyPath, fp := newKey(t)
	other, _, _ := newKey(t)
	cases := []struct {
		name   string
		signed bool
		breakf func(s *store)
		want   string
	}{
		{"404", false, func(s *store) { s.del("/claude/2.1.400/manifest.json") }, "version 2.1.400 does not exist at"},
		{"checksum", false, func(s *store) {
			s.put("/claude/2.1.400/"+plat+"/claude", claudeBinary("2.1.400", "tampered", 200<<10))
		}, "checksum mismatch"},
		{"size short", false, func(s *store) {
			s.put("/claude/2.1.400/"+plat+"/claude", claudeBinary("2.1.400", plat, 100<<10))
		}, "size mismatch"},
		{"size long", false, func(s *store) {
			s.put("/claude/2.1.400/"+plat+"/claude", claudeBinary("2.1.400", plat, 300<<10))
		}, "size mismatch"},
		{"bad signature", true, func(s *store) {
			m := claudeManifest{}
			b := s.files["/claude/2.1.400/manifest.json"]
			json.Unmarshal(b, &m)
			m.BuildDate = "tampered"
			nb, _ := json.Marshal(m)
			s.put("/claude/2.1.400/manifest.json", nb)
		}, "does not verify"},
		{"wrong key", true, func(s *store) {
			s.put("/claude/2.1.400/manifest.json.sig", sign(t, other, s.files["/claude/2.1.400/manifest.json"]))
		}, "does not verify"},
		{"missing sig", true, func(s *store) { s.del("/claude/2.1.400/manifest.json.sig") }, "manifest.json.sig is missing"},
		{"bad version from channel", false, func(s *store) { s.put("/claude/stable", []byte("../../etc")) }, `"../../etc" is not a version`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			s.put("/claude/stable", []byte("2.1.399"))
			s.addClaude("2.1.399", key, false, plat)
			root := t.TempDir()
			cfg := s.config(AgentClaude)
			if tc.signed {
				cfg.Claude.SigningKey, cfg.Claude.SigningFingerprint = keyPath, fp
			}
			wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
			before := treehash.Shape(t, root)
			s.put("/claude/stable", []byte("2.1.400"))
			s.addClaude("2.1.400", key, false, plat)
			tc.breakf(s)
			cfg.Upgrade = map[string]bool{AgentClaude: true}
			sr := wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusFailed)
			if !strings.Contains(sr.Detail, tc.want) || !strings.HasPrefix(sr.Detail, "claude") {
				t.Errorf("detail %q, want it to name claude and say %q", sr.Detail, tc.want)
			}
			if after := treehash.Shape(t, root); after != before {
				t.Errorf("the installed tree changed:\n%s\n---\n%s", before, after)
			}
			assertNoLeftovers(t, root)
		})
	}
}

func TestClaudeSignatureVerified(t *testing.T) {
	plat := testPlatform(t)
	key, keyPath, fp := newKey(t)
	s := newStore(t)
	s.addClaude("2.1.500", key, false, plat)
	cfg := s.config(AgentClaude)
	cfg.Claude.Version = "2.1.500"
	cfg.Claude.SigningKey, cfg.Claude.SigningFingerprint = keyPath, fp
	sr := wantStatus(t, install(t, t.TempDir(), cfg), StepClaude, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "OpenPGP signature (key "+fp) {
		t.Errorf("detail %q does not report the signature", sr.Detail)
	}
	if len(sr.Warnings) != 0 {
		t.Errorf("warnings with a key configured: %q", sr.Warnings)
	}

	// A key file whose fingerprint is not the expected one is refused,
	// even though it would verify this signature.
	cfg.Claude.SigningFingerprint = VendorFingerprint
	sr = wantStatus(t, install(t, t.TempDir(), cfg), StepClaude, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "not the expected "+VendorFingerprint) {
		t.Errorf("detail %q", sr.Detail)
	}

	// A version older than the first signed one is refused with a key set.
	s.addClaude("2.1.88", nil, false, plat)
	cfg.Claude.SigningFingerprint, cfg.Claude.Version = fp, "2.1.88"
	sr = wantStatus(t, install(t, t.TempDir(), cfg), StepClaude, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "older than 2.1.89") {
		t.Errorf("detail %q", sr.Detail)
	}
	if s.count("/claude/2.1.88/") != 0 {
		t.Error("fetched an unsigned release although it is refused")
	}
}

func TestNotFoundReadsDifferentlyFromNetworkFailure(t *testing.T) {
	plat := testPlatform(t)
	s := newStore(t)
	s.addClaude("2.1.600", nil, false, plat)
	cfg := s.config(AgentClaude)
	cfg.Claude.Version = "2.1.601"
	nf := wantStatus(t, install(t, t.TempDir(), cfg), StepClaude, provision.StatusFailed).Detail
	if !strings.Contains(nf, "version 2.1.601 does not exist at "+s.srv.URL) {
		t.Errorf("404 detail %q", nf)
	}
	if n := s.count("/claude/2.1.601/manifest.json"); n != 1 {
		t.Errorf("a 404 was retried: %d requests", n)
	}
	s.fail["/claude/2.1.600/manifest.json"] = 503
	cfg.Claude.Version = "2.1.600"
	cfg.Retries = 2
	ne := wantStatus(t, install(t, t.TempDir(), cfg), StepClaude, provision.StatusFailed).Detail
	if strings.Contains(ne, "does not exist") || !strings.Contains(ne, "503") || !strings.Contains(ne, "gave up after 3 attempts") {
		t.Errorf("network failure detail %q", ne)
	}
	if n := s.count("/claude/2.1.600/manifest.json"); n != 3 {
		t.Errorf("transient failure tried %d times, want 3", n)
	}
}
