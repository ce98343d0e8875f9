package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
)

// The real-jail tests re-execute the test binary inside bwrap with its own
// empty network namespace; jailChildEnv selects what the child does.
const jailChildEnv = "CCO_EGRESS_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(jailChildEnv); mode != "" {
		os.Exit(jailChild(mode))
	}
	os.Exit(m.Run())
}

// runInJail runs the test binary as a jail child under bwrap --unshare-net,
// with dir bound in, and returns its output.
func runInJail(t *testing.T, mode, dir string, extra []string, env ...string) (string, error) {
	t.Helper()
	bwrap := testenv.RequireBwrap(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--unshare-net", "--die-with-parent"}, extra...)
	args = append(args, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", dir, dir, "--", exe)
	cmd := exec.CommandContext(ctx, bwrap, args...)
	cmd.Env = append(os.Environ(), append(env, jailChildEnv+"="+mode)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestJailNetwork: inside the jail only lo exists and direct TCP, UDP and
// DNS fail; through a bridge started inside, a loopback upstream on the host
// registered under a test name answers, and refused destinations get 403
// from the proxy before any dial.
func TestJailNetwork(t *testing.T) {
	// As given, and as the launch runs it: in a user namespace with every
	// capability dropped.
	for name, extra := range map[string][]string{
		"plain":         nil,
		"userns-nocaps": {"--unshare-user", "--cap-drop", "ALL"},
	} {
		t.Run(name, func(t *testing.T) { testJailNetwork(t, extra) })
	}
}

func testJailNetwork(t *testing.T, extra []string) {
	up := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the host upstream "+r.URL.Path)
	}))
	port := portOf(t, up)
	names := map[string]string{
		"up.test":      "127.0.0.1",
		"lo.test":      "127.0.0.1",
		"meta.test":    "169.254.169.254",
		"private.test": "10.0.0.5",
		"lan.test":     "192.168.0.10",
		"cgnat.test":   "100.64.1.1",
		"ula.test":     "fd00::5",
	}
	dialer := newDialer(t, up)
	p := &Proxy{
		Policy:   Policy{Ports: []int{port, 80, 443}, AllowHost: []string{"up.test"}},
		Resolver: newResolver(names),
		Dialer:   dialer,
		Log:      &testenv.SyncBuffer{},
		// LocalAddrs stays the real one: the host's own interface addresses.
	}
	audit := filepath.Join(t.TempDir(), "egress.log")
	a, err := OpenAuditLog(audit, "jail")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p.Audit = a
	base := shortTempDir(t)
	h, err := StartHost(context.Background(), p, base)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	out, err := runInJail(t, "network", base, extra,
		"CCO_EGRESS_TEST_SOCKET="+h.SocketPath, fmt.Sprintf("CCO_EGRESS_TEST_PORT=%d", port),
		fmt.Sprintf("CCO_EGRESS_TEST_NOCAPS=%v", slices.Contains(extra, "--cap-drop")))
	t.Logf("jail child:\n%s", out)
	if err != nil {
		t.Fatalf("the jail child failed: %v", err)
	}
	if !strings.Contains(out, "child: all checks passed") {
		t.Fatal("the jail child did not finish its checks")
	}
	h.Close()
	if d := dialer.dialed(); len(d) != 2 || d[0] != up || d[1] != up {
		t.Errorf("the proxy dialled %v, want only the upstream, twice", d)
	}
	es, err := ReadAudit(audit)
	if err != nil {
		t.Fatal(err)
	}
	denied := 0
	for _, e := range es {
		if !e.Allowed {
			denied++
		}
	}
	if denied != len(jailRefused) {
		t.Errorf("%d denied audit entries, want %d: %+v", denied, len(jailRefused), es)
	}
}

// jailRefused are the destinations the child asks for and must see refused.
var jailRefused = []struct{ target, why string }{
	{"169.254.169.254:80", "link-local"},
	{"meta.test:80", "169.254.169.254, which is link-local"},
	{"10.0.0.5:443", "private"},
	{"private.test:443", "private"},
	{"lan.test:443", "private"},
	{"cgnat.test:443", "CGNAT"},
	{"ula.test:443", "unique local"},
	{"127.0.0.1:PORT", "loopback"},
	{"[::1]:PORT", "loopback"},
	{"lo.test:PORT", "loopback"},
	{"up.test:22", "port 22 is not in egress_ports"},
	{"unknown.test:443", "resolving unknown.test"},
}

// TestJailBridgeWithoutSocket: inside the jail, with no proxy socket, the
// bridge refuses to start.
func TestJailBridgeWithoutSocket(t *testing.T) {
	base := shortTempDir(t)
	out, err := runInJail(t, "nosocket", base, nil, "CCO_EGRESS_TEST_SOCKET="+filepath.Join(base, "cco-egress-x", SocketName))
	t.Logf("jail child:\n%s", out)
	if err != nil || !strings.Contains(out, "child: all checks passed") {
		t.Fatalf("the jail child failed: %v", err)
	}
}

func jailChild(mode string) int {
	var failed bool
	fail := func(format string, args ...any) {
		failed = true
		fmt.Printf("FAIL: "+format+"\n", args...)
	}
	sock := os.Getenv("CCO_EGRESS_TEST_SOCKET")
	switch mode {
	case "network":
		childNetwork(sock, os.Getenv("CCO_EGRESS_TEST_PORT"), fail)
	case "nosocket":
		if b, err := StartBridge(context.Background(), sock); err == nil {
			b.Close()
			fail("StartBridge without a proxy socket succeeded")
		} else {
			fmt.Printf("ok: StartBridge without a socket: %v\n", err)
		}
	default:
		fail("unknown mode %q", mode)
	}
	if failed {
		return 1
	}
	fmt.Println("child: all checks passed")
	return 0
}

func childNetwork(sock, port string, fail func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	if os.Getenv("CCO_EGRESS_TEST_NOCAPS") == "true" {
		st, _ := os.ReadFile("/proc/self/status")
		if !strings.Contains(string(st), "CapEff:\t0000000000000000") {
			fail("capabilities were not dropped:\n%s", st)
		} else {
			fmt.Println("ok: CapEff 0")
		}
	}
	ifs, err := net.Interfaces()
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	if err != nil || !slices.Equal(names, []string{"lo"}) {
		fail("interfaces %v (%v), want only lo", names, err)
	} else {
		fmt.Println("ok: only lo")
	}
	// The host's loopback upstream is not reachable directly: this lo is
	// the jail's own.
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 2*time.Second); err == nil {
		c.Close()
		fail("direct TCP to the host's upstream 127.0.0.1:%s worked", port)
	} else {
		fmt.Printf("ok: direct TCP to 127.0.0.1:%s: %v\n", port, err)
	}
	// There is no route out of this namespace: these fail before a packet
	// is made.
	for _, addr := range []string{"192.0.2.1:443", "[2001:db8::1]:443"} {
		if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			c.Close()
			fail("direct TCP to %s worked", addr)
		} else if !errors.Is(err, syscall.ENETUNREACH) {
			fail("direct TCP to %s: %v, want network unreachable", addr, err)
		} else {
			fmt.Printf("ok: direct TCP to %s: %v\n", addr, err)
		}
	}
	if c, err := net.Dial("udp", "192.0.2.1:53"); err == nil {
		_, werr := c.Write([]byte("x"))
		c.Close()
		if werr == nil {
			fail("direct UDP to 192.0.2.1:53 was sent")
		}
	} else {
		fmt.Printf("ok: direct UDP: %v\n", err)
	}
	r := &net.Resolver{PreferGo: true}
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	addrs, err := r.LookupHost(dctx, "example.com")
	dcancel()
	var de *net.DNSError
	if err == nil {
		fail("DNS resolved example.com to %v", addrs)
	} else if errors.As(err, &de) && de.IsNotFound {
		fail("DNS answered NXDOMAIN (a server was reached): %v", err)
	} else {
		fmt.Printf("ok: DNS: %v\n", err)
	}

	b, err := StartBridge(ctx, sock)
	if err != nil {
		fail("StartBridge: %v", err)
		return
	}
	defer b.Close()
	// Through the bridge, configured the way an agent is: by ProxyEnv.
	for _, kv := range ProxyEnv(b.Addr) {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	resp, err := client.Get("http://up.test:" + port + "/plain")
	if err != nil {
		fail("GET through the bridge: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "hello from the host upstream /plain" {
			fail("GET through the bridge: %d %q", resp.StatusCode, body)
		} else {
			fmt.Println("ok: absolute-form GET through the bridge")
		}
	}
	// CONNECT, then HTTP over the tunnel.
	if c, resp, err := childConnect(b.Addr.String(), "up.test:"+port); err != nil || resp.StatusCode != 200 {
		fail("CONNECT up.test: %v %v", resp, err)
	} else {
		fmt.Fprintf(c, "GET /tunnel HTTP/1.1\r\nHost: up.test\r\nConnection: close\r\n\r\n")
		tr, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			fail("over the tunnel: %v", err)
		} else {
			body, _ := io.ReadAll(tr.Body)
			if string(body) != "hello from the host upstream /tunnel" {
				fail("over the tunnel: %q", body)
			} else {
				fmt.Println("ok: CONNECT tunnel through the bridge")
			}
		}
		c.Close()
	}
	for _, r := range jailRefused {
		target := strings.ReplaceAll(r.target, "PORT", port)
		c, resp, err := childConnect(b.Addr.String(), target)
		if err != nil {
			fail("CONNECT %s: %v", target, err)
			continue
		}
		c.Close()
		want := http.StatusForbidden
		if strings.HasPrefix(r.why, "resolving ") {
			want = http.StatusBadGateway // a name that did not resolve failed; the policy refused nothing
		}
		if resp.StatusCode != want || !strings.Contains(resp.Header.Get(ReasonHeader), r.why) {
			fail("CONNECT %s: %d %q, want %d %q", target, resp.StatusCode, resp.Header.Get(ReasonHeader), want, r.why)
		} else {
			fmt.Printf("ok: CONNECT %s refused: %s\n", target, resp.Header.Get(ReasonHeader))
		}
	}
}

func childConnect(bridge, target string) (net.Conn, *http.Response, error) {
	c, err := net.DialTimeout("tcp", bridge, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, resp, nil
}
