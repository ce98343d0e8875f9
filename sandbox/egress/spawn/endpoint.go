package spawn

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/sandbox/egress/bridge"
	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// Endpoint is where the agent's proxy variables point, inside the jail's
// own network namespace: nothing else listens there, so the address is
// fixed and the variables are known before the jail is built. The port is
// below the ephemeral range, so no connection of the agent's own is given
// it first.
var Endpoint = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), 3128)

// ProxyEnv points an agent at Endpoint.
func ProxyEnv() []string { return bridge.ProxyEnv(Endpoint) }

// ListenIn makes the endpoint's listener in the network namespace of pid
// (the jail's first process, held by bwrap's --block-fd until it is up).
// Only a process with CAP_SYS_ADMIN in its own user namespace may enter
// another's network namespace: for root this costs no process at all;
// another user's jail makes the endpoint in its helper (Listen, then
// Send).
func ListenIn(pid int) (*os.File, error) {
	ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the jail's network namespace: %w", err)
	}
	defer unix.Close(ns)
	runtime.LockOSThread()
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("the launcher's network namespace: %w", err)
	}
	defer unix.Close(home)
	if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("entering the jail's network namespace: %w", err)
	}
	// bwrap brings the loopback up in the jail while this runs: the
	// address may not be there yet, hence IP_FREEBIND.
	f, lerr := listen(true)
	if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so nothing else runs in the jail's
		// namespace; the launch stops.
		if f != nil {
			f.Close()
		}
		return nil, fmt.Errorf("the launcher could not return to its network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return f, lerr
}

// Listen makes the endpoint's listener in this process's network
// namespace (the in-jail helper's).
func Listen() (*os.File, error) { return listen(false) }

func listen(freebind bool) (*os.File, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the proxy endpoint: %w", err)
	}
	if freebind {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_FREEBIND, 1); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("the proxy endpoint: %w", err)
		}
	}
	a := Endpoint.Addr().As4()
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(Endpoint.Port()), Addr: a}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("the proxy endpoint %s: %w", Endpoint, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("the proxy endpoint %s: %w", Endpoint, err)
	}
	return os.NewFile(uintptr(fd), "proxy-endpoint"), nil
}

// Send hands the endpoint's listener ln to the launcher over the socket on
// descriptor fd (the helper's --endpoint-fd), and closes both here.
func Send(fd int, ln *os.File) error {
	defer unix.Close(fd)
	defer ln.Close()
	if err := unix.Sendmsg(fd, []byte{'e'}, unix.UnixRights(int(ln.Fd())), nil, 0); err != nil {
		return fmt.Errorf("handing the proxy endpoint to the launcher on descriptor %d: %w", fd, err)
	}
	return nil
}

// receive is the listener the helper sent on c; c is closed.
func receive(c *os.File) (*os.File, error) {
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), b[:], oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("the helper ended without handing over the proxy endpoint")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("the helper's hand-over held no descriptor")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, errors.New("the helper's hand-over held no descriptor")
	}
	return os.NewFile(uintptr(fds[0]), "proxy-endpoint"), nil
}

// handOverTimeout bounds the wait for the process to take the endpoint;
// past it (a program of an older release, which never answers), the
// launcher serves the endpoint itself.
var handOverTimeout = 5 * time.Second

// Bridge serves the agent's endpoint ln: the process takes it and serves
// it itself (once started: until then the watcher starts the process on
// its first connection). Should the process not take it, the launcher
// carries each connection to the proxy's socket instead. ln is the
// launcher's until then.
func (p *Proxy) Bridge(ln *os.File) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopping:
		ln.Close()
	case p.ctl == nil:
		// Not started yet: the watcher waits for this one's first
		// connection too. A jail built again brings a new endpoint.
		if p.endpoint != nil {
			p.endpoint.Close()
		}
		p.endpoint = ln
		p.poke()
	default:
		go p.handOver(ln)
	}
	return nil
}

// handOver sends ln to the process and waits for its answer; without one,
// the launcher serves ln itself.
func (p *Proxy) handOver(ln *os.File) {
	p.ctlMu.Lock()
	err := p.send(ln)
	p.ctlMu.Unlock()
	if err == nil {
		ln.Close() // the process holds it now
		return
	}
	if err := p.serveBridge(ln); err != nil {
		p.fail(fmt.Errorf("the egress proxy cannot serve the agent's endpoint: %w", err))
	}
}

func (p *Proxy) send(ln *os.File) error {
	if _, _, err := p.ctl.WriteMsgUnix([]byte{'e'}, unix.UnixRights(rawFD(ln)), nil); err != nil {
		return err
	}
	p.ctl.SetReadDeadline(time.Now().Add(handOverTimeout))
	var b [1]byte
	if _, err := p.ctl.Read(b[:]); err != nil {
		return err
	}
	if b[0] != policy.EndpointServed {
		return fmt.Errorf("the egress proxy did not take the endpoint (%q)", b[0])
	}
	return nil
}

// rawFD is f's descriptor, left in the mode it is in (os.File.Fd would
// make it blocking).
func rawFD(f *os.File) int {
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(d uintptr) { fd = int(d) })
	}
	return fd
}

// bridged is the endpoint served by the launcher, should the process not
// take it: connections carried to the proxy's socket, cut when the proxy
// stops.
type bridged struct {
	mu     sync.Mutex
	b      *bridge.Bridge
	closed bool
}

// serveBridge carries each connection ln accepts to the proxy's socket.
func (p *Proxy) serveBridge(ln *os.File) error {
	l, err := net.FileListener(ln)
	ln.Close()
	if err != nil {
		return fmt.Errorf("the proxy endpoint: %w", err)
	}
	b, err := bridge.Serve(l, p.Socket)
	if err != nil {
		return err
	}
	p.br.mu.Lock()
	defer p.br.mu.Unlock()
	if p.br.closed {
		b.Close()
		return nil
	}
	p.br.b = b
	return nil
}

// BridgeFrom serves the endpoint the in-jail helper hands over on c, once
// it does (in a goroutine: the launch does not wait for it). A helper that
// fails to hand it over says why and does not start the agent.
func (p *Proxy) BridgeFrom(c *os.File) {
	go func() {
		ln, err := receive(c)
		if err == nil {
			err = p.Bridge(ln)
		}
		_ = err // the helper reports its own failure, and the agent never starts
	}()
}

func (p *Proxy) closeBridge() {
	p.br.mu.Lock()
	p.br.closed = true
	b := p.br.b
	p.br.mu.Unlock()
	if b != nil {
		b.Close()
	}
}
