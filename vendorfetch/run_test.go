package vendorfetch

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/provision"
)

// both publishes a Claude and a Codex release on channels.
func both(t *testing.T) (*store, Config) {
	s := newStore(t)
	plat := testPlatform(t)
	s.put("/claude/stable", []byte("2.1.700"))
	s.addClaude("2.1.700", nil, true, plat)
	s.put("/codex/channels/latest", []byte("0.300.0"))
	s.addCodex("0.300.0", true, false, codexOpts{})
	return s, s.config(AgentClaude, AgentCodex)
}

func TestNoOpRunDownloadsNothing(t *testing.T) {
	s, cfg := both(t)
	root := t.TempDir()
	rep := install(t, root, cfg)
	wantStatus(t, rep, StepClaude, provision.StatusChanged)
	wantStatus(t, rep, StepCodex, provision.StatusChanged)
	receipt, _ := os.ReadFile(filepath.Join(root, provision.ReceiptPath))
	s.reset()
	// Count the installed files a run hashes: a no-op run trusts the
	// receipt's stat stamps and reads none (the real binary is 250 MB).
	hashed := 0
	old := hashFile
	hashFile = func(r provision.FileReader, p string) (string, error) { hashed++; return old(r, p) }
	defer func() { hashFile = old }()
	rep = install(t, root, cfg)
	wantStatus(t, rep, StepClaude, provision.StatusOK)
	wantStatus(t, rep, StepCodex, provision.StatusOK)
	// The only requests: one small channel request per agent, for the
	// "newer version available" notice. Nothing is downloaded.
	if r := s.reqs(); len(r) != 2 || s.count("/claude/stable") != 1 || s.count("/codex/channels/latest") != 1 {
		t.Fatalf("a no-op run may only resolve each channel once, sent: %v", r)
	}
	for _, sr := range rep.Steps {
		for _, w := range sr.Warnings {
			if strings.Contains(w, "is available") {
				t.Errorf("%s: a notice without a newer version: %v", sr.ID, w)
			}
		}
	}
	s.reset()
	if hashed != 0 {
		t.Errorf("a no-op run hashed %d installed files", hashed)
	}
	if after, _ := os.ReadFile(filepath.Join(root, provision.ReceiptPath)); !bytes.Equal(after, receipt) {
		t.Error("a no-op run rewrote the receipt")
	}

	// An upgrade request that finds the same version costs one small
	// request per agent (the channel) and downloads nothing.
	cfg.Upgrade = map[string]bool{AgentClaude: true, AgentCodex: true}
	rep = install(t, root, cfg)
	wantStatus(t, rep, StepClaude, provision.StatusOK)
	wantStatus(t, rep, StepCodex, provision.StatusOK)
	if r := s.reqs(); len(r) != 2 || s.count("/claude/stable") != 1 || s.count("/codex/channels/latest") != 1 {
		t.Fatalf("an upgrade to the same version sent %v, want the two channel requests only", r)
	}
}

func TestEditedBinaryIsRepaired(t *testing.T) {
	s, cfg := both(t)
	cfg.Agents = []string{AgentClaude}
	root := t.TempDir()
	wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	// An edited binary (its stat stamp moves) is hashed, found changed
	// and re-fetched, without re-resolving the channel.
	bin := filepath.Join(root, ClaudeDir, "2.1.700", "claude")
	b, _ := os.ReadFile(bin)
	b[0] ^= 0xff
	os.WriteFile(bin, b, 0o755)
	s.reset()
	sr := wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "installed claude 2.1.700") {
		t.Errorf("detail %q", sr.Detail)
	}
	if s.count("/claude/stable") != 0 {
		t.Error("repairing an installed version re-resolved the channel")
	}
	if got, _ := os.ReadFile(bin); got[0] == b[0] {
		t.Error("the edited binary was not replaced")
	}
}

func TestOneAgentsFailureDoesNotCostTheOther(t *testing.T) {
	s, cfg := both(t)
	s.del("/claude/2.1.700/manifest.json")
	root := t.TempDir()
	rep := install(t, root, cfg)
	sr := wantStatus(t, rep, StepClaude, provision.StatusFailed)
	if !strings.HasPrefix(sr.Detail, "claude 2.1.700: version 2.1.700 does not exist") {
		t.Errorf("claude detail %q", sr.Detail)
	}
	wantStatus(t, rep, StepCodex, provision.StatusChanged)
	if rep.ExitCode() != provision.ExitFailed {
		t.Errorf("exit %d, want 1", rep.ExitCode())
	}

	s2, cfg2 := both(t)
	s2.fail["/codex/channels/latest"] = 500
	cfg2.Codex.GitHubAPIURL = ""
	cfg2.Retries = 0
	rep = install(t, t.TempDir(), cfg2)
	wantStatus(t, rep, StepClaude, provision.StatusChanged)
	if sr := wantStatus(t, rep, StepCodex, provision.StatusFailed); !strings.Contains(sr.Detail, "codex: resolving the latest channel") {
		t.Errorf("codex detail %q", sr.Detail)
	}
}

func TestCutTransferResumesWithRange(t *testing.T) {
	s, cfg := both(t)
	plat := testPlatform(t)
	cfg.Agents = []string{AgentClaude}
	s.del("/claude/2.1.700/" + plat + "/claude.zst")
	path := "/claude/2.1.700/" + plat + "/claude"
	s.cut[path] = 70 << 10
	root := t.TempDir()
	wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	want := "GET " + path + " bytes=71680-"
	found := false
	for _, r := range s.reqs() {
		found = found || r == want
	}
	if !found {
		t.Fatalf("no resumed request %q in %v", want, s.reqs())
	}
	b, _ := os.ReadFile(filepath.Join(root, ClaudeDir, "2.1.700", "claude"))
	if !bytes.Equal(b, claudeBinary("2.1.700", plat, 200<<10)) {
		t.Fatal("resumed bytes differ")
	}

	// A server that ignores Range sends the whole body again: the partial
	// file and the hash start over, and the result is still right.
	s.noRange = true
	s.cut[path] = 70 << 10
	root = t.TempDir()
	wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	b, _ = os.ReadFile(filepath.Join(root, ClaudeDir, "2.1.700", "claude"))
	if !bytes.Equal(b, claudeBinary("2.1.700", plat, 200<<10)) {
		t.Fatal("restarted bytes differ")
	}
	assertNoLeftovers(t, root)
}

func TestStalledTransferTimesOut(t *testing.T) {
	s, cfg := both(t)
	cfg.Agents = []string{AgentClaude}
	plat := testPlatform(t)
	s.stall["/claude/2.1.700/"+plat+"/claude.zst"] = true
	cfg.Timeout = 200 * time.Millisecond
	cfg.Retries = 1
	start := time.Now()
	sr := wantStatus(t, install(t, t.TempDir(), cfg), StepClaude, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "no data for 200ms (timeout)") || !strings.Contains(sr.Detail, "gave up after 2 attempts") {
		t.Errorf("detail %q", sr.Detail)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestProgressLines(t *testing.T) {
	_, cfg := both(t)
	cfg.Agents = []string{AgentClaude}
	var log bytes.Buffer
	cfg.Log = &log
	old := progressInterval
	progressInterval = 0
	defer func() { progressInterval = old }()
	wantStatus(t, install(t, t.TempDir(), cfg), StepClaude, provision.StatusChanged)
	if !strings.Contains(log.String(), "downloading claude.zst: 0 of 0 MB (") {
		t.Errorf("no plain progress line in %q", log.String())
	}
	if strings.Contains(log.String(), "\r") {
		t.Error("a bar was drawn on a log that is not a terminal")
	}
}

func TestProgressBarOnlyWhenAsked(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if newProgress(f, "auto").bar {
		t.Error("auto drew a bar on a file that is not a terminal")
	}
	if newProgress(f, "never").bar {
		t.Error("never drew a bar")
	}
	var b bytes.Buffer
	tr := newProgress(&b, "always").start("http://store/claude", 1000)
	tr.Write(make([]byte, 500))
	tr.done(true)
	if !strings.Contains(b.String(), "\r") || !strings.Contains(b.String(), "50%") {
		t.Errorf("always drew no bar: %q", b.String())
	}
}

func TestProxyFromEnvironment(t *testing.T) {
	// A plain-HTTP store reached only through a proxy on loopback: the
	// client must send the request to the proxy (no packet goes to the
	// store's name, which does not resolve).
	s, cfg := both(t)
	cfg.Agents = []string{AgentClaude}
	cfg.Claude.BaseURL = "http://store.invalid/claude"
	t.Setenv("HTTP_PROXY", s.srv.URL)
	t.Setenv("NO_PROXY", "")
	wantStatus(t, install(t, t.TempDir(), cfg), StepClaude, provision.StatusChanged)
	if s.count("/claude/stable") != 1 {
		t.Fatalf("the request did not go through the proxy: %v", s.reqs())
	}
	// NO_PROXY exempts a host: proven on the proxy decision itself, since
	// dialling store.invalid would send a DNS query.
	t.Setenv("NO_PROXY", "store.invalid")
	req, _ := http.NewRequest("GET", "http://store.invalid/claude/stable", nil)
	if u, err := proxyFromEnv(req); err != nil || u != nil {
		t.Errorf("NO_PROXY ignored: proxy %v, %v", u, err)
	}
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	req, _ = http.NewRequest("GET", "https://other.invalid/x", nil)
	if u, _ := proxyFromEnv(req); u == nil || u.Host != (&url.URL{Host: "127.0.0.1:1"}).Host {
		t.Errorf("HTTPS_PROXY ignored: %v", u)
	}
}

func TestStaleStagingIsRemoved(t *testing.T) {
	_, cfg := both(t)
	root := t.TempDir()
	stale := filepath.Join(root, LibexecDir, stagingPrefix+"claude-0123", "version")
	os.MkdirAll(stale, 0o700)
	os.WriteFile(filepath.Join(stale, "claude.partial"), []byte("half"), 0o600)
	wantStatus(t, install(t, root, cfg), StepClaude, provision.StatusChanged)
	assertNoLeftovers(t, root)
}

func TestReinstallDropsStaleReceiptEntries(t *testing.T) {
	s, cfg := both(t)
	cfg.Agents = []string{AgentCodex}
	root := t.TempDir()
	s.addCodex("0.300.0", true, false, codexOpts{extra: []tarEntry{{name: "bin/old-helper", body: "x", mode: 0o755}}})
	wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusChanged)
	// The same version, republished without a file, repaired after damage.
	s.addCodex("0.300.0", true, false, codexOpts{})
	os.Remove(filepath.Join(root, CodexDir, "0.300.0", "codex-path", "rg"))
	wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusChanged)
	if _, ok := readReceipt(t, root).Paths[CodexDir+"/0.300.0/bin/old-helper"]; ok {
		t.Error("the receipt still records a file of the replaced tree")
	}
	wantStatus(t, install(t, root, cfg), StepCodex, provision.StatusOK)
}
