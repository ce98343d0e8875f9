package egress

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// companyProxy is a company's upstream CONNECT proxy on loopback: it logs
// every request it gets (method, target, credentials), asks for the
// authentication its mode says, and dials the company's destinations from
// its own table of names: the cco proxy's resolver knows none of them,
// as a host behind such a proxy resolves no outside name.
type companyProxy struct {
	t     testing.TB
	addr  string
	auth  string // "": none; "basic": Basic user:pass; "negotiate": Negotiate/NTLM only
	user  string
	pass  string
	names map[string]string // host -> loopback address it dials

	mu  sync.Mutex
	log []string // "CONNECT host:port auth=<Proxy-Authorization>"
}

func newCompanyProxy(t testing.TB, auth string, names map[string]string) *companyProxy {
	p := &companyProxy{t: t, auth: auth, user: "ada", pass: "Tr0ub4dor&3:x", names: names}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p.addr = l.Addr().String()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *companyProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func (p *companyProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	got := req.Header.Get("Proxy-Authorization")
	target := req.Host
	if req.Method != http.MethodConnect {
		target = req.URL.String()
	}
	p.mu.Lock()
	p.log = append(p.log, fmt.Sprintf("%s %s auth=%s", req.Method, target, got))
	p.mu.Unlock()
	switch p.auth {
	case "basic":
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(p.user+":"+p.pass))
		if got != want {
			io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n")
			return
		}
	case "negotiate":
		io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Negotiate\r\nProxy-Authenticate: NTLM\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if req.Method != http.MethodConnect {
		body := "origin via the company proxy: " + req.URL.String()
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return
	}
	host, port, _ := net.SplitHostPort(req.Host)
	dst, ok := p.names[host]
	if !ok {
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp4", net.JoinHostPort(dst, port))
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go func() {
		io.Copy(up, br)
		up.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, up)
}

// testCA is a certificate authority of the test's own, and a server
// certificate it signed for names.
func testCA(t testing.TB, names ...string) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cco test company CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// companyHTTPS is an HTTPS destination on loopback with a certificate of
// the test CA for name: it answers every request with its name and path.
func companyHTTPS(t testing.TB, name string) (addr string, pool *x509.CertPool) {
	pool, cert := testCA(t, name)
	l, err := tls.Listen("tcp4", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s says hello to %s", name, r.URL.Path)
	})}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return l.Addr().String(), pool
}

// viaTunnel speaks HTTPS to name through the cco proxy's tunnel c.
func viaTunnel(t *testing.T, c net.Conn, name string, pool *x509.CertPool) string {
	t.Helper()
	tc := tls.Client(c, &tls.Config{ServerName: name, RootCAs: pool})
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS to %s through the tunnel: %v", name, err)
	}
	fmt.Fprintf(tc, "GET /v1/messages HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", name)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("reading the answer of %s: %v", name, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// companyFixture is the cco proxy behind a company proxy: the HTTPS
// destination registry.corp.test is reachable only through the company
// proxy, whose own address is on loopback and not in allow_ip.
type companyFixture struct {
	*fixture
	corp     *companyProxy
	destAddr string
	destPort int
	pool     *x509.CertPool
	upstream policy.Upstream
}

func newCompanyFixture(t *testing.T, auth string, mode string, setting string, environ []string, opts ...func(*fixture)) *companyFixture {
	t.Helper()
	destAddr, pool := companyHTTPS(t, "registry.corp.test")
	destPort := portOf(t, destAddr)
	corp := newCompanyProxy(t, auth, map[string]string{"registry.corp.test": "127.0.0.1", "api.anthropic.com": "127.0.0.1"})
	setting = strings.ReplaceAll(setting, "UPSTREAM", corp.addr)
	for i := range environ {
		environ[i] = strings.ReplaceAll(environ[i], "UPSTREAM", corp.addr)
	}
	up, err := policy.ResolveUpstream(setting, environ)
	if err != nil {
		t.Fatal(err)
	}
	pol := Policy{Mode: mode, Ports: []int{destPort, 443, 80}, Upstream: up,
		Allow: []string{"registry.corp.test", "api.anthropic.com", "lan.corp.test", "direct.test"}}
	// The names the host resolves: only lan.corp.test (to a private
	// address, refused before any upstream) and direct.test (no_proxy).
	f := newFixture(t, pol, map[string]string{"lan.corp.test": "10.0.0.5", "direct.test": "127.0.0.1"}, append([]func(*fixture){func(f *fixture) {
		f.dial.allowed[corp.addr] = true
	}}, opts...)...)
	return &companyFixture{fixture: f, corp: corp, destAddr: destAddr, destPort: destPort, pool: pool, upstream: up}
}

func readAudit(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUpstreamProxy: behind a company proxy (with and without Basic auth,
// named by egress_upstream's URL or by the user's https_proxy), an allowed
// destination that only the company proxy reaches answers through the
// tunnel with its certificate from the company's CA; the company proxy's
// log has exactly the allowed requests, each with the credentials; the
// destinations cco's policy refuses never reach it; the password is in no
// audit record, which names the upstream as via.
func TestUpstreamProxy(t *testing.T) {
	for _, tc := range []struct {
		name, auth, setting string
		environ             []string
	}{
		{"url-no-auth", "", "http://UPSTREAM", nil},
		{"url-basic", "basic", "http://ada:Tr0ub4dor%263%3Ax@UPSTREAM", nil},
		{"env-basic", "basic", "", []string{"https_proxy=http://ada:Tr0ub4dor%263%3Ax@UPSTREAM", "no_proxy=localhost,.direct.test"}},
		{"env-upper", "", "env", []string{"HTTPS_PROXY=UPSTREAM", "NO_PROXY=direct.test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCompanyFixture(t, tc.auth, ModeAllowlist, tc.setting, tc.environ)
			target := fmt.Sprintf("registry.corp.test:%d", f.destPort)
			resp, c := tunnel(t, "unix", f.sock, target)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("CONNECT %s behind the company proxy: %d %s", target, resp.StatusCode, resp.Header.Get(ReasonHeader))
			}
			if got := viaTunnel(t, c, "registry.corp.test", f.pool); got != "registry.corp.test says hello to /v1/messages" {
				t.Fatalf("the destination answered %q", got)
			}
			// Refused by cco's policy: never forwarded.
			for _, r := range []struct {
				target string
				status int
				why    string
			}{
				{"evil.example:443", http.StatusForbidden, "not in egress_allow"},
				{"lan.corp.test:443", http.StatusForbidden, "private"},
				{"registry.corp.test:22", http.StatusForbidden, "port 22 is not in egress_ports"},
				{"10.0.0.7:443", http.StatusForbidden, "not in allow_ip"},
			} {
				resp, c := tunnel(t, "unix", f.sock, r.target)
				wantRefused(t, resp, c, r.status, r.why)
			}
			// Plain http through the same upstream, in absolute form.
			pc, err := net.Dial("unix", f.sock)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(pc, "GET http://api.anthropic.com/v1/models HTTP/1.1\r\nHost: api.anthropic.com\r\nConnection: close\r\n\r\n")
			presp, err := http.ReadResponse(bufio.NewReader(pc), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(presp.Body)
			pc.Close()
			if tc.environ == nil || strings.Contains(strings.Join(tc.environ, " "), "http_proxy=") {
				// the URL form (and http_proxy) carries plain http too
				if presp.StatusCode != 200 || !strings.Contains(string(body), "via the company proxy: http://api.anthropic.com/v1/models") {
					t.Errorf("plain http through the upstream: %d %q", presp.StatusCode, body)
				}
			}
			log := f.corp.requests()
			for _, l := range log {
				for _, refused := range []string{"evil.example", "lan.corp.test", ":22", "10.0.0.7"} {
					if strings.Contains(l, refused) {
						t.Errorf("a destination cco refused reached the company proxy: %s", l)
					}
				}
			}
			wantAuth := ""
			if tc.auth == "basic" {
				wantAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte("ada:Tr0ub4dor&3:x"))
			}
			if len(log) == 0 || log[0] != "CONNECT "+target+" auth="+wantAuth {
				t.Errorf("the company proxy's log: %q, want first %q", log, "CONNECT "+target+" auth="+wantAuth)
			}
			f.p.Close()
			audit := readAudit(t, f.audit)
			if strings.Contains(audit, "Tr0ub4dor") || strings.Contains(audit, "ada:") || strings.Contains(audit, base64.StdEncoding.EncodeToString([]byte("ada:Tr0ub4dor&3:x"))) {
				t.Errorf("the audit log holds the upstream's credentials:\n%s", audit)
			}
			if !strings.Contains(audit, `"target":"`+target+`","addr":"`+f.corp.addr+`","via":"`+f.corp.addr+`","allowed":true`) {
				t.Errorf("the audit log does not record the tunnel via %s:\n%s", f.corp.addr, audit)
			}
		})
	}
}

// TestUpstreamNoProxy: a destination no_proxy names is dialled directly,
// the others through the upstream.
func TestUpstreamNoProxy(t *testing.T) {
	f := newCompanyFixture(t, "", ModePublic, "", []string{"https_proxy=http://UPSTREAM", "no_proxy=.direct.test,10.0.0.0/8"},
		func(f *fixture) {
			f.p.Policy.AllowHost = []string{"direct.test"}
			f.p.Policy.Ports = append(f.p.Policy.Ports, f.port4)
		})
	resp, c := tunnel(t, "unix", f.sock, fmt.Sprintf("direct.test:%d", f.port4))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT direct.test: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	echoOnce(t, c, "dialled directly")
	if log := f.corp.requests(); len(log) != 0 {
		t.Errorf("a no_proxy destination went to the upstream: %q", log)
	}
	for _, h := range []string{"direct.test", "a.direct.test", "10.1.2.3"} {
		if !f.upstream.Direct(h) {
			t.Errorf("no_proxy does not cover %s", h)
		}
	}
	for _, h := range []string{"notdirect.test", "registry.corp.test", "11.0.0.1"} {
		if f.upstream.Direct(h) {
			t.Errorf("no_proxy covers %s", h)
		}
	}
}

// TestUpstreamNumericNamesRefused: behind an upstream, a destination the
// host's resolver does not resolve goes to the upstream by name; one that
// ends in a number (2130706433, 127.1, 0x7f.1: 127.0.0.1 to an upstream's
// getaddrinfo, 167772165: 10.0.0.5) or lies under localhost is refused
// first, as CONNECT and in absolute form, and never reaches the upstream.
func TestUpstreamNumericNamesRefused(t *testing.T) {
	f := newCompanyFixture(t, "", ModePublic, "", []string{"https_proxy=http://UPSTREAM", "http_proxy=http://UPSTREAM"})
	for _, h := range []string{"2130706433", "127.1", "0x7f.1", "0177.0.0.1", "0x7f000001", "167772165", "2852039166", "a.b.0x0a"} {
		target := net.JoinHostPort(h, "443")
		resp, c := tunnel(t, "unix", f.sock, target)
		wantRefused(t, resp, c, http.StatusForbidden, "numeric address")
		resp = absGet(t, f.sock, "http://"+target+"/x")
		wantRefused(t, resp, nil, http.StatusForbidden, "numeric address")
	}
	for _, h := range []string{"localhost", "a.localhost", "LOCALHOST.", "x.y.localhost"} {
		resp, c := tunnel(t, "unix", f.sock, net.JoinHostPort(h, "443"))
		wantRefused(t, resp, c, http.StatusForbidden, "loopback")
	}
	if log := f.corp.requests(); len(log) != 0 {
		t.Errorf("a refused destination reached the company proxy: %q", log)
	}
	if d := f.dial.dialed(); len(d) != 0 {
		t.Errorf("dialled %v", d)
	}
}

// TestUpstreamRefusesAuth: an upstream that asks for Negotiate/NTLM, or
// for Basic that is not given or wrong, gives a 502 whose reason names the
// upstream and the scheme, and the session's summary one line about it.
func TestUpstreamRefusesAuth(t *testing.T) {
	for _, tc := range []struct{ auth, setting, want string }{
		{"negotiate", "http://UPSTREAM", "asks for Negotiate, NTLM authentication, which cco does not speak"},
		{"basic", "http://UPSTREAM", "asks for Basic authentication, and no credentials are set"},
		{"basic", "http://ada:wrong@UPSTREAM", "refused the Basic credentials egress_upstream gives"},
	} {
		f := newCompanyFixture(t, tc.auth, ModeAllowlist, tc.setting, nil)
		target := fmt.Sprintf("registry.corp.test:%d", f.destPort)
		resp, c := tunnel(t, "unix", f.sock, target)
		wantRefused(t, resp, c, http.StatusBadGateway, "upstream proxy "+f.corp.addr)
		if why := resp.Header.Get(ReasonHeader); !strings.Contains(why, tc.want) {
			t.Errorf("%s: reason %q, want %q", tc.auth, why, tc.want)
		}
		if strings.Contains(resp.Header.Get(ReasonHeader), "wrong") {
			t.Errorf("the reason quotes the password: %s", resp.Header.Get(ReasonHeader))
		}
		s := f.p.Tally.Summary()
		line := s.UpstreamLine()
		if s.Failed.Requests != 1 || !strings.Contains(line, f.corp.addr) || !strings.Contains(line, tc.want) || strings.Contains(line, "\n") {
			t.Errorf("%s: summary failed %d, line %q", tc.auth, s.Failed.Requests, line)
		}
		if full := s.Line(""); !strings.HasSuffix(full, "\n"+line) {
			t.Errorf("the session's summary does not end with the upstream's line: %q", full)
		}
	}
}

// TestUpstreamUnreachable: an upstream that does not answer is a 502
// naming it; the destination is never dialled directly.
func TestUpstreamUnreachable(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	up, err := policy.ResolveUpstream("http://"+dead, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Policy{Ports: []int{443}, Upstream: up}, map[string]string{"public.test": "8.8.8.8"},
		func(f *fixture) { f.dial.allowed[dead] = true })
	resp, c := tunnel(t, "unix", f.sock, "public.test:443")
	wantRefused(t, resp, c, http.StatusBadGateway, "upstream proxy "+dead+": connecting")
	for _, d := range f.dial.dialed() {
		if d != dead {
			t.Errorf("the proxy dialled %s, not only the upstream", d)
		}
	}
}

// TestResolveUpstream: the variables as curl reads them, and the key.
func TestResolveUpstream(t *testing.T) {
	for _, tc := range []struct {
		setting         string
		environ         []string
		connect, plain  string
		noProxy, source string
	}{
		{"", nil, "", "", "", ""},
		{"none", []string{"https_proxy=http://p:1"}, "", "", "", ""},
		{"env", []string{"https_proxy=http://p:1", "HTTPS_PROXY=http://q:2", "http_proxy=h:3"}, "p:1", "h:3", "", "https_proxy, http_proxy"},
		{"env", []string{"HTTP_PROXY=http://h:3", "NO_PROXY=a.test, .b.test"}, "h:3", "h:3", "a.test,.b.test", "HTTP_PROXY"},
		{"env", []string{"HTTPS_PROXY=proxy.corp"}, "proxy.corp:1080", "", "", "HTTPS_PROXY"},
		{"http://u:p@[fd00::1]:8080", []string{"https_proxy=http://ignored:1"}, "[fd00::1]:8080", "[fd00::1]:8080", "", "egress_upstream"},
	} {
		u, err := policy.ResolveUpstream(tc.setting, tc.environ)
		if err != nil {
			t.Errorf("%q %q: %v", tc.setting, tc.environ, err)
			continue
		}
		addr := func(p *policy.UpstreamProxy) string {
			if p == nil {
				return ""
			}
			return p.Addr
		}
		if addr(u.Connect) != tc.connect || addr(u.HTTP) != tc.plain || strings.Join(u.NoProxy, ",") != tc.noProxy || u.Source != tc.source {
			t.Errorf("%q %q: connect %q, http %q, no_proxy %q, source %q", tc.setting, tc.environ, addr(u.Connect), addr(u.HTTP), u.NoProxy, u.Source)
		}
		if strings.Contains(u.Describe(), ":p@") {
			t.Errorf("Describe shows the password: %s", u.Describe())
		}
	}
	for _, bad := range []struct{ env, want string }{
		{"https_proxy=socks5://p:1080", "https_proxy: \"socks5://p:1080\": the upstream proxy must be http://"},
		{"HTTPS_PROXY=https://p:443", "HTTPS_PROXY: \"https://p:443\": the upstream proxy must be http://"},
		{"http_proxy=http://u:s3cret@p:99999", "http_proxy: \"http://p:99999\""},
	} {
		_, err := policy.ResolveUpstream("env", []string{bad.env})
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), `egress_upstream = "none"`) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want %q and the fix", bad.env, err, bad.want)
		}
	}
	// A URL that does not parse, or whose password has a character it
	// should have percent-encoded, still never shows the password: not in
	// the error, which status and a refusal print.
	for _, raw := range []string{"http://ada:S3cr%zzet@proxy.corp:8080", "http://ada:S3cr/et@proxy.corp:8080",
		"http://ada:S3cr#et@proxy.corp:8080", "http://ada:S3cr?et@proxy.corp:8080", "http://ada:S3 cret@proxy.corp:8080",
		"ada:S3cret@proxy.corp:8080"} {
		for _, try := range []func() error{
			func() error { _, err := policy.ResolveUpstream("env", []string{"https_proxy=" + raw}); return err },
			func() error { _, err := policy.ResolveUpstream(raw, nil); return err },
		} {
			if err := try(); err != nil && strings.Contains(err.Error(), "S3") {
				t.Errorf("%s: the error shows the password: %v", raw, err)
			}
		}
	}
}
