package egress

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// TestHostPort: a listener served as a host port carries its connections
// to the host's loopback on the port (a gateway there answers), each in
// the audit log as TCP; a port that is not one of HostPorts is cut, and
// recorded, and reaches nothing. Through the proxy, CONNECT to a host
// port works and one to another loopback port is refused as loopback.
func TestHostPort(t *testing.T) {
	var gwHits, otherHits atomic.Int64
	gw := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gwHits.Add(1)
		fmt.Fprint(w, "gateway")
	}))
	other := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) }))
	gwPort, otherPort := portOf(t, gw), portOf(t, other)
	// The other service's port is in egress_ports: its refusal is the
	// address's.
	f := newFixture(t, Policy{Ports: []int{443, otherPort}, HostPorts: []int{gwPort}}, map[string]string{"localhost": "127.0.0.1"}, func(f *fixture) {
		f.dial.allowed[gw] = true
	})
	serveHostPort := func(port int) string {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go f.p.ServeHostPort(l, netip.MustParseAddr("127.0.0.1"), port)
		return l.Addr().String()
	}
	get := func(addr string) (string, error) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if body, err := get(serveHostPort(gwPort)); err != nil || !strings.HasSuffix(body, "gateway") {
		t.Fatalf("the host port's listener: %q %v", body, err)
	}
	if body, _ := get(serveHostPort(otherPort)); body != "" {
		t.Errorf("a port outside HostPorts answered %q", body)
	}
	resp, c := tunnel(t, "unix", f.sock, fmt.Sprintf("127.0.0.1:%d", otherPort))
	wantRefused(t, resp, c, http.StatusForbidden, "loopback")
	resp, c = tunnel(t, "unix", f.sock, fmt.Sprintf("localhost:%d", otherPort))
	wantRefused(t, resp, c, http.StatusForbidden, "loopback")
	resp, c = tunnel(t, "unix", f.sock, fmt.Sprintf("localhost:%d", gwPort))
	if resp.StatusCode != 200 {
		t.Errorf("CONNECT localhost:%d (a host port): %d %s", gwPort, resp.StatusCode, resp.Header.Get(ReasonHeader))
	} else {
		c.Close()
	}
	if gwHits.Load() != 1 || otherHits.Load() != 0 {
		t.Errorf("on the host: the gateway %d requests (want 1), the other service %d (want 0)", gwHits.Load(), otherHits.Load())
	}
	f.p.Close()
	es, err := ReadAudit(f.audit)
	if err != nil {
		t.Fatal(err)
	}
	var tcpAllowed, tcpRefused int
	for _, e := range es {
		if e.Method == HostPortMethod && e.Allowed && e.Target == fmt.Sprintf("127.0.0.1:%d", gwPort) {
			tcpAllowed++
		}
		if e.Method == HostPortMethod && !e.Allowed && strings.Contains(e.Reason, "loopback") {
			tcpRefused++
		}
	}
	if tcpAllowed != 1 || tcpRefused != 1 {
		t.Errorf("audit: %d allowed and %d refused host-port connections, want 1 and 1: %+v", tcpAllowed, tcpRefused, es)
	}
	for _, d := range f.dial.dialed() {
		if d == other {
			t.Errorf("the proxy dialled the other loopback service %s", d)
		}
	}
}

// TestAgentLoopbackPorts: only the agent's own base URL on the host's
// loopback gives a port; another agent's variable, a remote gateway, a
// URL without a port or the proxy endpoint's port give none.
func TestAgentLoopbackPorts(t *testing.T) {
	env := []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4000", "ANTHROPIC_VERTEX_BASE_URL=https://[::1]:4443/v1",
		"GOOGLE_GEMINI_BASE_URL=http://localhost:8080", "COPILOT_PROVIDER_BASE_URL=http://gateway.corp:4000",
		"OPENAI_BASE_URL=http://127.0.0.1:9999"}
	for agent, want := range map[string]string{"claude": "[4000 4443]", "gemini": "[8080]", "copilot": "[]", "codex": "[]", "opencode": "[]"} {
		if got := fmt.Sprint(policy.AgentLoopbackPorts(agent, t.TempDir(), env)); got != want {
			t.Errorf("%s: ports %s, want %s", agent, got, want)
		}
	}
	for _, u := range []string{"http://127.0.0.1", "http://127.0.0.1:3128", "ftp://127.0.0.1:21", "http://127.0.0.2:4000", "http://10.0.0.1:4000", "::"} {
		if n := policy.LoopbackPort(u); n != 0 {
			t.Errorf("%s gave port %d", u, n)
		}
	}
}

// TestSSHHosts: port 22 is open to ssh_hosts only, in either mode, and
// still under the address check.
func TestSSHHosts(t *testing.T) {
	f := newFixture(t, Policy{Mode: ModeAllowlist, Allow: []string{"other.test"}, Ports: []int{443}, SSHHosts: []string{"git.test", "lan-git.test"}},
		map[string]string{"git.test": "8.8.8.8", "other.test": "8.8.4.4", "lan-git.test": "10.0.0.9"})
	for _, tc := range []struct {
		target string
		ok     bool
		why    string
	}{
		{"git.test:22", true, ""},
		{"other.test:22", false, "port 22 is not in egress_ports"},
		{"git.test:2222", false, "port 2222 is not in egress_ports"},
		{"lan-git.test:22", false, "private"},
	} {
		v := f.p.decide(tc.target, true)
		if (v.reason == "") != tc.ok || !strings.Contains(v.reason, tc.why) {
			t.Errorf("%s: %q, want ok=%v %q", tc.target, v.reason, tc.ok, tc.why)
		}
	}
}

// TestHostPortDialsOnlyTheLoopbackAddress: a host port opens 127.0.0.1 and
// ::1 on that port, whatever loopback address or localhost name was asked
// for: a service another user runs on 127.0.0.2 at the same port is not it.
func TestHostPortDialsOnlyTheLoopbackAddress(t *testing.T) {
	f := newFixture(t, Policy{Ports: []int{443}, HostPorts: []int{4000}}, nil)
	for target, want := range map[string]string{
		"127.0.0.2:4000":          "[127.0.0.1 ::1]",
		"127.255.0.9:4000":        "[127.0.0.1 ::1]",
		"localhost:4000":          "[127.0.0.1 ::1]",
		"gw.localhost:4000":       "[127.0.0.1 ::1]",
		"[::1]:4000":              "[::1 127.0.0.1]",
		"[::ffff:127.0.0.3]:4000": "[127.0.0.1 ::1]",
	} {
		v := f.p.decide(target, true)
		if v.reason != "" || !v.hostLoopback || fmt.Sprint(v.addrs) != want {
			t.Errorf("%s: %q hostLoopback=%v addrs %v, want %s", target, v.reason, v.hostLoopback, v.addrs, want)
		}
	}
}
