package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/sandbox/egress"
)

// countingServer is an HTTP service on the host's loopback that counts
// what reaches it; the verdicts are its counts, taken on the host.
func countingServer(t *testing.T, body string) (port int, hits *atomic.Int64) {
	t.Helper()
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port, hits
}

// TestEgressHostLoopback: the agent's own base URL on the host's loopback
// (claude's ANTHROPIC_BASE_URL, codex's openai_base_url in
// ~/.codex/config.toml) reaches the host's gateway from that agent's jail,
// with the URL unchanged, by 127.0.0.1 and by localhost; another host
// loopback service stays unreachable, the other agent's jail does not get
// the port, host_ports opens one explicitly, and every connection is in
// the audit log. As uid 65534 and as root; the verdicts are the host
// services' counts.
func TestEgressHostLoopback(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	gw, gwHits := countingServer(t, "the company gateway")
	other, otherHits := countingServer(t, "another host service")
	mcp, mcpHits := countingServer(t, "a local MCP server")
	gwURL := fmt.Sprintf("http://127.0.0.1:%d/v1/messages", gw)
	gwLocal := fmt.Sprintf("http://localhost:%d/v1/models", gw)
	otherURL := fmt.Sprintf("http://127.0.0.1:%d/", other)
	mcpURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", mcp)
	for _, u := range []runAs{asNobody, asRoot} {
		t.Run(u.name, func(t *testing.T) {
			withConfig(t, root, fmt.Sprintf("host_ports = [%d]\n", mcp))
			gwHits.Store(0)
			otherHits.Store(0)
			mcpHits.Store(0)
			probe := params(map[string]any{"mode": "net", "direct": []string{gwURL, gwLocal, otherURL, mcpURL}})

			// claude with its gateway in ANTHROPIC_BASE_URL.
			w := newWorld(t, u)
			c := w.cmd(root, "claude", w.ws, "probe", probe)
			c.Env = append(c.Env, fmt.Sprintf("ANTHROPIC_BASE_URL=http://127.0.0.1:%d", gw))
			r := runCmd(t, c)
			if r.code != 0 || r.report == nil {
				t.Fatalf("claude: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
			}
			for url, want := range map[string]string{gwURL: "200 the company gateway", gwLocal: "200 the company gateway",
				otherURL: "ECONNREFUSED", mcpURL: "200 a local MCP server"} {
				if got := r.report["direct:"+url]; got != want {
					t.Errorf("claude's jail: %s gave %q, want %q", url, got, want)
				}
			}
			if gwHits.Load() != 2 || otherHits.Load() != 0 || mcpHits.Load() != 1 {
				t.Errorf("on the host: the gateway saw %d requests (want 2), the other service %d (want 0), the MCP server %d (want 1)",
					gwHits.Load(), otherHits.Load(), mcpHits.Load())
			}
			es, err := egress.ReadAudit(filepath.Join(w.home, ".local/state/cco/egress.log"))
			if err != nil {
				t.Fatal(err)
			}
			tcp := 0
			for _, e := range es {
				if e.Method == egress.HostPortMethod && e.Allowed {
					tcp++
				}
			}
			if tcp != 3 {
				t.Errorf("audit: %d allowed host-port connections, want 3: %+v", tcp, es)
			}

			// codex with the same variable: not its base URL (Codex reads
			// config.toml), so its jail does not get the port ...
			gwHits.Store(0)
			w2 := newWorld(t, u)
			c = w2.cmd(root, "codex", w2.ws, "probe", probe)
			c.Env = append(c.Env, fmt.Sprintf("ANTHROPIC_BASE_URL=http://127.0.0.1:%d", gw))
			r = runCmd(t, c)
			if r.code != 0 || r.report == nil {
				t.Fatalf("codex: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
			}
			if got := r.report["direct:"+gwURL]; got != "ECONNREFUSED" {
				t.Errorf("codex's jail reached claude's gateway: %q", got)
			}
			if gwHits.Load() != 0 {
				t.Errorf("the gateway saw %d requests from codex's jail", gwHits.Load())
			}
			// ... until config.toml names it as a provider's base_url.
			if err := os.MkdirAll(filepath.Join(w2.home, ".codex"), 0o700); err != nil {
				t.Fatal(err)
			}
			cfg := fmt.Sprintf("model_provider = \"corp\"\n[model_providers.corp]\nname = \"corp\"\nbase_url = \"http://localhost:%d/v1\"\n", gw)
			testenv.Must(t, os.WriteFile(filepath.Join(w2.home, ".codex/config.toml"), []byte(cfg), 0o600))
			testenv.Must(t, os.Chown(filepath.Join(w2.home, ".codex/config.toml"), u.uid, u.gid))
			testenv.Must(t, os.Chown(filepath.Join(w2.home, ".codex"), u.uid, u.gid))
			c = w2.cmd(root, "codex", w2.ws, "probe", probe)
			r = runCmd(t, c)
			if got := r.report["direct:"+gwURL]; got != "200 the company gateway" {
				t.Errorf("codex's jail with base_url in config.toml: %q (exit %d, stderr %s)", got, r.code, r.stderr)
			}
			if got := r.report["direct:"+otherURL]; got != "ECONNREFUSED" {
				t.Errorf("codex's jail reached another host service: %q", got)
			}
			if otherHits.Load() != 0 {
				t.Errorf("the other host service saw %d requests", otherHits.Load())
			}
			if strings.Contains(r.stderr, "egress this session") && !strings.Contains(r.stderr, fmt.Sprintf("127.0.0.1:%d", gw)) {
				t.Errorf("the session's summary does not name the gateway: %s", r.stderr)
			}
		})
	}
}
