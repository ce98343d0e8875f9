package vendorfetch

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
)

// store is an httptest server serving the vendors' layouts of VENDORS.md:
// Claude under /claude, Codex's primary store under /codex, the GitHub
// layout under /gh/download and its API at /gh/api/latest.
type store struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	files    map[string][]byte
	requests []string // "GET /path [Range]"
	// cut makes the first request of a path end after that many bytes.
	cut map[string]int
	// stall makes a path send headers and then nothing.
	stall map[string]bool
	// noRange makes the server ignore Range headers.
	noRange bool
	// fail makes a path answer this status.
	fail map[string]int
}

func newStore(t testing.TB) *store {
	s := &store{t: t, files: map[string][]byte{}, cut: map[string]int{}, stall: map[string]bool{}, fail: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *store) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	line := "GET " + r.URL.Path
	if rg := r.Header.Get("Range"); rg != "" {
		line += " " + rg
	}
	s.requests = append(s.requests, line)
	body, ok := s.files[r.URL.Path]
	cut, isCut := s.cut[r.URL.Path]
	delete(s.cut, r.URL.Path)
	stall, status := s.stall[r.URL.Path], s.fail[r.URL.Path]
	noRange := s.noRange
	s.mu.Unlock()
	switch {
	case status != 0:
		http.Error(w, "failing", status)
		return
	case !ok:
		http.NotFound(w, r)
		return
	case stall:
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	case isCut:
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Header().Set("Accept-Ranges", "bytes")
		w.WriteHeader(200)
		w.Write(body[:cut])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if noRange {
		r.Header.Del("Range")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

func (s *store) put(path string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = b
}

func (s *store) del(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, path)
}

func (s *store) reqs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func (s *store) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

func (s *store) count(prefix string) int {
	n := 0
	for _, r := range s.reqs() {
		if strings.HasPrefix(r, "GET "+prefix) {
			n++
		}
	}
	return n
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// claudeBinary is a fake, version- and platform-specific binary.
func claudeBinary(version, platform string, size int) []byte {
	b := bytes.Repeat([]byte("claude "+version+" "+platform+" "), size/20+1)
	return b[:size]
}

// addClaude publishes version for the platforms, with a manifest (signed by
// key when not nil) and optionally the .zst copies.
func (s *store) addClaude(version string, key *openpgp.Entity, zst bool, platforms ...string) {
	m := claudeManifest{Version: version, BuildDate: "2026-11-30T00:00:00Z"}
	m.Platforms = map[string]struct {
		Binary   string `json:"binary"`
		Checksum string `json:"checksum"`
		Size     int64  `json:"size"`
	}{}
	for _, p := range platforms {
		bin := claudeBinary(version, p, 200<<10)
		s.put("/claude/"+version+"/"+p+"/claude", bin)
		if zst {
			s.put("/claude/"+version+"/"+p+"/claude.zst", zstdOf(s.t, bin))
		}
		m.Platforms[p] = struct {
			Binary   string `json:"binary"`
			Checksum string `json:"checksum"`
			Size     int64  `json:"size"`
		}{"claude", sum(bin), int64(len(bin))}
	}
	mb, _ := json.Marshal(m)
	s.put("/claude/"+version+"/manifest.json", mb)
	if key != nil {
		s.put("/claude/"+version+"/manifest.json.sig", sign(s.t, key, mb))
	}
}

func zstdOf(t testing.TB, b []byte) []byte {
	var o bytes.Buffer
	w, err := zstd.NewWriter(&o)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return o.Bytes()
}

func sign(t testing.TB, key *openpgp.Entity, data []byte) []byte {
	var o bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&o, key, bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	return o.Bytes()
}

// newKey makes a signing key and writes its armored public part to a file.
func newKey(t testing.TB) (*openpgp.Entity, string, string) {
	e, err := openpgp.NewEntity("cco test", "", "test@example.invalid", nil)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.asc")
	f, _ := os.Create(p)
	w, _ := armor.Encode(f, openpgp.PublicKeyType, nil)
	e.Serialize(w)
	w.Close()
	f.Close()
	return e, p, strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint))
}

type codexOpts struct {
	dotSlash    bool   // members named ./x
	zst         bool   // publish a .tar.zst (listed first in SHA256SUMS)
	sumsVersion string // codex-package.json version ("" = version)
	layout      int    // layoutVersion (0 = 1)
	noExec      bool   // the entrypoint lacks x bits
	extra       []tarEntry
}

type tarEntry struct {
	name, body, link string
	typ              byte
	mode             int64
}

// codexPackage builds a Codex-shaped package archive (members uid 1001).
func codexArchive(t testing.TB, version, target string, o codexOpts) []byte {
	v := o.sumsVersion
	if v == "" {
		v = version
	}
	layout := o.layout
	if layout == 0 {
		layout = 1
	}
	exec := int64(0o755)
	if o.noExec {
		exec = 0o644
	}
	pj, _ := json.Marshal(map[string]any{"layoutVersion": layout, "version": v, "target": target, "variant": "standalone", "entrypoint": "bin/codex", "resourcesDir": "codex-resources", "pathDir": "codex-path"})
	es := []tarEntry{
		{name: "codex-package.json", body: string(pj), mode: 0o644},
		{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "bin/codex", body: "codex " + version + strings.Repeat("x", 50<<10), mode: exec},
		{name: "bin/codex-code-mode-host", body: "host", mode: 0o775},
		{name: "codex-path/rg", body: "rg", mode: 0o755},
		{name: "codex-resources/bwrap", body: "bwrap", mode: 0o755},
		{name: "codex-resources/voice/libfoo.so", body: "lib", mode: 0o644},
		{name: "codex-resources/voice/libfoo.so.1", typ: tar.TypeSymlink, link: "libfoo.so"},
	}
	es = append(es, o.extra...)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if o.dotSlash {
		tw.WriteHeader(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755, Uid: 1001, Gid: 1001})
	}
	for _, e := range es {
		name := e.name
		if o.dotSlash {
			name = "./" + name
		}
		h := &tar.Header{Name: name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Uid: 1001, Gid: 1001, Uname: "runner", ModTime: time.Unix(1700000000, 0)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	tw.Close()
	if o.zst {
		return zstdOf(t, b.Bytes())
	}
	var g bytes.Buffer
	gw := gzip.NewWriter(&g)
	gw.Write(b.Bytes())
	gw.Close()
	return g.Bytes()
}

// addCodex publishes version in the primary layout under prefix ("/codex"
// or "" to skip) and in the GitHub layout when gh is set.
func (s *store) addCodex(version string, primary, gh bool, o codexOpts) []byte {
	target := codexTarget(testPlatform(s.t))
	arch := codexArchive(s.t, version, target, o)
	ext := ".tar.gz"
	if o.zst {
		ext = ".tar.zst"
	}
	asset := "codex-package-" + target + ext
	other := "codex-package-aarch64-unknown-linux-musl.tar.gz"
	if strings.HasPrefix(target, "aarch64") {
		other = "codex-package-x86_64-unknown-linux-musl.tar.gz"
	}
	sums := fmt.Sprintf("%s  %s\n%s  %s\n%s  codex-npm-%s.tgz\n", sum(arch), asset, sum([]byte("other")), other, sum([]byte("npm")), version)
	if primary {
		s.put("/codex/releases/"+version+"/"+asset, arch)
		s.put("/codex/releases/"+version+"/"+SumsAsset, []byte(sums))
	}
	if gh {
		s.put("/gh/download/rust-v"+version+"/"+asset, arch)
		s.put("/gh/download/rust-v"+version+"/"+SumsAsset, []byte(sums))
	}
	return arch
}

func testPlatform(t testing.TB) string {
	p, err := DetectPlatform(provisiontest.Root(t, t.TempDir()))
	if err != nil {
		t.Skipf("no vendor builds for this machine: %v", err)
	}
	return p
}

// config points every URL at the store, with fast retries.
func (s *store) config(agents ...string) Config {
	c := DefaultConfig()
	c.Agents = agents
	c.Claude.BaseURL = s.srv.URL + "/claude"
	c.Codex.BaseURLs = []string{s.srv.URL + "/codex"}
	c.Codex.GitHubBaseURL = s.srv.URL + "/gh/download"
	c.Codex.GitHubAPIURL = s.srv.URL + "/gh/api/latest"
	c.Backoff = time.Millisecond
	c.Timeout = 5 * time.Second
	c.Progress = "never"
	return c
}

// install runs the steps of cfg on root and returns the report.
func install(t testing.TB, root string, cfg Config) *provision.Report {
	t.Helper()
	return provisiontest.Execute(t, root, Steps(cfg))
}

func wantStatus(t testing.TB, rep *provision.Report, id, status string) provision.StepReport {
	t.Helper()
	s := provisiontest.Step(t, rep, id)
	if s.Status != status {
		t.Fatalf("%s: status %s (%s), want %s", id, s.Status, s.Detail, status)
	}
	return s
}

// assertNoLeftovers fails when a staging directory or .partial file is left.
func assertNoLeftovers(t testing.TB, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.HasPrefix(d.Name(), stagingPrefix) || strings.HasSuffix(d.Name(), ".partial")) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}
