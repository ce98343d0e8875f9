package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
)

// fixture is a proxy on a unix socket with a loopback echo upstream on
// IPv4 and on IPv6, registered in the resolver under test names.
type fixture struct {
	sock     string
	p        *Proxy
	res      *testResolver
	dial     *guardDialer
	up4, up6 string // echo upstreams
	port4    int
	log      *testenv.SyncBuffer
	audit    string
}

func newFixture(t *testing.T, pol Policy, names map[string]string, opts ...func(*fixture)) *fixture {
	t.Helper()
	f := &fixture{log: &testenv.SyncBuffer{}}
	f.up4 = echoServer(t, "tcp4", "127.0.0.1:0")
	f.port4 = portOf(t, f.up4)
	// The IPv6 upstream uses the same port when it can, so that one
	// egress_ports entry covers both.
	l6, err := net.Listen("tcp6", fmt.Sprintf("[::1]:%d", f.port4))
	if err == nil {
		l6.Close()
		f.up6 = echoServer(t, "tcp6", fmt.Sprintf("[::1]:%d", f.port4))
	}
	if pol.Ports == nil {
		pol.Ports = []int{f.port4}
	}
	f.res = newResolver(names)
	f.dial = newDialer(t, f.up4, f.up6)
	f.audit = filepath.Join(t.TempDir(), "egress.log")
	a, err := OpenAuditLog(f.audit, "s1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	f.p = &Proxy{Policy: pol, Resolver: f.res, Dialer: f.dial, Audit: a, Log: f.log, LocalAddrs: noLocal}
	for _, o := range opts {
		o(f)
	}
	f.sock = serveProxy(t, f.p)
	return f
}

func (f *fixture) connect(t *testing.T, host string) (*http.Response, net.Conn) {
	t.Helper()
	return tunnel(t, "unix", f.sock, net.JoinHostPort(host, fmt.Sprint(f.port4)))
}

func wantRefused(t *testing.T, resp *http.Response, c net.Conn, status int, reason string) {
	t.Helper()
	if c != nil || resp.StatusCode != status {
		t.Fatalf("status %d, want %d", resp.StatusCode, status)
	}
	if got := resp.Header.Get(ReasonHeader); !strings.Contains(got, reason) {
		t.Errorf("%s = %q, want it to contain %q", ReasonHeader, got, reason)
	}
}

func TestConnectIPv4AndIPv6(t *testing.T) {
	f := newFixture(t, Policy{AllowIP: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}},
		map[string]string{"up4.test": "127.0.0.1", "up6.test": "::1"})
	resp, c := f.connect(t, "up4.test")
	if c == nil {
		t.Fatalf("CONNECT up4.test: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	echoOnce(t, c, "hello over ipv4")
	resp, c = f.connect(t, "127.0.0.1")
	if c == nil {
		t.Fatalf("CONNECT 127.0.0.1 with allow_ip: %d", resp.StatusCode)
	}
	echoOnce(t, c, "literal")
	if f.up6 == "" {
		t.Log("no ::1 on this host: IPv6 upstream not tested here")
		return
	}
	resp, c = f.connect(t, "up6.test")
	if c == nil {
		t.Fatalf("CONNECT up6.test: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	echoOnce(t, c, "hello over ipv6")
	resp, c = f.connect(t, "::1")
	if c == nil {
		t.Fatalf("CONNECT [::1] with allow_ip: %d", resp.StatusCode)
	}
	echoOnce(t, c, "v6 literal")
	if d := f.dial.dialed(); len(d) != 4 || d[2] != f.up6 {
		t.Errorf("dials %v", d)
	}
}

// Without a hole, loopback is refused: the upstreams above are reachable
// only because the test punched one.
func TestLoopbackRefusedByDefault(t *testing.T) {
	f := newFixture(t, Policy{}, map[string]string{"up4.test": "127.0.0.1", "up6.test": "::1", "localhost": "127.0.0.1,::1"})
	for _, h := range []string{"up4.test", "up6.test", "localhost", "127.0.0.1", "::1", "127.0.0.2"} {
		resp, c := f.connect(t, h)
		wantRefused(t, resp, c, http.StatusForbidden, "loopback")
	}
	if d := f.dial.dialed(); len(d) != 0 {
		t.Errorf("dialled %v", d)
	}
}

func TestAllowHostPunchesHole(t *testing.T) {
	f := newFixture(t, Policy{AllowHost: []string{"git.internal.test", "*.corp.test"}},
		map[string]string{"git.internal.test": "127.0.0.1", "a.corp.test": "127.0.0.1", "other.test": "127.0.0.1"})
	for _, h := range []string{"git.internal.test", "a.corp.test"} {
		resp, c := f.connect(t, h)
		if c == nil {
			t.Fatalf("CONNECT %s: %d %s", h, resp.StatusCode, resp.Header.Get(ReasonHeader))
		}
		echoOnce(t, c, h)
	}
	resp, c := f.connect(t, "other.test")
	wantRefused(t, resp, c, http.StatusForbidden, "other.test resolves to 127.0.0.1, which is loopback")
	// allow_host is a name: the address itself stays refused.
	resp, c = f.connect(t, "127.0.0.1")
	wantRefused(t, resp, c, http.StatusForbidden, "loopback")
}

// Every refused range, as a literal and as what a name resolves to, in
// CONNECT and in absolute form: 403, a reason, a log line, no dial.
func TestRefusedRanges(t *testing.T) {
	names := map[string]string{}
	for i, tc := range refusedAddrs {
		names[fmt.Sprintf("r%d.test", i)] = tc.addr
		// A name with one public and one refused address is refused too.
		names[fmt.Sprintf("mixed%d.test", i)] = "8.8.8.8," + tc.addr
	}
	f := newFixture(t, Policy{Ports: []int{443}}, names)
	for i, tc := range refusedAddrs {
		for _, host := range []string{tc.addr, fmt.Sprintf("r%d.test", i), fmt.Sprintf("mixed%d.test", i)} {
			target := net.JoinHostPort(host, "443")
			resp, c := tunnel(t, "unix", f.sock, target)
			wantRefused(t, resp, c, http.StatusForbidden, tc.why)
			resp = absGet(t, f.sock, "http://"+net.JoinHostPort(host, "443")+"/x")
			wantRefused(t, resp, nil, http.StatusForbidden, tc.why)
		}
	}
	if d := f.dial.dialed(); len(d) != 0 {
		t.Errorf("dialled %v", d)
	}
	if !strings.Contains(f.log.String(), "cco egress: denied CONNECT 169.254.169.254:443: address 169.254.169.254 is link-local") {
		t.Errorf("no log line for the metadata address; log:\n%.500s", f.log.String())
	}
}

func TestHostOwnAddressRefused(t *testing.T) {
	f := newFixture(t, Policy{Ports: []int{443}}, map[string]string{"self.test": "1.1.1.1", "v6self.test": "2606:4700::1111"},
		func(f *fixture) {
			f.p.LocalAddrs = func() ([]netip.Addr, error) {
				return []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("2606:4700::1111")}, nil
			}
		})
	for _, h := range []string{"self.test", "1.1.1.1", "::ffff:1.1.1.1", "v6self.test", "2606:4700::1111"} {
		resp, c := tunnel(t, "unix", f.sock, net.JoinHostPort(h, "443"))
		wantRefused(t, resp, c, http.StatusForbidden, "one of this host's own addresses")
	}
	// Fail closed when the host's addresses cannot be listed.
	g := newFixture(t, Policy{Ports: []int{443}}, nil, func(f *fixture) {
		f.p.LocalAddrs = func() ([]netip.Addr, error) { return nil, errors.New("netlink broke") }
	})
	resp, c := tunnel(t, "unix", g.sock, "8.8.8.8:443")
	wantRefused(t, resp, c, http.StatusForbidden, "netlink broke")
}

func TestPortPolicy(t *testing.T) {
	f := newFixture(t, Policy{Ports: []int{443}, AllowHost: []string{"up.test"}}, map[string]string{"up.test": "127.0.0.1"})
	resp, c := f.connect(t, "up.test")
	wantRefused(t, resp, c, http.StatusForbidden, fmt.Sprintf("port %d is not in egress_ports [443]", f.port4))
	resp = absGet(t, f.sock, fmt.Sprintf("http://up.test:%d/", f.port4))
	wantRefused(t, resp, nil, http.StatusForbidden, "is not in egress_ports")
	// Absolute form without a port means 80, which is not allowed here.
	resp = absGet(t, f.sock, "http://up.test/")
	wantRefused(t, resp, nil, http.StatusForbidden, "port 80 is not in egress_ports")
	// The default policy allows 80 and 443 only.
	g := newFixture(t, Policy{}, map[string]string{"pub.test": "8.8.8.8"}, func(f *fixture) { f.p.Policy.Ports = nil })
	resp, c = tunnel(t, "unix", g.sock, "pub.test:22")
	wantRefused(t, resp, c, http.StatusForbidden, "port 22 is not in egress_ports [80 443]")
	if n := g.res.count("pub.test"); n != 0 {
		t.Errorf("a refused port still resolved the name (%d lookups)", n)
	}
	if d := append(f.dial.dialed(), g.dial.dialed()...); len(d) != 0 {
		t.Errorf("dialled %v", d)
	}
}

func TestAllowlistWildcards(t *testing.T) {
	names := map[string]string{}
	for _, h := range []string{"a.allowed.test", "b.c.allowed.test", "allowed.test", "exact.test", "sub.exact.test", "evilallowed.test", "other.test", "internal.test"} {
		names[h] = "127.0.0.1"
	}
	f := newFixture(t, Policy{
		Mode:      ModeAllowlist,
		Allow:     []string{"*.Allowed.test", "exact.test."},
		AllowHost: []string{"internal.test"},
		AllowIP:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}, names)
	for _, h := range []string{"a.allowed.test", "B.C.ALLOWED.TEST", "exact.test", "exact.test.", "internal.test", "127.0.0.1"} {
		resp, c := f.connect(t, h)
		if c == nil {
			t.Fatalf("CONNECT %s: %d %s", h, resp.StatusCode, resp.Header.Get(ReasonHeader))
		}
		echoOnce(t, c, h)
	}
	for _, h := range []string{"allowed.test", "sub.exact.test", "evilallowed.test", "other.test"} {
		resp, c := f.connect(t, h)
		wantRefused(t, resp, c, http.StatusForbidden, "is not in egress_allow")
		if n := f.res.count(h); n != 0 {
			t.Errorf("%s: a name outside the allowlist was resolved", h)
		}
	}
	resp, c := f.connect(t, "8.8.8.8")
	wantRefused(t, resp, c, http.StatusForbidden, "not in allow_ip")
}

// The proxy dials the address it checked: a resolver that changes its
// answer after the check (DNS rebinding) never gets a second question.
func TestNoRebinding(t *testing.T) {
	r := &rebinder{first: netip.MustParseAddr("127.0.0.1"), then: netip.MustParseAddr("10.0.0.1")}
	f := newFixture(t, Policy{AllowIP: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil,
		func(f *fixture) { f.p.Resolver = r })
	resp, c := f.connect(t, "rebind.test")
	if c == nil {
		t.Fatalf("CONNECT: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	echoOnce(t, c, "x")
	if r.calls != 1 {
		t.Errorf("%d lookups, want 1", r.calls)
	}
	if d := f.dial.dialed(); len(d) != 1 || d[0] != f.up4 {
		t.Errorf("dials %v, want [%s]", d, f.up4)
	}
	resp, c = f.connect(t, "rebind.test")
	wantRefused(t, resp, c, http.StatusForbidden, "10.0.0.1, which is private")
}

type rebinder struct {
	calls       int
	first, then netip.Addr
}

func (r *rebinder) LookupNetIP(context.Context, string) ([]netip.Addr, error) {
	r.calls++
	if r.calls == 1 {
		return []netip.Addr{r.first}, nil
	}
	return []netip.Addr{r.then}, nil
}

func TestResolveFailureRefused(t *testing.T) {
	f := newFixture(t, Policy{Ports: []int{443}}, map[string]string{"empty.test": "8.8.8.8"},
		func(f *fixture) { f.res.names["empty.test"] = nil })
	resp, c := tunnel(t, "unix", f.sock, "missing.test:443")
	wantRefused(t, resp, c, http.StatusBadGateway, "resolving missing.test")
	resp, c = tunnel(t, "unix", f.sock, "empty.test:443")
	wantRefused(t, resp, c, http.StatusBadGateway, "has no addresses")
	resp, c = tunnel(t, "unix", f.sock, "bad_host!:443")
	wantRefused(t, resp, c, http.StatusForbidden, "not a valid host name")
	// The summary counts the names that did not resolve as failed, the
	// invalid one as refused.
	sum := f.p.Tally.Summary()
	if sum.Failed.Requests != 2 || sum.Refused.Requests != 1 {
		t.Errorf("summary: failed %d, refused %d; want 2 failed (missing.test, empty.test), 1 refused", sum.Failed.Requests, sum.Refused.Requests)
	}
	resp, c = tunnel(t, "unix", f.sock, "[fe80::1%25eth0]:443")
	if c != nil || resp.StatusCode/100 != 4 {
		t.Errorf("a zoned literal: %d", resp.StatusCode)
	}
}

func TestUpstreamDownIs502(t *testing.T) {
	l, _ := net.Listen("tcp4", "127.0.0.1:0")
	dead := l.Addr().String()
	l.Close()
	f := newFixture(t, Policy{AllowHost: []string{"down.test"}, Ports: []int{portOf(t, dead)}}, map[string]string{"down.test": "127.0.0.1"},
		func(f *fixture) { f.dial.allowed[dead] = true })
	resp, c := tunnel(t, "unix", f.sock, "down.test:"+fmt.Sprint(portOf(t, dead)))
	wantRefused(t, resp, c, http.StatusBadGateway, "connecting to down.test")
	if !strings.Contains(f.log.String(), "cco egress: failed CONNECT down.test") {
		t.Errorf("log: %s", f.log.String())
	}
}

func TestMalformedAndOriginForm(t *testing.T) {
	f := newFixture(t, Policy{}, nil)
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /local HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, resp, nil, http.StatusBadRequest, "not a proxy request")
	c2, _ := net.Dial("unix", f.sock)
	defer c2.Close()
	io.WriteString(c2, "NONSENSE\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("garbage: %v %v", resp, err)
	}
}

func TestHugeRequestHeadRefused(t *testing.T) {
	f := newFixture(t, Policy{}, nil)
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		io.WriteString(c, "CONNECT x.test:443 HTTP/1.1\r\n")
		line := "X-Pad: " + strings.Repeat("a", 8000) + "\r\n"
		for i := 0; i < 200; i++ {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, resp, nil, http.StatusRequestHeaderFieldsTooLarge, "larger than 1 MiB")
}

func TestServeRefusesOff(t *testing.T) {
	l, err := net.Listen("unix", filepath.Join(shortTempDir(t), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := &Proxy{Policy: Policy{Mode: ModeOff}}
	if err := p.Serve(l); err == nil || !strings.Contains(err.Error(), "egress is off") {
		t.Errorf("Serve with egress off: %v", err)
	}
}

// absGet sends one absolute-form GET through the proxy at sock.
func absGet(t *testing.T, sock, rawURL string) *http.Response {
	t.Helper()
	c := proxyClient(sock)
	resp, err := c.Get(rawURL)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// proxyClient sends plain-http requests in absolute form to the proxy at sock.
func proxyClient(sock string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}
