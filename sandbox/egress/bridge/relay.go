package bridge

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
)

// relayBufSize is the most one read of a relay takes. Large reads are what
// keep a bulk transfer's cost near a direct connection's: each read and
// write is a wakeup, and a splice(2) through a pipe, tried and measured,
// made the receiver's reads dearer than the copy it saved
// (docs/adr/0055-egress-one-hop.md).
const relayBufSize = 1 << 20

// buffers holds a few idle relay buffers. A relay takes one only once its
// source is readable and gives it back after the write, so a thousand idle
// tunnels hold no buffer at all.
var buffers = struct {
	mu   sync.Mutex
	free [][]byte
}{}

// keptBuffers bounds the idle buffers kept for reuse.
const keptBuffers = 8

func getBuf() []byte {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	if n := len(buffers.free); n > 0 {
		b := buffers.free[n-1]
		buffers.free = buffers.free[:n-1]
		return b
	}
	return make([]byte, relayBufSize)
}

func putBuf(b []byte) {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	if len(buffers.free) < keptBuffers {
		buffers.free = append(buffers.free, b)
	}
}

// Relay copies a->b and b->a until both directions are done, passing a
// half-close through (so that a client's shutdown(SHUT_WR) reaches the
// upstream) and aborting both directions on an error in either. It returns
// the bytes carried each way.
func Relay(a, b net.Conn) (aToB, bToA int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		bToA = pipe(a, b)
	}()
	aToB = pipe(b, a)
	wg.Wait()
	return aToB, bToA
}

type closeWriter interface{ CloseWrite() error }

func pipe(dst, src net.Conn) int64 {
	n, err := copyConn(dst, src)
	if err != nil {
		dst.Close()
		src.Close()
		return n
	}
	if cw, ok := dst.(closeWriter); ok {
		if cw.CloseWrite() == nil {
			return n
		}
	}
	dst.Close()
	return n
}

// copyConn copies src to dst until src's end of file. A source with a
// descriptor is read only once readable, into a buffer taken then.
func copyConn(dst io.Writer, src net.Conn) (int64, error) {
	sc, ok := src.(syscall.Conn)
	if !ok {
		buf := getBuf()
		defer putBuf(buf)
		return io.CopyBuffer(dst, struct{ io.Reader }{src}, buf)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var total int64
	for {
		var buf []byte
		var n int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			buf = getBuf()
			for {
				n, rerr = syscall.Read(int(fd), buf)
				if rerr != syscall.EINTR {
					break
				}
			}
			if rerr == syscall.EAGAIN {
				putBuf(buf)
				buf = nil
				return false // wait until readable
			}
			return true
		})
		if err == nil {
			err = rerr
		}
		if err != nil || n <= 0 {
			if buf != nil {
				putBuf(buf)
			}
			if err == nil || errors.Is(err, io.EOF) {
				return total, nil
			}
			return total, err
		}
		w, werr := dst.Write(buf[:n])
		putBuf(buf)
		total += int64(w)
		if werr != nil {
			return total, werr
		}
	}
}
