// Package bridge is the in-jail end of the egress path: a listener on
// 127.0.0.1 that carries each connection to the egress proxy's unix socket,
// and the proxy variables that point the agent at it. It links no HTTP
// stack, so the in-jail helper starts fast; Relay also serves the proxy's
// CONNECT tunnels.
package bridge

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// Bridge, inside the jail, carries each TCP connection to 127.0.0.1:<port>
// to the proxy's unix socket. It lives in the process that started it: the
// in-jail helper must stay the agent's parent (it does, to relay the pty),
// since an exec would end it.
type Bridge struct {
	// Addr is where the agent's proxy variables point.
	Addr netip.AddrPort

	socket string
	// connect, when set, is the host:port each connection is a CONNECT
	// tunnel to (ServeConnect).
	connect string
	ln      net.Listener
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	once    sync.Once
	stop    chan struct{}
}

// Start checks that the proxy's socket is at socketPath, listens on
// 127.0.0.1 (a free port) and returns once listening. Any failure is an
// error: the agent must then not start. (A proxy that cannot serve ends the
// session in the shadow, which owns the socket.)
func Start(ctx context.Context, socketPath string) (*Bridge, error) {
	fi, err := os.Stat(socketPath)
	if err != nil {
		return nil, fmt.Errorf("egress bridge: the proxy socket: %w (the launcher must bind the egress runtime directory into the jail)", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("egress bridge: %s is not a unix socket (mode %v)", socketPath, fi.Mode())
	}
	// No probe connection: the shadow holds the socket listening for the
	// whole session and starts the proxy behind it on the first
	// connection, which a probe would make for nothing.
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("egress bridge: listening on 127.0.0.1: %w", err)
	}
	b, err := Serve(ln, socketPath)
	if err != nil {
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
			b.Close()
		case <-b.stop:
		}
	}()
	return b, nil
}

// Serve carries each connection ln accepts to the proxy's socket at
// socketPath until Close: the launcher serves so the listener it made in
// the jail's network namespace, with no process of its own in the jail.
func Serve(ln net.Listener, socketPath string) (*Bridge, error) {
	addr, err := netip.ParseAddrPort(ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("egress bridge: listener address %s: %w", ln.Addr(), err)
	}
	b := &Bridge{Addr: addr, socket: socketPath, ln: ln, conns: map[net.Conn]struct{}{}, stop: make(chan struct{})}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// ServeConnect is Serve for a listener whose connections each go to one
// destination, target: each is a CONNECT tunnel through the proxy's
// socket, opened before the first byte is carried.
func ServeConnect(ln net.Listener, socketPath, target string) (*Bridge, error) {
	b, err := Serve(ln, socketPath)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.connect = target
	b.mu.Unlock()
	return b, nil
}

// OpenTunnel asks the proxy on u for a tunnel to target and reads its
// answer's head byte by byte, so that nothing the destination sends
// first (an SSH server's banner) is taken with it.
func OpenTunnel(u net.Conn, target string) error {
	if _, err := fmt.Fprintf(u, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return err
	}
	u.SetReadDeadline(time.Now().Add(time.Minute))
	defer u.SetReadDeadline(time.Time{})
	var head []byte
	one := make([]byte, 1)
	for len(head) < 8192 {
		if _, err := u.Read(one); err != nil {
			return err
		}
		head = append(head, one[0])
		if len(head) >= 4 && string(head[len(head)-4:]) == "\r\n\r\n" {
			if len(head) < 12 || string(head[9:12]) != "200" {
				why := ""
				for _, l := range strings.Split(string(head), "\r\n") {
					if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "X-Cco-Egress-Reason") {
						why = ": " + strings.TrimSpace(v)
					}
				}
				return fmt.Errorf("the egress proxy refused the tunnel to %s%s", target, why)
			}
			return nil
		}
	}
	return fmt.Errorf("the proxy's answer for %s is too long", target)
}

func (b *Bridge) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			if b.isClosed() {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.wg.Done()
			defer b.remove(c)
			u, err := net.Dial("unix", b.socket)
			if err != nil {
				// Fail closed: the agent sees a reset, never a way around.
				return
			}
			if !b.add(u) {
				u.Close()
				return
			}
			defer b.remove(u)
			b.mu.Lock()
			target := b.connect
			b.mu.Unlock()
			if target != "" && OpenTunnel(u, target) != nil {
				return
			}
			Relay(c, u)
		}()
	}
}

func (b *Bridge) add(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Bridge) remove(c net.Conn) {
	c.Close()
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
}

func (b *Bridge) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Close stops listening, cuts every bridged connection and waits for them.
func (b *Bridge) Close() error {
	var err error
	b.once.Do(func() {
		close(b.stop)
		b.mu.Lock()
		b.closed = true
		err = b.ln.Close()
		for c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return err
}

// ProxyEnv is the environment that points an agent at the bridge: the
// proxy variables in both cases, and NO_PROXY for the jail's own loopback.
func ProxyEnv(addr netip.AddrPort) []string {
	u := "http://" + addr.String()
	const none = "localhost,127.0.0.1,::1"
	return []string{
		"HTTPS_PROXY=" + u, "https_proxy=" + u,
		"HTTP_PROXY=" + u, "http_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u,
		"NO_PROXY=" + none, "no_proxy=" + none,
	}
}
