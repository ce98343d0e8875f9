package vendorfetch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/provision"
)

// With no claude.signing_key, the manifest's signature is checked anyway:
// the key comes from the store's copy, must match the pinned fingerprint,
// and is cached under /var/lib/cco, so that later runs need no fetch.
func TestClaudeSignatureOnByDefault(t *testing.T) {
	plat := testPlatform(t)
	key, keyPath, fp := newKey(t)
	armored, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t)
	s.put("/keys/claude-code.asc", armored)
	s.put("/claude/stable", []byte("2.1.500\n"))
	s.addClaude("2.1.500", key, false, plat)
	cfg := s.config(AgentClaude)
	cfg.Claude.SigningFingerprint = fp
	root := t.TempDir()
	sr := wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "OpenPGP signature (key "+fp) {
		t.Errorf("detail %q: the signature was not checked by default", sr.Detail)
	}
	if len(sr.Warnings) != 0 {
		t.Errorf("warnings with the vendor's key at hand: %q", sr.Warnings)
	}
	if b, err := os.ReadFile(filepath.Join(root, KeyCachePath)); err != nil || string(b) != string(armored) {
		t.Fatalf("the key is not cached at %s: %v", KeyCachePath, err)
	}
	// The cache serves the next release: the store's copy is gone.
	s.del("/keys/claude-code.asc")
	s.put("/claude/stable", []byte("2.1.501\n"))
	s.addClaude("2.1.501", key, false, plat)
	cfg.Upgrade = map[string]bool{AgentClaude: true}
	sr = wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "OpenPGP signature (key "+fp) {
		t.Errorf("detail %q: the cached key was not used", sr.Detail)
	}
	// A key at the store that is not the pinned one is refused.
	other, otherPath, _ := newKey(t)
	_ = other
	wrong, _ := os.ReadFile(otherPath)
	s.put("/keys/claude-code.asc", wrong)
	sr = wantStatus(t, install(t, t.TempDir(), cfg), StepClaude, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "not the expected "+fp) {
		t.Errorf("detail %q: a key of another fingerprint must be refused", sr.Detail)
	}
}

// Where no key can be had, the run checks sha256 only and says why once:
// the next run, for the same reason, does not say it again.
func TestNoKeySaidOnce(t *testing.T) {
	plat := testPlatform(t)
	s := newStore(t)
	s.put("/claude/stable", []byte("2.1.500\n"))
	s.addClaude("2.1.500", nil, false, plat)
	cfg := s.config(AgentClaude)
	root := t.TempDir()
	sr := wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	if len(sr.Warnings) != 1 || !strings.Contains(sr.Warnings[0], "could not be fetched") {
		t.Fatalf("warnings %q, want one saying why there is no key", sr.Warnings)
	}
	s.put("/claude/stable", []byte("2.1.501\n"))
	s.addClaude("2.1.501", nil, false, plat)
	cfg.Upgrade = map[string]bool{AgentClaude: true}
	sr = wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	for _, w := range sr.Warnings {
		if strings.Contains(w, "signing key") {
			t.Errorf("the same reason said again: %q", w)
		}
	}
}

// A checksum mismatch at one store is a warning in the report even when
// the next store's copy verifies and is installed.
func TestIntegrityFailureIsLoudDespiteFallback(t *testing.T) {
	target := codexTarget(testPlatform(t))
	s := newStore(t)
	s.put("/codex/channels/latest", []byte("0.181.0"))
	s.addCodex("0.181.0", true, true, codexOpts{})
	s.put("/codex/releases/0.181.0/codex-package-"+target+".tar.gz", codexArchive(t, "0.181.0", target, codexOpts{dotSlash: true}))
	sr := wantStatus(t, install(t, t.TempDir(), s.config(AgentCodex)), StepCodex, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "/gh/download/") {
		t.Fatalf("detail %q: the fallback store was not used", sr.Detail)
	}
	if len(sr.Warnings) == 0 || !strings.Contains(strings.Join(sr.Warnings, "\n"), "checksum mismatch") {
		t.Errorf("warnings %q: the mismatch at the first store is not reported", sr.Warnings)
	}
}
