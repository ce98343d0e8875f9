package bridge

import (
	"io"
	"net"
	"sync"
)

// relayBuf serves io.CopyBuffer when neither side can splice (an injected
// Dialer's wrapped connection, say); TCP and unix sockets splice and never
// touch it.
var relayBuf = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

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
	bp := relayBuf.Get().(*[]byte)
	n, err := io.CopyBuffer(dst, src, *bp)
	relayBuf.Put(bp)
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
