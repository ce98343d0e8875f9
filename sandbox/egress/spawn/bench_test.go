package spawn

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cco-dev/cco/sandbox/egress"
	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// The test binary is also the egress-proxy program the benchmarks start,
// as the shadow starts /usr/libexec/cco/egress-proxy.
const proxyModeEnv = "CCO_SPAWN_TEST_PROXY"

func TestMain(m *testing.M) {
	if mode := os.Getenv(proxyModeEnv); mode != "" && len(os.Args) == 2 {
		files := egress.Inherited()
		if mode == "old" {
			// A program of an earlier release: it knows nothing of the
			// endpoint's descriptor.
			files.Endpoints = nil
		}
		err := egress.ServeProcess(os.Args[1], os.Stdin, os.Stdout, files)
		if err != nil {
			fmt.Println(egress.ErrorPrefix + err.Error())
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// upstream is a loopback server: a connection's first byte 'd' gets
// bulkBytes and the end; 'e' echoes every later read back.
func upstream(tb testing.TB, bulkBytes int) netip.AddrPort {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	bulk := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var op [1]byte
				if _, err := io.ReadFull(c, op[:]); err != nil {
					return
				}
				switch op[0] {
				case 'd':
					for n := bulkBytes; n > 0; n -= len(bulk) {
						if _, err := c.Write(bulk[:min(n, len(bulk))]); err != nil {
							return
						}
					}
				case 'e':
					buf := make([]byte, 512)
					for {
						n, err := c.Read(buf)
						if err != nil {
							return
						}
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return netip.MustParseAddrPort(l.Addr().String())
}

// benchProxy is a session's proxy as the launcher runs it, serving an
// endpoint listener on the host's loopback (the launcher's is in the
// jail's network namespace; the path from it is the same) and allowed to
// reach the upstream.
func benchProxy(tb testing.TB, up netip.AddrPort) netip.AddrPort {
	px := testProxy(tb, "1", up)
	px.Watch()
	ln := anyLoopback(tb)
	addr := localAddr(tb, ln)
	if err := px.Bridge(ln); err != nil {
		tb.Fatal(err)
	}
	return addr
}

// testProxy starts a session's proxy (this test binary, in mode) that may
// reach up, in a TMPDIR of its own; Stop is the test's cleanup. The
// program was heard before, so it starts on the first connection.
func testProxy(tb testing.TB, mode string, up netip.AddrPort) *Proxy {
	dir := tb.TempDir()
	tb.Setenv("TMPDIR", dir)
	tb.Setenv(proxyModeEnv, mode)
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	pol := policy.Policy{Mode: policy.ModePublic, Ports: []int{int(up.Port())},
		AllowIP: []netip.Prefix{netip.PrefixFrom(up.Addr(), 32)}, LogPath: filepath.Join(dir, "egress.log")}
	// The first launch with a program starts it before the jail.
	first, err := Start(exe, pol, "first", os.ReadFile)
	if err != nil {
		tb.Fatal(err)
	}
	first.Stop()
	px, err := Start(exe, pol, "test", os.ReadFile)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(px.Stop)
	return px
}

// anyLoopback is a listener on a free loopback port, as the endpoint's
// file.
func anyLoopback(tb testing.TB) *os.File {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f, err := l.(*net.TCPListener).File()
	l.Close()
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

func localAddr(tb testing.TB, f *os.File) netip.AddrPort {
	l, err := net.FileListener(f)
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return netip.MustParseAddrPort(l.Addr().String())
}

// conn opens a connection to the upstream: directly, or through the
// endpoint with CONNECT, and sends op.
func conn(tb testing.TB, via, up netip.AddrPort, op byte) net.Conn {
	c, err := net.Dial("tcp4", via.String())
	if err != nil {
		tb.Fatal(err)
	}
	if via != up {
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", up, up)
		br := bufio.NewReader(c)
		status, err := br.ReadString('\n')
		if err != nil || status != "HTTP/1.1 200 Connection established\r\n" {
			tb.Fatalf("CONNECT %s: %q %v", up, status, err)
		}
		if l, err := br.ReadString('\n'); err != nil || l != "\r\n" {
			tb.Fatalf("CONNECT %s: %q %v", up, l, err)
		}
		if br.Buffered() > 0 {
			tb.Fatal("the proxy sent bytes after its answer")
		}
	}
	if op != 0 {
		if _, err := c.Write([]byte{op}); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

// download reads a bulk transfer to its end, timed from the request on
// an open connection (or tunnel).
func download(tb testing.TB, via, up netip.AddrPort, want int, buf []byte) time.Duration {
	c := conn(tb, via, up, 0)
	defer c.Close()
	start := time.Now()
	if _, err := c.Write([]byte{'d'}); err != nil {
		tb.Fatal(err)
	}
	n := 0
	for {
		k, err := c.Read(buf)
		n += k
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	if n != want {
		tb.Fatalf("downloaded %d bytes, want %d", n, want)
	}
	return time.Since(start)
}

// echo makes one request and reads its answer.
func echo(tb testing.TB, c net.Conn, buf []byte) {
	if _, err := c.Write(buf[:64]); err != nil {
		tb.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf[:64]); err != nil {
		tb.Fatal(err)
	}
}

// newConn is a new connection's cost: connect (and CONNECT), and the
// first request's answer.
func newConn(tb testing.TB, via, up netip.AddrPort, buf []byte) time.Duration {
	start := time.Now()
	c := conn(tb, via, up, 'e')
	echo(tb, c, buf)
	d := time.Since(start)
	c.Close()
	return d
}

// requests is the cost of one request in an open connection or tunnel.
func requests(tb testing.TB, c net.Conn, n int, buf []byte) time.Duration {
	start := time.Now()
	for i := 0; i < n; i++ {
		echo(tb, c, buf)
	}
	return time.Since(start) / time.Duration(n)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkEgress measures the egress proxy as a launch runs it (the
// egress-proxy process serving the agent's endpoint) against a direct
// loopback connection to the same upstream, interleaved in each iteration
// (the order alternates), and reports the medians:
//   - egress-MB/s beside baseline-MB/s: a 64 MiB download in an open
//     connection (budget: egress at least 0.9 of the baseline);
//   - egress-ms/conn beside baseline-ms/conn: a new connection (with
//     CONNECT) and its first request answered (budget: at most 0.15 ms
//     more);
//   - egress-ms/req beside baseline-ms/req: a request in an open tunnel
//     (budget: at most 0.03 ms more).
//
// overhead-ms/conn and overhead-ms/req are the differences, and
// conn_added/budget and req_added/budget the differences over their
// budgets (at most 1 when the budget holds), as bench/run.sh shows them.
//
//	go test -run '^$' -bench Egress -benchtime 40x ./sandbox/egress/spawn/
func BenchmarkEgress(b *testing.B) {
	const bulk = 64 << 20
	up := upstream(b, bulk)
	ep := benchProxy(b, up)
	buf := make([]byte, 256<<10)
	// The proxy process starts on the first connection: not measured.
	newConn(b, ep, up, buf)
	open := map[netip.AddrPort]net.Conn{up: conn(b, up, up, 'e'), ep: conn(b, ep, up, 'e')}
	defer open[up].Close()
	defer open[ep].Close()
	samples := map[netip.AddrPort]*[3][]time.Duration{up: {}, ep: {}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		paths := []netip.AddrPort{up, ep}
		if i%2 == 1 {
			paths[0], paths[1] = ep, up
		}
		for _, via := range paths {
			s := samples[via]
			s[0] = append(s[0], download(b, via, up, bulk, buf))
			for range 5 {
				s[1] = append(s[1], newConn(b, via, up, buf))
				s[2] = append(s[2], requests(b, open[via], 20, buf))
			}
		}
	}
	b.StopTimer()
	d, e := samples[up], samples[ep]
	mbs := func(t time.Duration) float64 { return float64(bulk) / 1e6 / t.Seconds() }
	b.ReportMetric(mbs(median(e[0])), "egress-MB/s")
	b.ReportMetric(mbs(median(d[0])), "baseline-MB/s")
	b.ReportMetric(ms(median(e[1])), "egress-ms/conn")
	b.ReportMetric(ms(median(d[1])), "baseline-ms/conn")
	b.ReportMetric(ms(median(e[1]))-ms(median(d[1])), "overhead-ms/conn")
	b.ReportMetric(ms(median(e[2])), "egress-ms/req")
	b.ReportMetric(ms(median(d[2])), "baseline-ms/req")
	b.ReportMetric(ms(median(e[2]))-ms(median(d[2])), "overhead-ms/req")
	b.ReportMetric((ms(median(e[1]))-ms(median(d[1])))/connBudgetMs, "conn_added/budget")
	b.ReportMetric((ms(median(e[2]))-ms(median(d[2])))/reqBudgetMs, "req_added/budget")
}

// The budget of BenchmarkEgress's added times.
const (
	connBudgetMs = 0.15
	reqBudgetMs  = 0.03
)
