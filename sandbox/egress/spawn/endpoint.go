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
var Endpoint = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), policy.EndpointPort)

// ProxyEnv points an agent at Endpoint.
func ProxyEnv() []string { return bridge.ProxyEnv(Endpoint) }

// ListenIn makes the endpoint's listener in the network namespace of pid
// (the jail's first process, held by bwrap's --block-fd until it is up).
// Only a process with CAP_SYS_ADMIN in its own user namespace may enter
// another's network namespace: for root this costs no process at all;
// another user's jail makes the endpoint in its helper (Listen, then
// Send). hostPorts are the host loopback ports the jail reaches (the
// policy's HostPorts): each gets a listener on the jail's 127.0.0.1 and,
// where the jail has IPv6, on its ::1, after the endpoint's.
func ListenIn(pid int, hostPorts ...int) ([]*os.File, error) {
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
	fs, lerr := listenAll(true, hostPorts)
	if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so nothing else runs in the jail's
		// namespace; the launch stops.
		closeAll(fs)
		return nil, fmt.Errorf("the launcher could not return to its network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return fs, lerr
}

// Listen makes the endpoint's listener, and hostPorts' (ListenIn), in
// this process's network namespace (the in-jail helper's).
func Listen(hostPorts ...int) ([]*os.File, error) { return listenAll(false, hostPorts) }

func listenAll(freebind bool, hostPorts []int) ([]*os.File, error) {
	f, err := listen(freebind, Endpoint, "the proxy endpoint")
	if err != nil {
		return nil, err
	}
	fs := []*os.File{f}
	for _, port := range hostPorts {
		what := fmt.Sprintf("host port %d (host_ports)", port)
		f, err := listen(freebind, netip.AddrPortFrom(Endpoint.Addr(), uint16(port)), what)
		if err != nil {
			closeAll(fs)
			return nil, err
		}
		fs = append(fs, f)
		// ::1 too ("localhost" may resolve to it first), where the jail
		// has IPv6 at all.
		if f, err := listen(freebind, netip.AddrPortFrom(netip.IPv6Loopback(), uint16(port)), what); err == nil {
			fs = append(fs, f)
		}
	}
	return fs, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func listen(freebind bool, at netip.AddrPort, what string) (*os.File, error) {
	family, level, opt := unix.AF_INET, unix.IPPROTO_IP, unix.IP_FREEBIND
	var sa unix.Sockaddr
	if at.Addr().Is6() {
		family, level, opt = unix.AF_INET6, unix.IPPROTO_IPV6, unix.IPV6_FREEBIND
		sa = &unix.SockaddrInet6{Port: int(at.Port()), Addr: at.Addr().As16()}
	} else {
		sa = &unix.SockaddrInet4{Port: int(at.Port()), Addr: at.Addr().As4()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if freebind {
		if err := unix.SetsockoptInt(fd, level, opt, 1); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	if family == unix.AF_INET6 {
		unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s %s: %w", what, at, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%s %s: %w", what, at, err)
	}
	return os.NewFile(uintptr(fd), "proxy-endpoint"), nil
}

// Send hands the listeners lns (the endpoint's first) to the launcher
// over the socket on descriptor fd (the helper's --endpoint-fd), in one
// message, and closes them all here.
func Send(fd int, lns []*os.File) error {
	defer unix.Close(fd)
	defer closeAll(lns)
	fds := make([]int, len(lns))
	for i, ln := range lns {
		fds[i] = int(ln.Fd())
	}
	if err := unix.Sendmsg(fd, []byte{'e'}, unix.UnixRights(fds...), nil, 0); err != nil {
		return fmt.Errorf("handing the proxy endpoint to the launcher on descriptor %d: %w", fd, err)
	}
	return nil
}

// maxListeners bounds the listeners one hand-over carries.
const maxListeners = 64

// receive are the listeners the helper sent on c; c is closed.
func receive(c *os.File) ([]*os.File, error) {
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	oob := make([]byte, unix.CmsgSpace(4*maxListeners))
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
	if err != nil || len(fds) == 0 {
		return nil, errors.New("the helper's hand-over held no descriptor")
	}
	out := make([]*os.File, len(fds))
	for i, fd := range fds {
		out[i] = os.NewFile(uintptr(fd), "proxy-endpoint")
	}
	return out, nil
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
// More than one: the endpoint first, then the host ports' listeners
// (ListenIn's order), each handed over alike.
func (p *Proxy) Bridge(lns ...*os.File) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stopping:
		closeAll(lns)
	case p.ctl == nil:
		// Not started yet: the watcher waits for these ones' first
		// connection too. A jail built again brings new endpoints.
		closeAll(p.endpoints)
		p.endpoints = lns
		p.poke()
	default:
		for i, ln := range lns {
			go p.handOver(ln, i > 0)
		}
	}
	return nil
}

// handOver sends ln to the process and waits for its answer; without one,
// the launcher serves ln itself.
func (p *Proxy) handOver(ln *os.File, hostPort bool) {
	p.ctlMu.Lock()
	err := p.send(ln, hostPort)
	p.ctlMu.Unlock()
	if err == nil {
		ln.Close() // the process holds it now
		return
	}
	if err := p.serveBridge(ln, hostPort); err != nil {
		p.fail(fmt.Errorf("the egress proxy cannot serve the agent's endpoint: %w", err))
	}
}

func (p *Proxy) send(ln *os.File, hostPort bool) error {
	kind := byte(policy.EndpointProxy)
	if hostPort {
		kind = policy.EndpointHostPort
	}
	if _, _, err := p.ctl.WriteMsgUnix([]byte{kind}, unix.UnixRights(rawFD(ln)), nil); err != nil {
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
	bs     []*bridge.Bridge
	closed bool
}

// serveBridge carries each connection ln accepts to the proxy's socket.
func (p *Proxy) serveBridge(ln *os.File, hostPort bool) error {
	l, err := net.FileListener(ln)
	ln.Close()
	if err != nil {
		return fmt.Errorf("the proxy endpoint: %w", err)
	}
	var b *bridge.Bridge
	if ap, perr := netip.ParseAddrPort(l.Addr().String()); hostPort && perr == nil {
		// A host port's listener: each connection a tunnel to the host's
		// loopback on that port, which the proxy decides on.
		b, err = bridge.ServeConnect(l, p.Socket, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String())
	} else {
		b, err = bridge.Serve(l, p.Socket)
	}
	if err != nil {
		return err
	}
	p.br.mu.Lock()
	defer p.br.mu.Unlock()
	if p.br.closed {
		b.Close()
		return nil
	}
	p.br.bs = append(p.br.bs, b)
	return nil
}

// BridgeFrom serves the endpoint the in-jail helper hands over on c, once
// it does (in a goroutine: the launch does not wait for it). A helper that
// fails to hand it over says why and does not start the agent.
func (p *Proxy) BridgeFrom(c *os.File) {
	go func() {
		lns, err := receive(c)
		if err == nil {
			err = p.Bridge(lns...)
		}
		_ = err // the helper reports its own failure, and the agent never starts
	}()
}

func (p *Proxy) closeBridge() {
	p.br.mu.Lock()
	p.br.closed = true
	bs := p.br.bs
	p.br.mu.Unlock()
	for _, b := range bs {
		b.Close()
	}
}
