package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
)

// A company network in a network namespace the test makes itself: only a
// loopback device, on which the company's proxy, its HTTPS services and
// its gateway listen. The shadow runs in that namespace (nsenter), so its
// egress proxy's lookups of outside names fail at once (network is
// unreachable) and not one packet leaves it.

// companyNet is the namespace: listen makes a listener in it.
type companyNet struct {
	ns     string // the namespace's file, for nsenter --net
	req    chan listenReq
	closed chan struct{} // the test ended: no more requests
}

type listenReq struct {
	network, addr string
	dial          bool
	done          chan listenRes
}

type listenRes struct {
	l   net.Listener
	c   net.Conn
	err error
}

// newCompanyNet makes the namespace on a thread of its own, which stays in
// it (and holds it) until the test ends; sockets made there belong to it
// wherever they are used.
func newCompanyNet(t *testing.T) *companyNet {
	t.Helper()
	testenv.RequireRoot(t)
	n := &companyNet{req: make(chan listenReq), closed: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		if err := loUp(); err != nil {
			ready <- err
			return
		}
		n.ns = fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		ready <- nil
		for {
			var r listenReq
			select {
			case r = <-n.req:
			case <-n.closed:
				return
			}
			if r.dial {
				c, err := net.DialTimeout(r.network, r.addr, 10*time.Second)
				r.done <- listenRes{c: c, err: err}
				continue
			}
			l, err := net.Listen(r.network, r.addr)
			r.done <- listenRes{l: l, err: err}
		}
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(n.closed) })
	return n
}

// loUp brings the namespace's loopback device up.
func loUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nil
}

func (n *companyNet) listen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	done := make(chan listenRes)
	n.req <- listenReq{network: network, addr: addr, done: done}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.l.Close() })
	return r.l
}

// dial connects to addr from inside the namespace.
func (n *companyNet) dial(network, addr string) (net.Conn, error) {
	done := make(chan listenRes, 1)
	select {
	case n.req <- listenReq{network: network, addr: addr, dial: true, done: done}:
	case <-n.closed:
		return nil, net.ErrClosed
	}
	r := <-done
	return r.c, r.err
}

// wrap runs c (a shadow command from world.cmd) in the namespace, as c's
// user: nsenter as root, then setpriv drops to the user.
func (n *companyNet) wrap(c *exec.Cmd, u runAs) {
	args := []string{"nsenter", "--net=" + n.ns, "--"}
	if u.uid != 0 {
		args = append(args, "setpriv", "--reuid="+strconv.Itoa(u.uid), "--regid="+strconv.Itoa(u.gid), "--clear-groups", "--")
	}
	args = append(args, c.Path)
	args = append(args, c.Args[1:]...)
	path, _ := exec.LookPath("nsenter")
	c.Path, c.Args = path, args
	c.SysProcAttr = &syscall.SysProcAttr{}
}

// corpProxy is the company's CONNECT proxy: Basic auth, a log of every
// request it gets, and its own table of the company's names.
type corpProxy struct {
	n                *companyNet
	addr, user, pass string
	names            map[string]string // host -> the address it dials (any port)

	mu  sync.Mutex
	log []string
}

func newCorpProxy(t *testing.T, n *companyNet, user, pass string, names map[string]string) *corpProxy {
	p := &corpProxy{n: n, user: user, pass: pass, names: names}
	l := n.listen(t, "tcp4", "127.0.0.1:0")
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

func (p *corpProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func (p *corpProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	target := req.Host
	if req.Method != http.MethodConnect {
		target = req.URL.String()
	}
	got := req.Header.Get("Proxy-Authorization")
	p.mu.Lock()
	p.log = append(p.log, req.Method+" "+target+" auth="+got)
	p.mu.Unlock()
	if p.user == "" {
		// A proxy that speaks only Kerberos and NTLM.
		io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Negotiate\r\nProxy-Authenticate: NTLM\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if got != "Basic "+base64.StdEncoding.EncodeToString([]byte(p.user+":"+p.pass)) {
		io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n")
		return
	}
	if req.Method != http.MethodConnect {
		body := "origin via the company proxy: " + target
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		return
	}
	host, _, _ := net.SplitHostPort(req.Host)
	dst, ok := p.names[host]
	if !ok {
		io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := p.n.dial("tcp4", dst)
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

// corpCA is the company's certificate authority: its PEM file and a
// server certificate for names.
func corpCA(t *testing.T, dir string, names ...string) (caFile string, cert tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cco test company CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(dir, "company-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveHTTP serves h on l (TLS with cert, when given).
func serveHTTP(t *testing.T, l net.Listener, h http.Handler, cert *tls.Certificate) {
	if cert != nil {
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{*cert}})
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
}

// TestEgressUpstreamThroughTheShadow: behind the company's proxy (Basic
// auth in egress_upstream), as uid 65534 and as root: an HTTPS service
// only the company proxy reaches answers in the jail with its certificate
// from the company's CA, plain http goes through it too, a destination the
// policy refuses never reaches it, and its password is nowhere in the jail
// (the environment, sandbox.toml as the jail shows it) nor in the audit
// log, which records the upstream as via. Verdicts from the company
// proxy's log and the host's files.
func TestEgressUpstreamThroughTheShadow(t *testing.T) {
	root := systemRoot(t)
	n := newCompanyNet(t)
	const pass = "Corp-Pa55:w0rd"
	dir := testenv.WorkDir(t)
	caFile, cert := corpCA(t, dir, "git.corp.test")
	svc := n.listen(t, "tcp4", "127.0.0.1:0")
	serveHTTP(t, svc, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "git.corp.test answers %s", r.URL.Path)
	}), &cert)
	corp := newCorpProxy(t, n, "ada", pass, map[string]string{"git.corp.test": svc.Addr().String()})
	os.Chmod(dir, 0o755)
	withConfig(t, root, fmt.Sprintf("egress_upstream = \"http://ada:%s@%s\"\n", strings.ReplaceAll(pass, ":", "%3A"), corp.addr))
	script := fmt.Sprintf(`curl -sS --max-time 20 --cacert %s https://git.corp.test/repo.git/info/refs; echo
curl -sS --max-time 20 http://intranet.corp.test/wiki; echo
curl -sS --max-time 20 -o /dev/null -w 'refused %%{http_connect}\n' https://10.0.0.5/
env | sort
cat %s/etc/cco/sandbox.toml
`, caFile, root)
	for _, u := range []runAs{asNobody, asRoot} {
		t.Run(u.name, func(t *testing.T) {
			before := len(corp.requests())
			w := newWorld(t, u)
			c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "sh", "script": script}))
			n.wrap(c, u)
			r := runCmd(t, c)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
			}
			for _, want := range []string{"git.corp.test answers /repo.git/info/refs", "origin via the company proxy: http://intranet.corp.test/wiki", "refused 403",
				`egress_upstream = "env"`} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the jail's output lacks %q:\n%s\nstderr %s", want, r.stdout, r.stderr)
				}
			}
			enc := base64.StdEncoding.EncodeToString([]byte("ada:" + pass))
			for _, leak := range []string{pass, "Pa55", enc, "ada:"} {
				if strings.Contains(r.stdout, leak) {
					t.Errorf("the upstream's credentials are readable in the jail (%q):\n%s", leak, r.stdout)
				}
			}
			log := corp.requests()[before:]
			want := []string{"CONNECT git.corp.test:443 auth=Basic " + enc, "GET http://intranet.corp.test/wiki auth=Basic " + enc}
			if strings.Join(log, "\n") != strings.Join(want, "\n") {
				t.Errorf("the company proxy's log:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
			}
			audit := readFile(t, filepath.Join(w.home, ".local/state/cco/egress.log"))
			if strings.Contains(audit, pass) || strings.Contains(audit, enc) {
				t.Errorf("the audit log holds the credentials:\n%s", audit)
			}
			if !strings.Contains(audit, `"target":"git.corp.test:443","addr":"`+corp.addr+`","via":"`+corp.addr+`","allowed":true`) ||
				!strings.Contains(audit, `"target":"10.0.0.5:443"`) {
				t.Errorf("the audit log:\n%s", audit)
			}
		})
	}
}

// TestEgressUpstreamNegotiate: behind a proxy that asks for Negotiate and
// NTLM, the agent gets a 502 whose reason names the upstream and the
// schemes, and the session ends with one line saying so.
func TestEgressUpstreamNegotiate(t *testing.T) {
	root := systemRoot(t)
	n := newCompanyNet(t)
	corp := newCorpProxy(t, n, "", "", nil)
	withConfig(t, root, "")
	w := newWorld(t, asNobody)
	script := `curl -sS --max-time 20 -o /dev/null -w 'status %{http_connect}\n' https://git.corp.test/ 2>/dev/null; true`
	c := w.cmd(root, "claude", w.ws, "probe", params(map[string]any{"mode": "sh", "script": script}))
	c.Env = append(c.Env, "https_proxy=http://"+corp.addr)
	n.wrap(c, asNobody)
	r := runCmd(t, c)
	if !strings.Contains(r.stdout, "status 502") {
		t.Errorf("the agent's answer: %q", r.stdout)
	}
	want := "cco: egress upstream proxy failed this session: upstream proxy " + corp.addr + " asks for Negotiate, NTLM authentication, which cco does not speak"
	if strings.Count(r.stderr, "cco: egress upstream proxy failed") != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks the one line %q:\n%s", want, r.stderr)
	}
	if log := corp.requests(); len(log) != 1 || log[0] != "CONNECT git.corp.test:443 auth=" {
		t.Errorf("the company proxy's log: %q", log)
	}
}
