package egress

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// The throughput benchmarks push bulk bytes from a client to a loopback
// sink three ways, in the same run:
//   - direct:  client -> sink
//   - relay:   client -> TCP -> unix socket -> TCP -> sink, a plain relay
//     written here with io.Copy (the baseline: the same hops, no policy)
//   - egress:  client -> Bridge -> unix socket -> Proxy (CONNECT) -> sink
//
// Goal: egress >= 0.8 of relay. BenchmarkEgressVsRelay reports the ratio.
//
//	go test -run '^$' -bench . -benchtime 20x ./sandbox/egress/

const benchChunk = 1 << 20

// sinkServer reads each connection to EOF and answers with the byte count.
func sinkServer(b *testing.B) string {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 256<<10)
				var n int64
				for {
					k, err := c.Read(buf)
					n += int64(k)
					if err != nil {
						break
					}
				}
				binary.Write(c, binary.BigEndian, n)
			}()
		}
	}()
	return l.Addr().String()
}

// plainRelay is the baseline: TCP in, unix socket in the middle, TCP out.
func plainRelay(b *testing.B, sink string) string {
	sock := filepath.Join(shortTempDir(b), "relay.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	tl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ul.Close(); tl.Close() })
	serve := func(l net.Listener, network, to string) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial(network, to)
				if err != nil {
					return
				}
				defer u.Close()
				done := make(chan struct{})
				go func() {
					io.Copy(c, u)
					c.(interface{ CloseWrite() error }).CloseWrite()
					close(done)
				}()
				io.Copy(u, c)
				u.(interface{ CloseWrite() error }).CloseWrite()
				<-done
			}()
		}
	}
	go serve(ul, "tcp4", sink)
	go serve(tl, "unix", sock)
	return tl.Addr().String()
}

// egressPath starts a Host and Bridge whose proxy may reach sink.
func egressPath(b *testing.B, sink string) (bridge, target string) {
	port := portOf(b, sink)
	p := testProxy(b, Policy{Ports: []int{port}, AllowHost: []string{"sink.test"}}, map[string]string{"sink.test": "127.0.0.1"}, sink)
	ctx, cancel := context.WithCancel(context.Background())
	h, err := StartHost(ctx, p, shortTempDir(b))
	if err != nil {
		b.Fatal(err)
	}
	br, err := StartBridge(ctx, h.SocketPath)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); br.Close(); h.Close() })
	return br.Addr.String(), fmt.Sprintf("sink.test:%d", port)
}

// open dials addr, and sends CONNECT target first when target is set.
func open(b *testing.B, addr, target string) net.Conn {
	if target != "" {
		resp, c := tunnel(b, "tcp", addr, target)
		if c == nil {
			b.Fatalf("CONNECT %s: %d", target, resp.StatusCode)
		}
		return c
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// push writes chunks MiB, half-closes and checks the sink's count.
func push(b *testing.B, c net.Conn, chunks int, buf []byte) {
	defer c.Close()
	for i := 0; i < chunks; i++ {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.(*net.TCPConn).CloseWrite()
	var n int64
	if err := binary.Read(c, binary.BigEndian, &n); err != nil {
		b.Fatal(err)
	}
	if n != int64(chunks)*int64(len(buf)) {
		b.Fatalf("sink got %d bytes, want %d", n, int64(chunks)*int64(len(buf)))
	}
}

func BenchmarkThroughput(b *testing.B) {
	sink := sinkServer(b)
	relay := plainRelay(b, sink)
	bridge, target := egressPath(b, sink)
	buf := make([]byte, benchChunk)
	for _, tc := range []struct{ name, addr, target string }{
		{"direct", sink, ""},
		{"relay", relay, ""},
		{"egress", bridge, target},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := open(b, tc.addr, tc.target)
			b.SetBytes(benchChunk)
			b.ResetTimer()
			push(b, c, b.N, buf)
		})
	}
}

// BenchmarkEgressVsRelay moves the same volume through each path in every
// iteration, alternating the order, and reports each path's MB/s and the
// ratio egress/relay (goal >= 0.8).
func BenchmarkEgressVsRelay(b *testing.B) {
	const chunks = 32
	sink := sinkServer(b)
	relay := plainRelay(b, sink)
	bridge, target := egressPath(b, sink)
	buf := make([]byte, benchChunk)
	var tDirect, tRelay, tEgress time.Duration
	timed := func(addr, target string) time.Duration {
		start := time.Now()
		push(b, open(b, addr, target), chunks, buf)
		return time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			tRelay += timed(relay, "")
			tEgress += timed(bridge, target)
		} else {
			tEgress += timed(bridge, target)
			tRelay += timed(relay, "")
		}
		tDirect += timed(sink, "")
	}
	mb := float64(b.N*chunks*benchChunk) / 1e6
	b.ReportMetric(mb/tDirect.Seconds(), "direct-MB/s")
	b.ReportMetric(mb/tRelay.Seconds(), "relay-MB/s")
	b.ReportMetric(mb/tEgress.Seconds(), "egress-MB/s")
	b.ReportMetric(tRelay.Seconds()/tEgress.Seconds(), "egress/relay")
}
