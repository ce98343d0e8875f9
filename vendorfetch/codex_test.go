package vendorfetch

import (
	"archive/tar"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

func TestCodexInstallsPackageTree(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latest  string
		opts    codexOpts
		wantExt string
	}{
		{"plain channel, ./ members, gz", "0.169.0\n", codexOpts{dotSlash: true}, ".tar.gz"},
		{"rust-v channel, bare members", "rust-v0.169.0", codexOpts{}, ".tar.gz"},
		{"json channel, zst", `{"tag_name": "rust-v0.169.0"}`, codexOpts{zst: true}, ".tar.zst"},
		{"json version field", `{"version": "0.169.0"}`, codexOpts{}, ".tar.gz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			s.put("/codex/channels/latest", []byte(tc.latest))
			s.addCodex("0.169.0", true, false, tc.opts)
			root := t.TempDir()
			sr := wantStatus(t, install(t, root, s.config(AgentCodex)), StepCodex, provision.StatusChanged)
			if !strings.Contains(sr.Detail, tc.wantExt) {
				t.Errorf("detail %q, want the %s asset", sr.Detail, tc.wantExt)
			}
			dir := filepath.Join(root, CodexDir, "0.169.0")
			for _, f := range []string{"codex-package.json", "bin/codex", "bin/codex-code-mode-host", "codex-path/rg", "codex-resources/bwrap"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("missing %s: %v", f, err)
				}
			}
			if l, _ := os.Readlink(filepath.Join(root, CodexDir, "current")); l != "0.169.0" {
				t.Errorf("current -> %q", l)
			}
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				fi, _ := os.Lstat(p)
				if fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0 {
					t.Errorf("%s is group/other-writable: %v", p, fi.Mode())
				}
				if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != provision.SystemUID() || int(st.Gid) != provision.SystemGID() {
					t.Errorf("%s owned by %d:%d (never the archive's 1001)", p, st.Uid, st.Gid)
				}
				return nil
			})
			rc := readReceipt(t, root)
			if e := rc.Paths[CodexDir+"/0.169.0/bin/codex"]; e == nil || e.Mode != "0755" || e.SHA256 == "" {
				t.Errorf("receipt lacks bin/codex: %+v", e)
			}
			if e := rc.Paths[CodexDir+"/0.169.0/codex-resources/voice/libfoo.so.1"]; e == nil || e.Kind != provision.KindLink {
				t.Errorf("receipt lacks the link: %+v", e)
			}
			if _, ok := rc.Dirs[CodexDir+"/0.169.0/codex-resources/voice"]; !ok {
				t.Errorf("receipt lacks the implied directory")
			}
			assertNoLeftovers(t, root)
		})
	}
}

func TestCodexGitHubFallback(t *testing.T) {
	s := newStore(t)
	// The primary store is down (channel and assets); GitHub serves both.
	s.fail["/codex/channels/latest"] = 500
	s.put("/gh/api/latest", []byte(`{"tag_name": "rust-v0.170.0", "assets": []}`))
	s.addCodex("0.170.0", false, true, codexOpts{})
	root := t.TempDir()
	cfg := s.config(AgentCodex)
	cfg.Retries = 1
	sr := wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "/gh/download/rust-v0.170.0/") {
		t.Errorf("detail %q: not from GitHub", sr.Detail)
	}
	if s.count("/codex/releases/0.170.0/"+SumsAsset) != 1 {
		t.Error("the primary store was not tried first")
	}

	// With SHA256SUMS missing on GitHub, the API's digest stands in.
	s2 := newStore(t)
	arch := s2.addCodex("0.171.0", false, true, codexOpts{})
	s2.del("/gh/download/rust-v0.171.0/" + SumsAsset)
	asset := "codex-package-" + codexTarget(testPlatform(t)) + ".tar.gz"
	api, _ := json.Marshal(map[string]any{"tag_name": "rust-v0.171.0", "assets": []map[string]string{{"name": asset, "digest": "sha256:" + sum(arch)}}})
	s2.put("/gh/api/latest", api)
	cfg = s2.config(AgentCodex)
	cfg.Codex.BaseURLs = nil
	wantStatus(t, install(t, t.TempDir(), cfg), StepCodex, provision.StatusChanged)
}

func TestCodexFailuresLeavePreviousInstall(t *testing.T) {
	target := codexTarget(testPlatform(t))
	asset := "/codex/releases/0.181.0/codex-package-" + target + ".tar.gz"
	sums := "/codex/releases/0.181.0/" + SumsAsset
	cases := []struct {
		name   string
		breakf func(s *store)
		want   string
	}{
		{"404", func(s *store) { s.del(sums); s.del(asset) }, "version 0.181.0 does not exist at any store"},
		{"checksum", func(s *store) { s.put(asset, codexArchive(t, "0.181.0", target, codexOpts{dotSlash: true})) }, "checksum mismatch"},
		{"no sums line", func(s *store) { s.put(sums, []byte(sum([]byte("x"))+"  other.tar.gz\n")) }, "has no line for"},
		{"two sums lines", func(s *store) {
			b := s.files[sums]
			s.put(sums, append(b, []byte(strings.SplitN(string(b), "\n", 2)[0]+"\n")...))
		}, "2 times"},
		{"layout 2", func(s *store) { s.addCodex("0.181.0", true, false, codexOpts{layout: 2}) }, "layoutVersion 2"},
		{"version differs", func(s *store) { s.addCodex("0.181.0", true, false, codexOpts{sumsVersion: "0.1.0"}) }, `version "0.1.0", not the resolved 0.181.0`},
		{"entrypoint not executable", func(s *store) { s.addCodex("0.181.0", true, false, codexOpts{noExec: true}) }, "not executable"},
		{"hostile member", func(s *store) {
			s.addCodex("0.181.0", true, false, codexOpts{extra: []tarEntry{{name: "codex-path/evil", typ: tar.TypeSymlink, link: "../../../../etc"}}})
		}, `"codex-path/evil"`},
		{"channel not a version", func(s *store) { s.put("/codex/channels/latest", []byte("0.181.0/../../x")) }, "is not a version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			s.put("/codex/channels/latest", []byte("0.180.0"))
			s.addCodex("0.180.0", true, false, codexOpts{})
			root := t.TempDir()
			cfg := s.config(AgentCodex)
			cfg.Codex.GitHubBaseURL, cfg.Codex.GitHubAPIURL = "", ""
			wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusChanged)
			before := treehash.Shape(t, root)
			s.put("/codex/channels/latest", []byte("0.181.0"))
			s.addCodex("0.181.0", true, false, codexOpts{})
			tc.breakf(s)
			cfg.Upgrade = map[string]bool{AgentCodex: true}
			sr := wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusFailed)
			if !strings.Contains(sr.Detail, tc.want) || !strings.HasPrefix(sr.Detail, "codex") {
				t.Errorf("detail %q, want it to name codex and say %q", sr.Detail, tc.want)
			}
			if after := treehash.Shape(t, root); after != before {
				t.Errorf("the installed tree changed:\n%s\n---\n%s", before, after)
			}
			assertNoLeftovers(t, root)
		})
	}
}

func TestCodexUpgradeKeepsPrevious(t *testing.T) {
	s := newStore(t)
	s.put("/codex/channels/latest", []byte("0.190.0"))
	s.addCodex("0.190.0", true, false, codexOpts{})
	root := t.TempDir()
	cfg := s.config(AgentCodex)
	wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusChanged)
	s.put("/codex/channels/latest", []byte("0.191.0"))
	s.addCodex("0.191.0", true, false, codexOpts{})
	// Without an upgrade request the installed version stays.
	wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusOK)
	cfg.Upgrade = map[string]bool{AgentCodex: true}
	sr := wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "0.191.0") {
		t.Errorf("detail %q", sr.Detail)
	}
	if l, _ := os.Readlink(filepath.Join(root, CodexDir, "current")); l != "0.191.0" {
		t.Errorf("current -> %q", l)
	}
	if _, err := os.Stat(filepath.Join(root, CodexDir, "0.190.0", "bin/codex")); err != nil {
		t.Errorf("the previous version was not kept: %v", err)
	}
	var st agentState
	json.Unmarshal(readReceipt(t, root).Extra[StepCodex], &st)
	if st.Previous != "0.190.0" {
		t.Errorf("state %+v does not remember the previous version", st)
	}
}

func TestSetuidStrippedIsReported(t *testing.T) {
	s := newStore(t)
	s.addCodex("0.200.0", true, false, codexOpts{extra: []tarEntry{{name: "codex-resources/helper", body: "x", mode: 0o4755}}})
	cfg := s.config(AgentCodex)
	cfg.Codex.Version = "0.200.0"
	root := t.TempDir()
	sr := wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "stripped setuid/setgid bits from codex-resources/helper") {
		t.Errorf("detail %q", sr.Detail)
	}
	fi, _ := os.Stat(filepath.Join(root, CodexDir, "0.200.0", "codex-resources/helper"))
	if fi.Mode()&fs.ModeSetuid != 0 {
		t.Error("setuid kept")
	}
}

func TestCodexArchiveBeyondLimitStopsDownload(t *testing.T) {
	s := newStore(t)
	var noise strings.Builder
	for i := 0; noise.Len() < 16<<10; i++ {
		noise.WriteString(sum([]byte{byte(i), byte(i >> 8)}))
	}
	s.addCodex("0.210.0", true, false, codexOpts{extra: []tarEntry{{name: "noise", body: noise.String(), mode: 0o644}}})
	cfg := s.config(AgentCodex)
	cfg.Codex.Version = "0.210.0"
	cfg.Codex.GitHubBaseURL = ""
	cfg.UnpackLimit = 4 << 10 // the archive is larger than that compressed
	root := t.TempDir()
	sr := wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "more than the expected 4096 bytes") {
		t.Errorf("detail %q", sr.Detail)
	}
	assertNoLeftovers(t, root)
}
