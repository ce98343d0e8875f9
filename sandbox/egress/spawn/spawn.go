// Package spawn is the egress proxy's lifecycle on the host: the audit log
// and the listening socket made before the jail (what a user can get wrong
// fails the launch, not the session), the egress-proxy process started on
// the first connection, its verdict, its summary of the session, and its
// end. It also hands the proxy the agent's endpoint, a listener in the
// jail's own network namespace, so that no process of the launcher's stays
// in the jail and the agent's bytes cross one process on their way out.
package spawn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/sandbox/egress/policy"
	"github.com/cco-dev/cco/sandbox/egress/tally"
	"github.com/cco-dev/cco/sandbox/supervise"
)

const (
	// proxyStartTimeout bounds the wait for a started proxy's first word.
	proxyStartTimeout = 15 * time.Second
	// proxyStopGrace is how long a stopping proxy may take before it is
	// killed (it bounds itself to a second).
	proxyStopGrace = 3 * time.Second
)

// proxy is a session's egress proxy. The shadow opens the audit log and
// creates the listening socket before the jail is built, so that whatever
// can be wrong with them stops the launch; the egress-proxy process that
// serves them starts when the first connection arrives (until then it
// waits in the socket's backlog), so that a session that never uses the
// network never pays for an HTTP stack's start-up, and the agent's own
// start-up does not compete with it.
type Proxy struct {
	// Socket is the listening socket's path, in a directory only this
	// user can enter: the jail binds it at sandbox.EgressSocket.
	Socket string
	// Runtime, when not "", is a directory made for this session alone,
	// removed with it (and by a later launch, should this one be killed).
	Runtime string

	prog, session string
	pol           policy.Policy
	read          func(string) ([]byte, error)

	failed  chan error    // why the proxy cannot serve (at most one value): Failed
	decided chan struct{} // closed once a started process served, or failed to
	done    chan struct{} // closed when a started process is reaped

	lines <-chan string // a process started by startNow: what it says

	mu       sync.Mutex
	ln       *os.File // the listening socket
	lnFD     int      // its descriptor, which the watcher polls
	lock     *os.File // the audit log's rotation lock and the log:
	log      *os.File // descriptors 3, 4 and 5 of the process
	stopping bool
	watching bool     // watch was called
	starting bool     // the first connection came: the process is (being) started
	pid      int      // the process, once started
	in       *os.File // its standard input: closing it stops the proxy
	err      error    // the first failure
	summary  string   // its summary line, once it said one
	// endpoint is the agent's endpoint, until the process is started and
	// takes it; wake (an eventfd, -1 once closed) tells the watcher it
	// came, or that the session ends.
	endpoints []*os.File
	wake      int
	// ctl hands the process the endpoint (descriptor 6 of the process).
	ctl   *net.UnixConn
	ctlMu sync.Mutex

	br bridged // the endpoint, should the process not take it
}

// Start checks the proxy program prog, opens the audit log and creates
// the listening socket. Everything the user can get wrong fails here,
// before the jail is built. read reads the launcher's own small files
// without following a link (saferead.ReadCapped).
func Start(prog string, pol policy.Policy, session string, read func(string) ([]byte, error)) (*Proxy, error) {
	fi, err := os.Stat(prog)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("the egress proxy %s is missing or not executable (fix: sudo cco-install)", prog)
	}
	lock, log, err := pol.OpenLog()
	if err != nil {
		return nil, fmt.Errorf("the egress proxy cannot start: %w", err)
	}
	dir, fresh, err := socketDir()
	if err != nil {
		lock.Close()
		log.Close()
		return nil, fmt.Errorf("the egress proxy cannot start: its runtime directory: %w", err)
	}
	p := &Proxy{Socket: filepath.Join(dir, strconv.Itoa(os.Getpid())+"-"+session+".sock"), prog: prog, session: session,
		pol: pol, read: read, lock: lock, log: log, failed: make(chan error, 1), decided: make(chan struct{}), done: make(chan struct{}),
		wake: -1}
	if fresh {
		p.Runtime = dir
	}
	fail := func(err error) (*Proxy, error) {
		lock.Close()
		log.Close()
		p.removeSocket()
		return nil, err
	}
	if p.ln, p.lnFD, err = listenUnix(p.Socket); err != nil {
		return fail(err)
	}
	// A program this user's launches have not yet heard serve (new, or
	// changed by an upgrade) is started now and must say ready before the
	// jail is built: a broken one then stops this launch, not a session.
	stamp := programStamp(fi)
	if fresh || !p.heard(dir, stamp) {
		if err := p.startNow(); err != nil {
			return fail(err)
		}
		if !fresh {
			p.noteHeard(dir, stamp)
		}
	}
	return p, nil
}

// heardName records, in the user's socket directory, the proxy programs
// that said ready there, one stamp a line, the newest last: a few, since
// programs of several system roots (an upgrade's old and new, test roots)
// may serve one user side by side.
const heardName = "egress-proxy.heard"

// heardKept is how many stamps the note keeps.
const heardKept = 8

// programStamp names one version of the program file.
func programStamp(fi fs.FileInfo) string {
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st == nil {
		return ""
	}
	return fmt.Sprintf("%d %d %d %d.%d %d.%d\n", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}

func (p *Proxy) heard(dir, stamp string) bool {
	if stamp == "" {
		return false
	}
	b, err := p.read(filepath.Join(dir, heardName))
	return err == nil && slices.Contains(strings.SplitAfter(string(b), "\n"), stamp)
}

// noteHeard adds stamp to the note, dropping the oldest past heardKept.
func (p *Proxy) noteHeard(dir, stamp string) {
	path := filepath.Join(dir, heardName)
	b, _ := p.read(path)
	var lines []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l != "" && l != stamp && strings.HasSuffix(l, "\n") {
			lines = append(lines, l)
		}
	}
	lines = append(lines, stamp)
	if len(lines) > heardKept {
		lines = lines[len(lines)-heardKept:]
	}
	f, err := os.CreateTemp(dir, heardName+".*")
	if err != nil {
		return
	}
	_, err = f.WriteString(strings.Join(lines, ""))
	if cerr := f.Close(); err == nil && cerr == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
}

// startNow starts the process before the jail and waits for its first
// word; watch then only follows it.
func (p *Proxy) startNow() error {
	p.starting = true
	lines, err := p.start()
	if err == nil {
		if err = firstWord(lines); err != nil {
			p.in.Close()
			syscall.Kill(p.pid, syscall.SIGKILL)
			for range lines {
			}
			supervise.Reap(p.pid)
		}
	}
	if err != nil {
		return err
	}
	close(p.decided)
	p.lines = lines
	return nil
}

// socketDir is where the proxy's socket goes: cco-<uid> in TMPDIR, private
// to this user, made once and shared by the user's launches (those of dead
// launches are removed here, so that a killed shadow leaves nothing for
// long). Should that name be anything else, the launch gets a fresh
// private directory of its own.
func socketDir() (dir string, fresh bool, err error) {
	dir = filepath.Join(os.TempDir(), "cco-"+strconv.Itoa(os.Geteuid()))
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.Mkdir(dir, 0o700); err == nil || errors.Is(err, fs.ErrExist) {
			fi, err = os.Lstat(dir)
		}
	}
	if err == nil && private(fi) {
		sweep(dir)
		return dir, false, nil
	}
	dir, err = os.MkdirTemp("", "cco-egress-")
	return dir, true, err
}

// private reports whether fi is a real directory of this user's that no
// one else may enter.
func private(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.IsDir() && fi.Mode().Perm() == 0o700 && int(st.Uid) == os.Geteuid()
}

// sweep removes the sockets of launches that are gone (<pid>-<session>.sock).
func sweep(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range ents {
		pidPart, _, ok := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(pidPart)
		if !ok || err != nil || pid <= 0 || pid == self || !strings.HasSuffix(e.Name(), ".sock") {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func (p *Proxy) removeSocket() {
	if p.Runtime != "" {
		os.RemoveAll(p.Runtime)
	} else {
		os.Remove(p.Socket)
	}
}

// Watch starts, in a goroutine, the process on the first connection to the
// socket or to the agent's endpoint, and reports a process that cannot
// serve, or that ends before the session does. The launcher calls it once
// bwrap runs.
func (p *Proxy) Watch() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watching {
		return // a jail built again watches the same proxy
	}
	p.watching = true
	if p.lines == nil {
		wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			go p.fail(fmt.Errorf("the egress proxy cannot start: watching its socket: %w", err))
			return
		}
		p.wake = wake
	}
	go p.run()
}

func (p *Proxy) run() {
	if p.lines != nil {
		p.follow(p.lines) // started and checked already (checkFirst)
		return
	}
	err := p.awaitConnection()
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		return // the session ended without a connection
	}
	p.starting = true
	if err != nil {
		p.mu.Unlock()
		p.fail(fmt.Errorf("the egress proxy cannot start: watching its socket: %w", err))
		close(p.decided)
		return
	}
	lines, err := p.start()
	p.mu.Unlock()
	if err != nil {
		p.fail(err)
		close(p.decided)
		return
	}
	if err := firstWord(lines); err != nil {
		p.fail(err)
	}
	close(p.decided)
	p.follow(lines)
}

// awaitConnection returns once a connection waits on the socket or on the
// endpoint (the endpoint may come later: wake says so), or the session
// ends; it closes wake.
func (p *Proxy) awaitConnection() error {
	defer func() {
		p.mu.Lock()
		unix.Close(p.wake)
		p.wake = -1
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		if p.stopping {
			p.mu.Unlock()
			return nil
		}
		fds := []unix.PollFd{{Fd: int32(p.wake), Events: unix.POLLIN}, {Fd: int32(p.lnFD), Events: unix.POLLIN}}
		for _, ep := range p.endpoints {
			fds = append(fds, unix.PollFd{Fd: int32(rawFD(ep)), Events: unix.POLLIN})
		}
		p.mu.Unlock()
		// A blocking poll holds one thread for the wait, and none of the
		// runtime's poller's state: the descriptors are handed on as they
		// are once the process starts.
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if fds[0].Revents != 0 {
			var b [8]byte
			unix.Read(p.wake, b[:])
			continue
		}
		return nil
	}
}

// poke wakes the watcher; the caller holds p.mu.
func (p *Proxy) poke() {
	if p.wake >= 0 {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1) // an eventfd's counter
		unix.Write(p.wake, one[:])
	}
}

// firstWord waits for a started process's first line: nil for ready.
func firstWord(lines <-chan string) error {
	select {
	case l, ok := <-lines:
		switch {
		case ok && l == policy.ReadyLine:
			return nil
		case ok && strings.HasPrefix(l, policy.ErrorPrefix):
			return errors.New("the egress proxy cannot start: " + strings.TrimPrefix(l, policy.ErrorPrefix))
		case ok:
			return fmt.Errorf("the egress proxy cannot start: it said %q instead of %q", l, policy.ReadyLine)
		}
		return errors.New("the egress proxy cannot start: it exited before serving; its message, if any, is above")
	case <-time.After(proxyStartTimeout):
		return fmt.Errorf("the egress proxy cannot start: it did not answer within %v", proxyStartTimeout)
	}
}

// follow reads what a serving process says until it ends (any word is a
// failure; its end is one unless the session is ending) and reaps it.
func (p *Proxy) follow(lines <-chan string) {
	defer close(p.done)
	for l := range lines {
		if strings.HasPrefix(l, policy.ErrorPrefix) {
			p.fail(errors.New("the egress proxy failed: " + strings.TrimPrefix(l, policy.ErrorPrefix)))
		}
		if s, ok := strings.CutPrefix(l, policy.SummaryPrefix); ok {
			p.mu.Lock()
			p.summary = s
			p.mu.Unlock()
		}
	}
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if !stopping {
		p.fail(errors.New("the egress proxy exited during the session"))
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
	supervise.Reap(p.pid)
}

// start runs the process on the socket and the audit log and hands it the
// policy; it returns the lines of the process's standard output. The caller
// holds p.mu, or is the only goroutine.
func (p *Proxy) start() (<-chan string, error) {
	defer func() {
		// The process has its own copies: once it is gone, connections
		// are refused, never carried.
		p.ln.Close()
		p.lock.Close()
		p.log.Close()
	}()
	// Encoded here, off the launch's path.
	line, err := p.pol.Encode()
	if err != nil {
		return nil, fmt.Errorf("the egress proxy cannot start: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("the egress proxy cannot start: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("the egress proxy cannot start: %w", err)
	}
	ctl, theirs, err := socketPair()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("the egress proxy cannot start: %w", err)
	}
	pid, err := syscall.ForkExec(p.prog, []string{p.prog, p.session}, &syscall.ProcAttr{Env: os.Environ(),
		Files: []uintptr{inR.Fd(), outW.Fd(), os.Stderr.Fd(), uintptr(p.lnFD), p.lock.Fd(), p.log.Fd(), theirs.Fd()}})
	inR.Close()
	outW.Close()
	theirs.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		ctl.Close()
		return nil, fmt.Errorf("the egress proxy cannot start: %s: %w", p.prog, err)
	}
	p.pid, p.in, p.ctl = pid, inW, ctl
	for i, ep := range p.endpoints {
		go p.handOver(ep, i > 0)
	}
	p.endpoints = nil
	// The policy may be larger than a pipe holds: written while the
	// process reads it.
	go inW.Write(line)
	lines := make(chan string)
	go func() {
		defer close(lines)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, nil
}

// Failed says, once, why the proxy cannot serve: the session then ends.
func (p *Proxy) Failed() <-chan error { return p.failed }

func (p *Proxy) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	select {
	case p.failed <- err:
	default:
	}
}

// Verdict is why the proxy could not serve, or nil. Once the first
// connection came, it waits for the process's first word (at once, unless
// the session was shorter than the proxy's start).
func (p *Proxy) Verdict() error {
	p.mu.Lock()
	starting := p.starting
	p.mu.Unlock()
	if starting {
		<-p.decided
	}
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	if pid != 0 && supervise.Exited(pid) {
		// It ended before the session did (the launcher asks before it
		// stops it): that end is the verdict, once follow has read the
		// rest of its output, however soon the agent ended after it.
		select {
		case <-p.done:
		case <-time.After(time.Second):
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Stop ends the proxy (the end of its input; a kill after proxyStopGrace)
// and removes its socket. A proxy never started costs nothing to stop.
// The launcher calls it once, at the end of the session, before it exits.
func (p *Proxy) Stop() {
	p.closeBridge()
	p.mu.Lock()
	p.stopping = true
	pid, in, watching := p.pid, p.in, p.watching
	p.poke() // a watcher still waiting for a first connection returns
	closeAll(p.endpoints)
	p.endpoints = nil
	p.mu.Unlock()
	if pid != 0 {
		in.Close()
		if !watching {
			// Started before the jail, which then was not built.
			go p.follow(p.lines)
		}
		select {
		case <-p.done:
		case <-time.After(proxyStopGrace):
			syscall.Kill(pid, syscall.SIGKILL)
			<-p.done
		}
		p.ctl.Close()
	}
	p.removeSocket()
}

// listenUnix creates a listening unix socket at path, mode 0600 in a
// directory only this user can enter, with plain system calls (the shadow
// only watches the descriptor and hands it on).
func listenUnix(path string) (*os.File, int, error) {
	// sun_path holds 108 bytes with the terminating NUL.
	if len(path) > 107 {
		return nil, -1, fmt.Errorf("the egress proxy cannot start: its socket path %s is %d bytes, more than a unix socket allows (107): use a shorter runtime directory (TMPDIR)", path, len(path))
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, -1, fmt.Errorf("the egress proxy cannot start: its socket: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		syscall.Close(fd)
		return nil, -1, fmt.Errorf("the egress proxy cannot start: its socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		syscall.Close(fd)
		return nil, -1, fmt.Errorf("the egress proxy cannot start: its socket: %w", err)
	}
	if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
		syscall.Close(fd)
		return nil, -1, fmt.Errorf("the egress proxy cannot start: its socket %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), fd, nil
}

// socketPair is the shadow's end of the endpoints socket and the
// process's (its descriptor 6).
func socketPair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("a socket pair for the endpoint: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "endpoints")
	defer mine.Close()
	c, err := net.FileConn(mine)
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("a socket pair for the endpoint: %w", err)
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "endpoints-proxy"), nil
}

// Summary is the line to print once the session ended: what the proxy
// allowed and refused (tally.Summary.Line), or "" when it served nothing
// (or never started). Call it after Stop.
func (p *Proxy) Summary() string {
	p.mu.Lock()
	line := p.summary
	p.mu.Unlock()
	if line == "" {
		return ""
	}
	s, err := tally.Decode(line)
	if err != nil {
		return "cco: egress this session: " + err.Error()
	}
	if s.Empty() {
		return ""
	}
	return s.Line(p.pol.LogPath)
}
