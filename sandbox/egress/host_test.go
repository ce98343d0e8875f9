package egress

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func testProxy(t testing.TB, pol Policy, names map[string]string, upstreams ...string) *Proxy {
	return &Proxy{Policy: pol, Resolver: newResolver(names), Dialer: newDialer(t, upstreams...), LocalAddrs: noLocal}
}

func TestStartHostFailClosed(t *testing.T) {
	base := shortTempDir(t)
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	long := filepath.Join(base, strings.Repeat("d", 100))
	os.Mkdir(long, 0o700)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	ok := func() *Proxy { return testProxy(t, Policy{}, nil) }
	for _, tc := range []struct {
		name string
		ctx  context.Context
		p    *Proxy
		dir  string
		want string
	}{
		{"missing", context.Background(), ok(), filepath.Join(base, "missing"), "no such file"},
		{"a file", context.Background(), ok(), file, "not a directory"},
		{"unwritable", context.Background(), ok(), "/proc", "egress runtime directory"},
		{"socket path too long", context.Background(), ok(), long, "more than a unix socket allows"},
		{"egress off", context.Background(), testProxy(t, Policy{Mode: ModeOff}, nil), base, "egress is off"},
		{"no proxy", context.Background(), nil, base, "no proxy"},
		{"cancelled", cancelled, ok(), base, "context canceled"},
	} {
		h, err := StartHost(tc.ctx, tc.p, tc.dir)
		if err == nil {
			h.Close()
			t.Errorf("%s: StartHost succeeded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want it to contain %q", tc.name, err, tc.want)
		}
	}
	// A failed start leaves nothing behind.
	for _, d := range []string{base, long} {
		if left, _ := filepath.Glob(filepath.Join(d, "cco-egress-*")); len(left) != 0 {
			t.Errorf("left behind: %v", left)
		}
	}
}

func TestStartHostRuntimeDir(t *testing.T) {
	base := shortTempDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := StartHost(ctx, testProxy(t, Policy{}, nil), base)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(h.Dir) != base || h.SocketPath != filepath.Join(h.Dir, SocketName) {
		t.Errorf("dir %s socket %s", h.Dir, h.SocketPath)
	}
	fi, err := os.Lstat(h.Dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
		t.Errorf("runtime dir %v %v", fi.Mode(), err)
	}
	if fi, err := os.Lstat(h.SocketPath); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %v %v", fi.Mode(), err)
	}
	// Listening as soon as StartHost returns.
	resp, c := tunnel(t, "unix", h.SocketPath, "10.0.0.1:443")
	wantRefused(t, resp, c, http.StatusForbidden, "private")
	// A second host under the same parent gets its own directory.
	h2, err := StartHost(ctx, testProxy(t, Policy{}, nil), base)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Dir == h.Dir {
		t.Error("two hosts share a runtime directory")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.Dir); !os.IsNotExist(err) {
		t.Errorf("%s survives Close: %v", h.Dir, err)
	}
	// Ending the context stops the host too.
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(h2.Dir); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the host outlived its context")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h2.Close()
}

func TestStartBridgeFailClosed(t *testing.T) {
	dir := shortTempDir(t)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.sock"), "no such file"},
		{file, "is not a unix socket"},
	} {
		b, err := StartBridge(context.Background(), tc.path)
		if err == nil {
			b.Close()
			t.Errorf("%s: StartBridge succeeded", tc.path)
		} else if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("%s: error %q, want it to name the path and say %q", tc.path, err, tc.want)
		}
	}
}

// TestBridgeToDeadSocketCarriesNothing: a socket nobody listens on (the
// shadow, which owns it, is gone) lets the bridge start, but every
// connection through it is closed at once, with nothing carried.
func TestBridgeToDeadSocketCarriesNothing(t *testing.T) {
	dir := shortTempDir(t)
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	b, err := StartBridge(context.Background(), stale)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := net.Dial("tcp", b.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	if n, err := c.Read(make([]byte, 64)); n != 0 || err == nil {
		t.Errorf("read %d bytes, err %v: want the connection closed with nothing", n, err)
	}
}

func TestProxyEnv(t *testing.T) {
	got := ProxyEnv(netip.MustParseAddrPort("127.0.0.1:3128"))
	want := []string{
		"HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
		"HTTP_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
		"ALL_PROXY=http://127.0.0.1:3128", "all_proxy=http://127.0.0.1:3128",
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ProxyEnv = %q", got)
	}
}

// hostAndBridge runs p behind a Host and a Bridge, as a launch does.
func hostAndBridge(t testing.TB, p *Proxy) (*Host, *Bridge) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h, err := StartHost(ctx, p, shortTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := StartBridge(ctx, h.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); b.Close(); h.Close() })
	return h, b
}

func TestBridgeCarriesAndCloses(t *testing.T) {
	up := echoServer(t, "tcp4", "127.0.0.1:0")
	p := testProxy(t, Policy{Ports: []int{portOf(t, up)}, AllowHost: []string{"up.test"}}, map[string]string{"up.test": "127.0.0.1"}, up)
	_, b := hostAndBridge(t, p)
	if !b.Addr.Addr().IsLoopback() || !b.Addr.Addr().Is4() || b.Addr.Port() == 0 {
		t.Errorf("bridge address %s", b.Addr)
	}
	resp, c := tunnel(t, "tcp", b.Addr.String(), fmt.Sprintf("up.test:%d", portOf(t, up)))
	if c == nil {
		t.Fatalf("through the bridge: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	echoOnce(t, c, "through the bridge")
	b.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a bridged connection survived Close")
	}
	if _, err := net.Dial("tcp", b.Addr.String()); err == nil {
		t.Error("the bridge still listens after Close")
	}
}

// A bounded load: many parallel streams through bridge and proxy, each with
// its own size both ways, every byte and every count checked (at the client,
// at the upstream and in the audit log).
func TestLoadParallelStreams(t *testing.T) {
	const streams = 48
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	up := l.Addr().String()
	// The upstream reads a stream to EOF, then answers with the digest of
	// what it got followed by the number of bytes the stream asked for.
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var want [8]byte
				if _, err := io.ReadFull(c, want[:]); err != nil {
					return
				}
				h := sha256.New()
				h.Write(want[:])
				if _, err := io.Copy(h, c); err != nil {
					return
				}
				c.Write(h.Sum(nil))
				n := int64(want[0])<<16 | int64(want[1])<<8 | int64(want[2])
				io.CopyN(c, rand.NewChaCha8([32]byte{want[3]}), n)
			}()
		}
	}()
	port := portOf(t, up)
	p := testProxy(t, Policy{Ports: []int{port}, AllowHost: []string{"*.load.test"}}, nil, up)
	names := map[string]string{}
	for i := 0; i < streams; i++ {
		names[fmt.Sprintf("s%d.load.test", i)] = "127.0.0.1"
	}
	p.Resolver = newResolver(names)
	audit := filepath.Join(t.TempDir(), "egress.log")
	a, err := OpenAuditLog(audit, "load")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p.Audit = a
	h, b := hostAndBridge(t, p)

	sent := make([]int64, streams)
	recv := make([]int64, streams)
	var wg sync.WaitGroup
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			upN := 1 + r.Int64N(1<<20)
			downN := r.Int64N(1 << 20)
			_, c := tunnel(t, "tcp", b.Addr.String(), fmt.Sprintf("s%d.load.test:%d", i, port))
			if c == nil {
				t.Errorf("stream %d refused", i)
				return
			}
			c.SetDeadline(time.Now().Add(60 * time.Second))
			head := []byte{byte(downN >> 16), byte(downN >> 8), byte(downN), byte(i), 0, 0, 0, 0}
			sum := sha256.New()
			sum.Write(head)
			body := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{byte(i), 1}), upN), sum)
			go func() {
				c.Write(head)
				io.Copy(c, body)
				c.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err != nil {
				t.Errorf("stream %d: %v", i, err)
				return
			}
			if len(got) != 32+int(downN) {
				t.Errorf("stream %d: %d bytes back, want %d", i, len(got), 32+downN)
				return
			}
			if string(got[:32]) != string(sum.Sum(nil)) {
				t.Errorf("stream %d: the upstream's digest differs from what was sent", i)
			}
			wantDown := make([]byte, downN)
			io.ReadFull(rand.NewChaCha8([32]byte{byte(i)}), wantDown)
			if string(got[32:]) != string(wantDown) {
				t.Errorf("stream %d: the bytes back differ", i)
			}
			sent[i], recv[i] = 8+upN, int64(len(got))
		}()
	}
	wg.Wait()
	h.Close()
	es, err := ReadAudit(audit)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != streams {
		t.Fatalf("%d audit entries, want %d", len(es), streams)
	}
	for _, e := range es {
		var i int
		fmt.Sscanf(e.Target, "s%d.load.test", &i)
		if !e.Allowed || e.Up != sent[i] || e.Down != recv[i] {
			t.Errorf("stream %d: audit %+v, want up %d down %d", i, e, sent[i], recv[i])
		}
	}
}

func TestNewProxy(t *testing.T) {
	if _, err := NewProxy(Policy{Mode: ModeOff, LogPath: "/x"}, "s", nil); err == nil || !strings.Contains(err.Error(), "egress is off") {
		t.Errorf("off: %v", err)
	}
	if _, err := NewProxy(Policy{}, "s", nil); err == nil || !strings.Contains(err.Error(), "egress_log") {
		t.Errorf("no log path: %v", err)
	}
	home := t.TempDir()
	pol, err := ParsePolicy(map[string]any{}, "claude", home)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProxy(pol, "sess-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Real seams are left nil (resolved at use); this test only asks for
	// refusals that never resolve or dial.
	p.LocalAddrs = noLocal
	h, err := StartHost(context.Background(), p, shortTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	resp, c := tunnel(t, "unix", h.SocketPath, "169.254.169.254:443")
	wantRefused(t, resp, c, http.StatusForbidden, "link-local")
	h.Close()
	es, err := ReadAudit(filepath.Join(home, ".local/state/cco/egress.log"))
	if err != nil || len(es) != 1 || es[0].Session != "sess-1" || es[0].Allowed {
		t.Errorf("audit %+v %v", es, err)
	}
	if err := p.Audit.Record(Entry{}); err == nil {
		t.Error("the audit log is still open after the host closed")
	}
}
