package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// vendorStore serves both vendors' release layouts (shared/VENDORS.md) from
// loopback: Claude Code's store (stable, <v>/manifest.json, <v>/<plat>/claude)
// and Codex's primary store (channels/latest, releases/<v>/...).
type vendorStore struct {
	srv      *httptest.Server
	requests atomic.Int64
	claude   map[string][]byte // version -> binary
	codex    map[string][]byte // version -> tar.gz
	stable   atomic.Value      // string
	latest   atomic.Value      // string
	// stall is a claude version whose binary is never sent: its request
	// waits until the client goes (stalled is told it began).
	stall   atomic.Value // string
	stalled chan struct{}
}

func fakeClaude(v string) []byte {
	return []byte("#!/bin/sh\necho '" + v + " (Claude Code)'\n")
}

func fakeCodexPackage(v string) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	add := func(name string, mode int64, body string) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Uid: 1001, Gid: 1001, Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.WriteHeader(&tar.Header{Name: "./bin/", Mode: 0o755, Typeflag: tar.TypeDir, Uid: 1001, Gid: 1001})
	add("./codex-package.json", 0o644, fmt.Sprintf(`{"layoutVersion": 1, "version": %q, "target": "x86_64-unknown-linux-musl", "entrypoint": "bin/codex"}`, v))
	add("./bin/codex", 0o755, "#!/bin/sh\necho 'codex-cli "+v+"'\n")
	add("./bin/codex-code-mode-host", 0o755, "#!/bin/sh\n")
	add("./codex-path/rg", 0o755, "#!/bin/sh\n")
	add("./codex-resources/bwrap", 0o755, "#!/bin/sh\n")
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func newVendorStore() *vendorStore {
	s := &vendorStore{claude: map[string][]byte{}, codex: map[string][]byte{}, stalled: make(chan struct{}, 1)}
	s.stall.Store("")
	for _, v := range []string{"2.1.328", "2.1.330", "2.1.331", "2.1.332"} {
		s.claude[v] = fakeClaude(v)
	}
	for _, v := range []string{"0.169.0", "0.170.0"} {
		s.codex[v] = fakeCodexPackage(v)
	}
	s.stable.Store("2.1.328")
	s.latest.Store("0.169.0")
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func (s *vendorStore) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	p := r.URL.Path
	switch {
	case p == "/claude/stable":
		fmt.Fprintln(w, s.stable.Load())
		return
	case p == "/codex/channels/latest":
		fmt.Fprintln(w, s.latest.Load())
		return
	case strings.HasPrefix(p, "/claude/"):
		parts := strings.Split(strings.TrimPrefix(p, "/claude/"), "/")
		bin, ok := s.claude[parts[0]]
		switch {
		case !ok:
		case len(parts) == 2 && parts[1] == "manifest.json":
			fmt.Fprintf(w, `{"version": %q, "buildDate": "2026-11-01T00:00:00Z", "platforms": {"linux-x64": {"binary": "claude", "checksum": %q, "size": %d}}}`, parts[0], sum(bin), len(bin))
			return
		case len(parts) == 3 && parts[1] == "linux-x64" && parts[2] == "claude":
			if parts[0] == s.stall.Load() {
				select {
				case s.stalled <- struct{}{}:
				default:
				}
				<-r.Context().Done()
				return
			}
			w.Write(bin)
			return
		}
	case strings.HasPrefix(p, "/codex/releases/"):
		parts := strings.Split(strings.TrimPrefix(p, "/codex/releases/"), "/")
		pkg, ok := s.codex[parts[0]]
		asset := "codex-package-x86_64-unknown-linux-musl.tar.gz"
		switch {
		case !ok || len(parts) != 2:
		case parts[1] == "codex-package_SHA256SUMS":
			fmt.Fprintf(w, "%s  %s\n%s  codex-package-aarch64-unknown-linux-musl.tar.gz\n", sum(pkg), asset, strings.Repeat("0", 64))
			return
		case parts[1] == asset:
			w.Write(pkg)
			return
		}
	}
	http.NotFound(w, r)
}

// cmdVendorStore: "vendorstore start" serves the store and sets
// CCO_CLAUDE_BASE_URL and CCO_CODEX_BASE_URLS; "vendorstore requests N"
// checks how many requests it answered since the last check; "vendorstore
// release claude|codex V" moves a channel; "vendorstore stop" closes it;
// "vendorstore stall V" never sends claude V's binary, and "vendorstore
// waitstall" waits until a download of it began.
func cmdVendorStore(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: vendorstore start|stop|requests N|release AGENT V|stall V|waitstall")
	}
	box := ts.Value(storeKey{}).(*storeBox)
	switch args[0] {
	case "start":
		st := newVendorStore()
		ts.Defer(st.srv.Close)
		ts.Setenv("CCO_CLAUDE_BASE_URL", st.srv.URL+"/claude")
		ts.Setenv("CCO_CODEX_BASE_URLS", st.srv.URL+"/codex")
		ts.Setenv("CCO_CODEX_GITHUB_BASE_URL", "")
		ts.Setenv("CCO_CODEX_GITHUB_API_URL", "")
		ts.Setenv("CCO_DOWNLOAD_BACKOFF", "10ms")
		ts.Setenv("CCO_DOWNLOAD_RETRIES", "1")
		box.Store(st)
	case "stop":
		box.Load().srv.Close()
	case "requests":
		var want int64
		fmt.Sscan(args[1], &want)
		got := box.Load().requests.Swap(0)
		if (got == want) == neg {
			ts.Fatalf("the store answered %d requests, want %d", got, want)
		}
	case "stall":
		box.Load().stall.Store(args[1])
	case "waitstall":
		select {
		case <-box.Load().stalled:
		case <-time.After(30 * time.Second):
			ts.Fatalf("no download of the stalled version began")
		}
	case "release":
		if args[1] == "claude" {
			box.Load().stable.Store(args[2])
		} else {
			box.Load().latest.Store(args[2])
		}
	}
}

// storeBox holds a script's store: scripts run in parallel, each with its own.
type storeBox = atomic.Pointer[vendorStore]

type storeKey struct{}

// storeRoot is a vendor store on loopback, an empty target root, a stand-in
// shadow, and the environment that points cco-install at them for agents.
func storeRoot(t *testing.T, agents string) (*vendorStore, string, string, []string) {
	t.Helper()
	st := newVendorStore()
	t.Cleanup(st.srv.Close)
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(root, 0o755)
	shadow := filepath.Join(dir, "shadow")
	os.WriteFile(shadow, []byte("#!/bin/sh\n"), 0o755)
	env := []string{"CCO_AGENTS=" + agents, "CCO_CLAUDE_BASE_URL=" + st.srv.URL + "/claude",
		"CCO_CODEX_BASE_URLS=" + st.srv.URL + "/codex", "CCO_CODEX_GITHUB_BASE_URL=", "CCO_CODEX_GITHUB_API_URL="}
	return st, root, shadow, env
}
