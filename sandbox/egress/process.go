package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// The egress-proxy process (cmd/egress-proxy) serves a session's policy
// for the shadow, which does not link this package's HTTP stack. The
// shadow creates the socket and opens the audit log, so that everything a
// user can get wrong fails before the jail is built; it starts the process
// when the socket's first connection arrives. Its descriptors are the whole
// protocol:
//
//	fd 0  the Policy as one line (policy.Encode), then held open: end of
//	      file (the shadow closed it, or died) stops the proxy
//	fd 1  ReadyLine once the proxy serves, or ErrorPrefix and the reason
//	fd 2  diagnostics
//	fd 3  the listening unix socket, in a mode-0700 directory of the shadow's
//	fd 4  the audit log's rotation lock, fd 5 the audit log (policy.Policy.OpenLog)
const (
	ReadyLine   = policy.ReadyLine
	ErrorPrefix = policy.ErrorPrefix
	ListenerFD  = policy.ListenerFD
	AuditLockFD = policy.AuditLockFD
	AuditLogFD  = policy.AuditLogFD
)

// stopBound is how long the process takes at most to stop once its input
// ends: whatever is still open then dies with it.
const stopBound = time.Second

// ServeProcess is the egress-proxy process's work: it reads the policy from
// in, serves it on the inherited listener ln with the audit log on lock and
// log, says ReadyLine on out, and returns once in ends (cutting every
// connection and closing the audit log). An error before ReadyLine is
// returned for the caller to report on out.
func ServeProcess(session string, in io.Reader, out io.Writer, ln, lock, log *os.File) error {
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
	}{{lock, AuditLockFD}, {log, AuditLogFD}} {
		if f.f == nil {
			return fmt.Errorf("no audit log file on descriptor %d (this program is started by the shadow)", f.fd)
		}
		if _, err := f.f.Stat(); err != nil {
			return fmt.Errorf("descriptor %d is not the audit log: %w (this program is started by the shadow)", f.fd, err)
		}
	}
	l, err := listener(ln)
	if err != nil {
		return err
	}
	px, err := newProxyOn(pol, AuditLogFromFiles(pol.LogPath, session, lock, log))
	if err != nil {
		l.Close()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- px.Serve(l) }()
	if _, err := fmt.Fprintln(out, ReadyLine); err != nil {
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
		return nil
	case err := <-done:
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
