package spawn

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// started reports whether the process runs.
func (p *Proxy) started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid != 0
}

// bridging reports whether the launcher serves the endpoint itself.
func (p *Proxy) bridging() bool {
	p.br.mu.Lock()
	defer p.br.mu.Unlock()
	return len(p.br.bs) > 0
}

// roundTrip opens a tunnel to up through the endpoint and checks one echo.
func roundTrip(t *testing.T, ep, up netip.AddrPort) {
	t.Helper()
	c := conn(t, ep, up, 'e')
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	copy(buf, "through the endpoint")
	echo(t, c, buf)
	if !strings.HasPrefix(string(buf), "through the endpoint") {
		t.Fatalf("echo: %q", buf)
	}
}

// TestEndpointServedByTheProcess: the process takes the agent's endpoint,
// is started by the endpoint's first connection (not before), and serves
// it itself: the launcher carries nothing.
func TestEndpointServedByTheProcess(t *testing.T) {
	up := upstream(t, 0)
	px := testProxy(t, "1", up)
	px.Watch()
	ln := anyLoopback(t)
	ep := localAddr(t, ln)
	if err := px.Bridge(ln); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if px.started() {
		t.Fatal("the proxy started before any connection")
	}
	roundTrip(t, ep, up)
	if !px.started() {
		t.Fatal("the tunnel worked, but no proxy process runs")
	}
	time.Sleep(50 * time.Millisecond)
	if px.bridging() {
		t.Error("the launcher serves the endpoint itself: the process did not take it")
	}
	roundTrip(t, ep, up)
	if err := px.Verdict(); err != nil {
		t.Errorf("verdict: %v", err)
	}
}

// TestEndpointAfterStart: an endpoint that comes once the process runs
// (a program started before the jail, or a jail built again) is taken too.
func TestEndpointAfterStart(t *testing.T) {
	up := upstream(t, 0)
	px := testProxy(t, "1", up)
	// A first connection on the socket starts the process.
	px.Watch()
	c, err := net.Dial("unix", px.Socket)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for end := time.Now().Add(10 * time.Second); !px.started(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the socket's first connection started no process")
		}
	}
	ln := anyLoopback(t)
	ep := localAddr(t, ln)
	if err := px.Bridge(ln); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, ep, up)
	time.Sleep(50 * time.Millisecond)
	if px.bridging() {
		t.Error("the launcher serves the endpoint itself: the process did not take it")
	}
}

// TestEndpointOldProgram: a program that never answers for the endpoint
// (an earlier release's) leaves it to the launcher, which carries its
// connections to the socket: the agent's tunnel works all the same.
func TestEndpointOldProgram(t *testing.T) {
	defer func(d time.Duration) { handOverTimeout = d }(handOverTimeout)
	handOverTimeout = 200 * time.Millisecond
	up := upstream(t, 0)
	px := testProxy(t, "old", up)
	px.Watch()
	ln := anyLoopback(t)
	ep := localAddr(t, ln)
	if err := px.Bridge(ln); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, ep, up)
	if !px.bridging() {
		t.Error("the tunnel worked, but the launcher does not serve the endpoint")
	}
}

// TestSummary: once the session ends, the proxy's tally comes back as one
// printable line naming what was allowed and what refused; a session that
// made no request has none.
func TestSummary(t *testing.T) {
	up := upstream(t, 0)
	px := testProxy(t, "1", up)
	px.Watch()
	ln := anyLoopback(t)
	ep := localAddr(t, ln)
	px.Bridge(ln)
	roundTrip(t, ep, up)
	roundTrip(t, ep, up)
	// Refused by the policy (a private address: never dialled), one
	// with a C1 control and a bidi override in its name, and one too long.
	hostile := "\u009b31m\u202eevil.example:443"
	for _, target := range []string{"10.0.0.1:443", hostile, strings.Repeat("a", 100000) + ":443"} {
		c, err := net.Dial("tcp4", ep.String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", target)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 4") {
			t.Fatalf("CONNECT %.40q: %.80q, want a refusal", target, b)
		}
	}
	px.Stop()
	line := px.Summary()
	t.Logf("summary: %s", line)
	for _, want := range []string{"allowed 2 to 1 (" + up.String() + " x2)", "refused 3 to 3 (", "10.0.0.1:443", `\u009b31m\u202eevil.example:443`, px.pol.LogPath} {
		if !strings.Contains(line, want) {
			t.Errorf("summary %q: no %q", line, want)
		}
	}
	if len(line) > 1000 {
		t.Errorf("summary of %d bytes, want one short line", len(line))
	}
	assertPrintable(t, line)

	quiet := testProxy(t, "1", up)
	quiet.Watch()
	quiet.Stop()
	if s := quiet.Summary(); s != "" {
		t.Errorf("a session without requests: summary %q, want none", s)
	}
}

// assertPrintable fails on any byte or character a terminal acts on.
func assertPrintable(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			t.Errorf("%q holds %U", s, r)
		}
	}
}
