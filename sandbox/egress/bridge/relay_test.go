package bridge

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// pair is a connected TCP pair on loopback.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// plain is a connection whose descriptor the relay cannot see.
type plain struct{ net.Conn }

func (p plain) CloseWrite() error { return p.Conn.(*net.TCPConn).CloseWrite() }

// TestRelay: bytes cross whole both ways, in reads larger and smaller than
// a buffer, a half-close passes through, and the counts are the bytes.
func TestRelay(t *testing.T) {
	for name, mk := range map[string]func(t *testing.T) (net.Conn, net.Conn){
		"tcp": pair,
		"no descriptor": func(t *testing.T) (net.Conn, net.Conn) {
			b, up := pair(t)
			return plain{b}, up
		},
	} {
		t.Run(name, func(t *testing.T) {
			client, a := pair(t)
			b, upstream := mk(t)
			up := make([]byte, 3*relayBufSize+12345)
			down := make([]byte, relayBufSize/3)
			rand.Read(up)
			rand.Read(down)
			type counts struct{ aToB, bToA int64 }
			done := make(chan counts, 1)
			go func() {
				x, y := Relay(a, b)
				done <- counts{x, y}
			}()
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(upstream) // to the client's half-close
				upstream.Write(down)
				upstream.Close()
				got <- b
			}()
			go func() {
				client.Write(up)
				client.(*net.TCPConn).CloseWrite()
			}()
			client.SetDeadline(time.Now().Add(20 * time.Second))
			back, err := io.ReadAll(client)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(<-got, up) || !bytes.Equal(back, down) {
				t.Fatal("the bytes changed on the way")
			}
			if c := <-done; c.aToB != int64(len(up)) || c.bToA != int64(len(down)) {
				t.Errorf("counted %d and %d bytes, want %d and %d", c.aToB, c.bToA, len(up), len(down))
			}
			if n := len(buffers.free); n > keptBuffers {
				t.Errorf("%d idle buffers kept", n)
			}
		})
	}
}
