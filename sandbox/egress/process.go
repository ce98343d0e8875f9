package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// The egress-proxy process (cmd/egress-proxy) serves a session's policy
// for the shadow, which does not link this package's HTTP stack. The
// shadow creates the socket and opens the audit log, so that everything a
// user can get wrong fails before the jail is built; it starts the process
// when the first connection arrives. Its descriptors are the whole
// protocol:
//
//	fd 0  the Policy as one line (policy.Encode), then held open: end of
//	      file (the shadow closed it, or died) stops the proxy
//	fd 1  ReadyLine once the proxy serves, or ErrorPrefix and the reason;
//	      once fd 0 ends, SummaryPrefix and the session's tally
//	fd 2  diagnostics
//	fd 3  the listening unix socket, in a mode-0700 directory of the shadow's
//	fd 4  the audit log's rotation lock, fd 5 the audit log (policy.Policy.OpenLog)
//	fd 6  (optional) a unix socket on which the shadow hands over the
//	      agent's endpoint, a listening TCP socket in the jail's network
//	      namespace: the process serves it itself, so that the agent's
//	      bytes cross one process, not two (docs/adr/0055-egress-one-hop.md)
const (
	ReadyLine     = policy.ReadyLine
	ErrorPrefix   = policy.ErrorPrefix
	SummaryPrefix = policy.SummaryPrefix
	ListenerFD    = policy.ListenerFD
	AuditLockFD   = policy.AuditLockFD
	AuditLogFD    = policy.AuditLogFD
	EndpointsFD   = policy.EndpointsFD
)

// stopBound is how long the process takes at most to stop once its input
// ends: whatever is still open then dies with it.
const stopBound = time.Second

// Files are the descriptors the process is handed besides its standard
// ones.
type Files struct {
	Listener, AuditLock, AuditLog *os.File
	// Endpoints, when not nil, carries the agent's endpoint listeners.
	Endpoints *os.File
}

// Inherited are the Files on the protocol's descriptors. Endpoints is nil
// unless descriptor 6 is a socket: a shadow that serves the endpoint
// itself passes none.
func Inherited() Files {
	f := Files{Listener: os.NewFile(ListenerFD, "listener"), AuditLock: os.NewFile(AuditLockFD, "audit-lock"),
		AuditLog: os.NewFile(AuditLogFD, "audit-log")}
	var st unix.Stat_t
	if unix.Fstat(EndpointsFD, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		f.Endpoints = os.NewFile(EndpointsFD, "endpoints")
	}
	return f
}

// ServeProcess is the egress-proxy process's work: it reads the policy from
// in, serves it on the inherited listener with the audit log it was handed,
// says ReadyLine on out, serves each endpoint handed over on
// files.Endpoints, and returns once in ends (cutting every connection,
// closing the audit log and saying the session's summary on out). An error
// before ReadyLine is returned for the caller to report on out.
func ServeProcess(session string, in io.Reader, out io.Writer, files Files) error {
	br := bufio.NewReader(in)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading the policy from standard input: %w (this program is started by the shadow)", err)
	}
	pol, err := policy.Decode(line)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		f  *os.File
		fd int
	}{{files.AuditLock, AuditLockFD}, {files.AuditLog, AuditLogFD}} {
		if f.f == nil {
			return fmt.Errorf("no audit log file on descriptor %d (this program is started by the shadow)", f.fd)
		}
		if _, err := f.f.Stat(); err != nil {
			return fmt.Errorf("descriptor %d is not the audit log: %w (this program is started by the shadow)", f.fd, err)
		}
	}
	l, err := listener(files.Listener)
	if err != nil {
		return err
	}
	px, err := newProxyOn(pol, AuditLogFromFiles(pol.LogPath, session, files.AuditLock, files.AuditLog))
	if err != nil {
		l.Close()
		return err
	}
	var eps *endpoints
	if files.Endpoints != nil {
		if eps, err = receiveEndpoints(px, files.Endpoints); err != nil {
			l.Close()
			px.Close()
			return err
		}
	}
	done := make(chan error, 1)
	go func() { done <- px.Serve(l) }()
	if _, err := fmt.Fprintln(out, ReadyLine); err != nil {
		eps.close()
		px.Close()
		return fmt.Errorf("telling the shadow the proxy is ready: %w", err)
	}
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, br)
		close(eof)
	}()
	select {
	case <-eof:
		eps.close()
		closed := make(chan struct{})
		go func() {
			px.Close()
			<-done
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(stopBound):
		}
		if s := px.Tally.Summary(); !s.Empty() {
			fmt.Fprintln(out, SummaryPrefix+s.Encode())
		}
		return nil
	case err := <-done:
		eps.close()
		px.Close()
		return err
	}
}

// listener wraps the inherited descriptor, which must be a listening unix
// socket: anything else means the process was not started by the shadow.
func listener(f *os.File) (net.Listener, error) {
	if f == nil {
		return nil, fmt.Errorf("no listening socket on descriptor %d (this program is started by the shadow)", ListenerFD)
	}
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("descriptor %d is not a listening socket: %w (this program is started by the shadow)", ListenerFD, err)
	}
	if _, ok := l.(*net.UnixListener); !ok {
		l.Close()
		return nil, errors.New("descriptor 3 is not a unix socket (this program is started by the shadow)")
	}
	return l, nil
}

// endpoints receives the agent's endpoint listeners and serves each.
type endpoints struct {
	c    *net.UnixConn
	wg   sync.WaitGroup
	once sync.Once
}

func receiveEndpoints(px *Proxy, f *os.File) (*endpoints, error) {
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("descriptor %d is not a socket: %w (this program is started by the shadow)", EndpointsFD, err)
	}
	uc, ok := fc.(*net.UnixConn)
	if !ok {
		fc.Close()
		return nil, fmt.Errorf("descriptor %d is not a unix socket (this program is started by the shadow)", EndpointsFD)
	}
	e := &endpoints{c: uc}
	e.wg.Add(1)
	go e.receive(px)
	return e, nil
}

// receive serves each listener handed over, and answers EndpointServed,
// or anything else for a descriptor that is not a listening TCP socket
// (the shadow then serves it itself).
func (e *endpoints) receive(px *Proxy) {
	defer e.wg.Done()
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	for {
		_, oobn, _, _, err := e.c.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		l, ok := endpointListener(oob[:oobn])
		answer := byte('e')
		if ok {
			answer = policy.EndpointServed
			go serveEndpoint(px, l, buf[0] == policy.EndpointHostPort)
		}
		if _, err := e.c.Write([]byte{answer}); err != nil {
			return
		}
	}
}

// endpointListener is the listening TCP socket in one message's control
// data; any other descriptor is closed.
func endpointListener(oob []byte) (net.Listener, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, false
	}
	var fds []int
	for i := range msgs {
		if got, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, got...)
		}
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, false
	}
	f := os.NewFile(uintptr(fds[0]), "endpoint")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, false
	}
	if _, ok := l.(*net.TCPListener); !ok {
		l.Close()
		return nil, false
	}
	return l, true
}

// close stops receiving; the listeners served are the proxy's to close.
func (e *endpoints) close() {
	if e == nil {
		return
	}
	e.once.Do(func() {
		e.c.Close()
		e.wg.Wait()
	})
}

// serveEndpoint serves one listener of the jail's: the agent's proxy
// endpoint as the proxy, a host port's as the host's loopback on the
// same port (Proxy.ServeHostPort).
func serveEndpoint(px *Proxy, l net.Listener, hostPort bool) {
	ap, err := netip.ParseAddrPort(l.Addr().String())
	if !hostPort || err != nil {
		px.Serve(l)
		return
	}
	px.ServeHostPort(l, ap.Addr().Unmap(), int(ap.Port()))
}
