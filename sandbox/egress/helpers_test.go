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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testResolver answers from a table and records every lookup. Tests never
// leave Proxy.Resolver nil: the system resolver would send packets.
type testResolver struct {
	mu      sync.Mutex
	names   map[string][]netip.Addr
	lookups []string
}

func newResolver(pairs map[string]string) *testResolver {
	r := &testResolver{names: map[string][]netip.Addr{}}
	for name, addrs := range pairs {
		for _, a := range strings.Split(addrs, ",") {
			r.names[name] = append(r.names[name], netip.MustParseAddr(a))
		}
	}
	return r
}

func (r *testResolver) LookupNetIP(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, host)
	if a, ok := r.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (r *testResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.lookups {
		if h == host {
			n++
		}
	}
	return n
}

// guardDialer dials only the loopback upstreams a test registered; any
// other dial fails the test, which is how the tests prove that a refused
// destination was refused before any dial (and that no test ever sends a
// packet beyond loopback).
type guardDialer struct {
	t       testing.TB
	mu      sync.Mutex
	allowed map[string]bool
	dials   []string
}

func newDialer(t testing.TB, allowed ...string) *guardDialer {
	d := &guardDialer{t: t, allowed: map[string]bool{}}
	for _, a := range allowed {
		d.allowed[a] = true
	}
	return d
}

func (d *guardDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dials = append(d.dials, addr)
	ok := d.allowed[addr]
	d.mu.Unlock()
	if !ok {
		d.t.Errorf("the proxy dialled %s %s, which the test did not register as an allowed upstream", network, addr)
		return nil, errors.New("test dialer: refused destination")
	}
	ap := netip.MustParseAddrPort(addr)
	if !ap.Addr().IsLoopback() {
		d.t.Errorf("test dialer: %s is not loopback", addr)
		return nil, errors.New("test dialer: not loopback")
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (d *guardDialer) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dials...)
}

// noLocal is a LocalAddrs that lists no host addresses.
func noLocal() ([]netip.Addr, error) { return nil, nil }

// serveProxy serves p on a unix socket in a temp dir and returns the path.
func serveProxy(t testing.TB, p *Proxy) string {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "p.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	})
	return sock
}

// shortTempDir is a temp dir with a path short enough for a unix socket.
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "egr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// tunnel sends CONNECT target through the proxy at sock and returns the
// response and, when it is 200, the open tunnel.
func tunnel(t testing.TB, network, addr, target string) (*http.Response, net.Conn) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		c.Close()
		return resp, nil
	}
	if br.Buffered() > 0 {
		t.Fatalf("CONNECT %s: %d stray bytes after the 200", target, br.Buffered())
	}
	t.Cleanup(func() { c.Close() })
	return resp, c
}

// echoServer echoes on a loopback listener and returns its address.
func echoServer(t testing.TB, network, addr string) string {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

// httpServer serves h on a loopback listener and returns its address.
func httpServer(t testing.TB, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	return l.Addr().String()
}

func portOf(t testing.TB, addr string) int {
	t.Helper()
	return int(netip.MustParseAddrPort(addr).Port())
}

// echoOnce writes msg into a tunnel and expects it back.
func echoOnce(t testing.TB, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("reading the echo: %v", err)
	}
	if string(buf) != msg {
		t.Fatalf("echo = %q, want %q", buf, msg)
	}
}
