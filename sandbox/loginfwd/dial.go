package loginfwd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A Dialer connects to an address inside the network namespace of pid.
type Dialer interface {
	Dial(ctx context.Context, pid int, addr netip.AddrPort) (net.Conn, error)
}

// DefaultDialer is the dialer for this process: Setns when it runs as
// root, else Nsenter with the program given (the shadow's helper, which
// serves DialMode).
func DefaultDialer(helper string) Dialer {
	if os.Geteuid() == 0 {
		return Setns{}
	}
	return &Nsenter{Program: helper, Args: []string{DialMode}}
}

// Setns dials from an OS thread of its own that joins the namespace: the
// socket belongs to the namespace it was made in, whatever thread uses it
// later. setns(CLONE_NEWNET) needs CAP_SYS_ADMIN in this process's own user
// namespace as well as over the target's, so only root can use it.
type Setns struct{}

func (Setns) Dial(ctx context.Context, pid int, addr netip.AddrPort) (net.Conn, error) {
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("the jail's network namespace: %w", err)
	}
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer ns.Close()
		runtime.LockOSThread()
		// This thread goes back to its own namespace afterwards, and only
		// then is unlocked. A thread that ended locked instead would be
		// the end of bwrap, should it be the thread that started it:
		// --die-with-parent is the death of the parent thread.
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("this thread's network namespace: %w", err)}
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("joining the jail's network namespace: %w", err)}
			return
		}
		// The socket is made on this thread, so in the jail's namespace,
		// and stays there whichever thread uses it later.
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr.String())
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else the thread stays locked, and ends with this goroutine
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// NsenterPath is util-linux's nsenter.
var NsenterPath = "/usr/bin/nsenter"

// Nsenter dials through a short-lived process that nsenter starts in the
// jail's user and network namespaces: an unprivileged user owns the jail's
// user namespace and so may join it, and then its network namespace, but
// only from a single-threaded process, which a Go program never is. The
// process, Program with Args and the address, connects inside and hands the
// connected socket back over descriptor 3 (SCM_RIGHTS); DialMain is its
// side.
type Nsenter struct {
	Program string
	Args    []string
}

func (n *Nsenter) Dial(ctx context.Context, pid int, addr netip.AddrPort) (net.Conn, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("a socket pair for the jail's dialer: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "dialer"), os.NewFile(uintptr(pair[1]), "dialer-child")
	defer mine.Close()
	// The user namespace to join is the one that owns the jail's network
	// namespace, not the jailed process's own: bwrap's --disable-userns
	// puts the agent in a nested one, from which setns into the network
	// namespace is refused.
	netns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("the jail's network namespace: %w", err)
	}
	defer netns.Close()
	ufd, err := unix.IoctlRetInt(int(netns.Fd()), unix.NS_GET_USERNS)
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("the owner of the jail's network namespace: %w", err)
	}
	userns := os.NewFile(uintptr(ufd), "userns")
	defer userns.Close()
	// nsenter joins the user namespace first, then the network one; fds 4
	// and 5 are ExtraFiles[1] and [2].
	args := append([]string{"--user=/proc/self/fd/4", "--net=/proc/self/fd/5", "--preserve-credentials", "--", n.Program}, n.Args...)
	cmd := exec.CommandContext(ctx, NsenterPath, append(args, addr.String())...)
	cmd.ExtraFiles = []*os.File{theirs, userns, netns}
	cmd.Env = []string{}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		theirs.Close()
		return nil, fmt.Errorf("starting %s: %w", NsenterPath, err)
	}
	theirs.Close()
	c, rerr := receiveConn(mine)
	werr := cmd.Wait()
	if rerr != nil {
		if msg := stderr.String(); msg != "" {
			return nil, fmt.Errorf("%w (%s)", rerr, msg)
		}
		if werr != nil {
			return nil, fmt.Errorf("%w (%s: %v)", rerr, NsenterPath, werr)
		}
		return nil, rerr
	}
	return c, nil
}

// receiveConn reads the dialer's answer: one message with the connected
// socket attached, or the error text without one.
func receiveConn(f *os.File) (net.Conn, error) {
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(int(f.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("the jail's dialer: %w", err)
	}
	if oobn == 0 {
		if n == 0 {
			return nil, errors.New("the jail's dialer ended without an answer")
		}
		return nil, errors.New(string(buf[:n]))
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("the jail's dialer sent a bad control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("the jail's dialer sent %d descriptors: %v", len(fds), err)
	}
	sf := os.NewFile(uintptr(fds[0]), "jail-conn")
	defer sf.Close()
	return net.FileConn(sf)
}

// DialMode is the helper's mode that DialMain serves.
const DialMode = "login-dial"

// DialMain is the dialer process's side of Nsenter: args are the address
// (one, as netip.AddrPort prints it); descriptor 3 is the socket back to the
// shadow. It connects and sends the connected socket, or the error's text,
// and returns the exit status.
func DialMain(args []string) int {
	say := func(msg string) int {
		unix.Sendmsg(3, []byte(msg), nil, nil, 0)
		return 1
	}
	if len(args) != 1 {
		return say("usage: " + DialMode + " <address:port>")
	}
	addr, err := netip.ParseAddrPort(args[0])
	if err != nil || !addr.Addr().Unmap().IsLoopback() {
		// Only ever loopback: this process runs in the jail's network
		// namespace, where nothing else is the shadow's business.
		return say(fmt.Sprintf("%s: %q is not a loopback address and port", DialMode, args[0]))
	}
	c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
	if err != nil {
		return say(err.Error())
	}
	f, err := c.(*net.TCPConn).File()
	c.Close()
	if err != nil {
		return say(err.Error())
	}
	if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		return 1
	}
	return 0
}

// limitedBuffer keeps the first KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 1024 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string { return strings.TrimSpace(string(l.b)) }
