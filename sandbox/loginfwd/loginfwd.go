// Package loginfwd carries a vendor's login callback from the host's
// loopback into the jail. The jail has a network namespace of its own, so
// the OAuth callback server a login starts there (codex login's, on
// 127.0.0.1:1455) is out of reach of the browser on the host, whose
// redirect then gets "connection refused".
//
// The shadow starts the forwarder only for a launch that runs the agent's
// login flow (agent.Profile.LoginFlow), and it ends with the flow: once the
// login state changes. While the jail's namespace has a loopback listener
// on one of the profile's login ports meanwhile (and only then), the
// forwarder listens on the same port on the host's loopback and carries to
// it each connection made by the invoking user, whose owner it reads from
// the host's socket table; another user's, root's included, is closed
// unanswered. Nothing else the jail listens on is ever reachable: the
// ports are the profile's, the host side binds loopback only, and it goes
// away with the jail's listener. docs/adr/0054-login-callback-forwarding.md
// says why it is built this way and what a local user can reach meanwhile.
package loginfwd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/sandbox/egress/bridge"
)

// Options tune the forwarder; the zero value is the shadow's.
type Options struct {
	// Dialer reaches into the jail; nil is DefaultDialer(Helper).
	Dialer Dialer
	// Helper is the program Nsenter runs (the shadow as sandbox-helper).
	Helper string
	// Interval is how often the jail's listeners are read (default
	// 200ms: a login's redirect comes seconds after its server starts).
	Interval time.Duration
	// Warn gets one line when a login port is taken on the host, or a
	// connection cannot be carried; nil discards them.
	Warn io.Writer
	// Agent names the agent in those lines.
	Agent string
	// UID is the invoking user's: only connections whose host socket it
	// owns are carried.
	UID int
	// State is the login state's host path ("": none to watch): the flow
	// is over, and the forwarding ends, once the file is not as it was at
	// Start (made, replaced, written or removed).
	State string
}

// DefaultInterval is Options.Interval's default.
const DefaultInterval = 200 * time.Millisecond

// Start watches the network namespace of pid (the jail's first process,
// bwrap's child-pid) and forwards the login ports while the jail listens
// on them. It returns at once; stop ends the forwarding (closing its
// listeners and the connections it carries) and waits for it. With no
// ports it does nothing at all.
func Start(ctx context.Context, pid int, ports []int, o Options) (stop func()) {
	if len(ports) == 0 || pid <= 0 {
		return func() {}
	}
	if o.Dialer == nil {
		o.Dialer = DefaultDialer(o.Helper)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Warn == nil {
		o.Warn = io.Discard
	}
	if o.Agent == "" {
		o.Agent = "the agent"
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &forwarder{pid: pid, ports: slices.Clone(ports), o: o, ctx: ctx,
		open: map[netip.AddrPort]*hostListener{}, warned: map[netip.AddrPort]bool{}, conns: map[net.Conn]struct{}{},
		refused: map[int]bool{}}
	f.wg.Add(1)
	go f.watch()
	return func() {
		cancel()
		f.wg.Wait()
	}
}

type forwarder struct {
	pid   int
	ports []int
	o     Options
	ctx   context.Context
	wg    sync.WaitGroup
	// state is the login state's stamp when the first callback reached
	// the agent (carried): the login is over once it changes. The agent
	// may rewrite the file before that (a stale one, at its start), which
	// ends nothing.
	state   string
	carried bool

	// open maps each host address the forwarder listens on to its
	// listener; warned, the addresses it could not take (said once).
	open   map[netip.AddrPort]*hostListener
	warned map[netip.AddrPort]bool

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	refused map[int]bool // the owners already warned about
}

// hostListener is one host-side listener and the jail address it carries
// to.
type hostListener struct {
	ln     net.Listener
	target netip.AddrPort
}

func (f *forwarder) watch() {
	defer f.wg.Done()
	t := time.NewTicker(f.o.Interval)
	defer t.Stop()
	for {
		f.mu.Lock()
		done := f.carried && f.o.State != "" && stamp(f.o.State) != f.state
		f.mu.Unlock()
		if done {
			// The login is done: no new connection is taken, and the
			// ones carried (the browser's last page) finish.
			f.closeListeners()
			<-f.ctx.Done()
			f.closeAll()
			return
		}
		ls, err := Listeners(f.pid)
		if err != nil {
			f.closeAll()
			return // the jail is gone
		}
		f.reconcile(ls)
		select {
		case <-f.ctx.Done():
			f.closeAll()
			return
		case <-t.C:
		}
	}
}

// stamp names the state of the file at path: missing, or its identity,
// size and times.
func stamp(path string) string {
	if path == "" {
		return ""
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return "missing"
	}
	return fmt.Sprintf("%d %d %d %d.%d %d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}

// Want maps each host address to listen on to the jail address it carries
// to, for the jail's loopback and wildcard listeners on the login ports.
// The host side is 127.0.0.1 for a jail listener on IPv4, ::1 for one on
// IPv6 loopback, and both for one on the IPv6 wildcard (which takes IPv4
// too); each is carried to the jail's own loopback. A jail listener on an
// IPv4 address wins the host's 127.0.0.1 over an IPv6 wildcard's.
func Want(ls []Listening, ports []int) map[netip.AddrPort]netip.AddrPort {
	want := map[netip.AddrPort]netip.AddrPort{}
	lo4, lo6 := netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()
	for _, v4pass := range []bool{false, true} {
		for _, l := range ls {
			port := l.Addr.Port()
			a := l.Addr.Addr().Unmap()
			if !l.Loopback() || !slices.Contains(ports, int(port)) || a.Is4() != v4pass {
				continue
			}
			switch {
			case a.Is4() && a.IsLoopback():
				want[netip.AddrPortFrom(lo4, port)] = netip.AddrPortFrom(a, port)
			case a.Is4():
				want[netip.AddrPortFrom(lo4, port)] = netip.AddrPortFrom(lo4, port)
			case a.IsUnspecified():
				want[netip.AddrPortFrom(lo4, port)] = netip.AddrPortFrom(lo6, port)
				fallthrough
			default:
				want[netip.AddrPortFrom(lo6, port)] = netip.AddrPortFrom(lo6, port)
			}
		}
	}
	return want
}

// reconcile opens the host listeners the jail's listeners call for and
// closes those whose jail listener went away (the connections already
// carried finish on their own).
func (f *forwarder) reconcile(ls []Listening) {
	want := Want(ls, f.ports)
	for h, hl := range f.open {
		if t, ok := want[h]; !ok || t != hl.target {
			hl.ln.Close()
			delete(f.open, h)
		}
	}
	for h := range f.warned {
		if _, ok := want[h]; !ok {
			delete(f.warned, h) // a later login says it again
		}
	}
	for h, target := range want {
		if _, ok := f.open[h]; ok {
			continue
		}
		ln, err := net.Listen(network(h), h.String())
		if err != nil {
			if !f.warned[h] {
				f.warned[h] = true
				why := err.Error()
				if errors.Is(err, syscall.EADDRINUSE) {
					why = "another program on this host listens there (another login under way?)"
				}
				fmt.Fprintf(f.o.Warn, "\r\ncco: the login callback cannot reach %s in the jail: %s: %s (fix: end the other login and try again, or use the paste-code or device login: docs/how-to/first-login.md)\r\n", f.o.Agent, h, why)
			}
			continue
		}
		hl := &hostListener{ln: ln, target: target}
		f.open[h] = hl
		f.wg.Add(1)
		go f.accept(hl)
	}
}

func network(a netip.AddrPort) string {
	if a.Addr().Is4() {
		return "tcp4"
	}
	return "tcp6"
}

func (f *forwarder) accept(hl *hostListener) {
	defer f.wg.Done()
	for {
		c, err := hl.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: do not spin
			continue
		}
		f.wg.Add(1)
		go f.carry(c, hl.target)
	}
}

// carry connects c to the jail's listener at target and relays both ways,
// when the invoking user made it; any other connection is closed unanswered.
func (f *forwarder) carry(c net.Conn, target netip.AddrPort) {
	defer f.wg.Done()
	if !f.track(c) {
		c.Close()
		return
	}
	defer f.untrack(c)
	if !f.owned(c) {
		return
	}
	ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	j, err := f.o.Dialer.Dial(ctx, f.pid, target)
	cancel()
	if err != nil {
		// Refused: the login server has just gone, as the next reading
		// of the jail's listeners shows; the browser's late request is
		// refused as it would be without the jail.
		if !errors.Is(err, syscall.ECONNREFUSED) && !strings.Contains(err.Error(), "connection refused") {
			fmt.Fprintf(f.o.Warn, "\r\ncco: the login callback cannot reach %s in the jail: %v\r\n", f.o.Agent, err)
		}
		c.Close()
		return
	}
	if !f.track(j) {
		j.Close()
		c.Close()
		return
	}
	f.mu.Lock()
	if !f.carried {
		f.carried, f.state = true, stamp(f.o.State)
	}
	f.mu.Unlock()
	defer f.untrack(j)
	bridge.Relay(c, j)
}

// owned reports whether the invoking user owns the host socket at c's
// other end, and says once per other owner that its connection was closed.
func (f *forwarder) owned(c net.Conn) bool {
	peer, err1 := netip.ParseAddrPort(c.RemoteAddr().String())
	local, err2 := netip.ParseAddrPort(c.LocalAddr().String())
	if err1 != nil || err2 != nil {
		return false
	}
	uid, err := PeerUID(peer, local)
	if err == nil && uid == f.o.UID {
		return true
	}
	who := "a program whose socket the host's table does not show (" + errString(err) + ")"
	if err == nil {
		who = "uid " + strconv.Itoa(uid)
	}
	f.mu.Lock()
	first := !f.refused[uid]
	f.refused[uid] = true
	f.mu.Unlock()
	if first {
		fmt.Fprintf(f.o.Warn, "\r\ncco: refused a connection to the login callback of %s (%s) from %s: only your own browser (uid %d) may complete your login\r\n",
			f.o.Agent, local, who, f.o.UID)
	}
	return false
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// track registers a connection for closeAll; false once the forwarder
// stops.
func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns != nil {
		delete(f.conns, c)
	}
	c.Close()
}

func (f *forwarder) closeListeners() {
	for h, hl := range f.open {
		hl.ln.Close()
		delete(f.open, h)
	}
}

func (f *forwarder) closeAll() {
	f.closeListeners()
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
}
