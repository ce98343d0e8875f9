package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/cco-dev/cco/sandbox/egress/tally"
)

// Resolver resolves a name to addresses; *net.Resolver fits through
// NetResolver, tests inject a table.
type Resolver interface {
	LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error)
}

// Dialer opens the upstream connection; *net.Dialer fits.
type Dialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// NetResolver adapts a *net.Resolver (nil: net.DefaultResolver).
type NetResolver struct{ R *net.Resolver }

// LookupNetIP resolves host to IPv4 and IPv6 addresses.
func (r NetResolver) LookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	res := r.R
	if res == nil {
		res = net.DefaultResolver
	}
	return res.LookupNetIP(ctx, "ip", host)
}

// InterfaceAddrs lists the host's own interface addresses (the default
// Proxy.LocalAddrs).
func InterfaceAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing the host's interface addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap().WithZone(""))
		}
	}
	return out, nil
}

// ReasonHeader carries the reason on every refusal (403) and upstream
// failure (502) the proxy answers with.
const ReasonHeader = "X-Cco-Egress-Reason"

// Timeouts.
const (
	headerTimeout  = 60 * time.Second // reading a request head, including keep-alive idle
	resolveTimeout = 10 * time.Second
	dialTimeout    = 30 * time.Second
)

// Proxy is the policy proxy: HTTP CONNECT and absolute-form HTTP. The zero
// value of each seam is the real thing (system resolver, net.Dialer,
// InterfaceAddrs, no audit, no log).
type Proxy struct {
	Policy     Policy
	Resolver   Resolver
	Dialer     Dialer
	Audit      *AuditLog
	Log        io.Writer                    // one line per refusal or upstream failure
	LocalAddrs func() ([]netip.Addr, error) // the host's own addresses: refused
	// Tally counts the session's destinations for its summary.
	Tally tally.Tally

	ownsAudit bool // NewProxy opened Audit: Close closes it

	mu       sync.Mutex
	refusals int // refusals and failures so far
	// unloggedSaid: the record of those past MaxRefusalRecords is written.
	unloggedSaid bool
	logMu        sync.Mutex
	ctx          context.Context
	cancel       context.CancelFunc
	lns          map[net.Listener]struct{}
	conns        map[net.Conn]struct{}
	closed       bool
	handles      sync.WaitGroup
}

// NewProxy is the proxy a launch runs: the real resolver, dialer and host
// addresses, and the audit log at pol.LogPath for this session, which the
// Host closes when it stops. log gets one line per refusal (nil: none).
func NewProxy(pol Policy, session string, log io.Writer) (*Proxy, error) {
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	if pol.LogPath == "" {
		return nil, errors.New("egress_log: no audit log path (ParsePolicy sets the default)")
	}
	a, err := OpenAuditLog(pol.LogPath, session)
	if err != nil {
		return nil, err
	}
	return &Proxy{Policy: pol, Audit: a, Log: log, ownsAudit: true}, nil
}

// newProxyOn is NewProxy with an audit log already open; the Proxy owns it.
func newProxyOn(pol Policy, a *AuditLog) (*Proxy, error) {
	if err := pol.Validate(); err != nil {
		a.Close()
		return nil, err
	}
	return &Proxy{Policy: pol, Audit: a, ownsAudit: true}, nil
}

// ErrClosed is what Serve returns once Close was called.
var ErrClosed = errors.New("egress proxy closed")

// Serve accepts connections on l until l fails or Close is called. It
// refuses to start on a policy that is off or invalid.
func (p *Proxy) Serve(l net.Listener) error { return p.serve(l, p.serveConn) }

// ServeHostPort carries each connection l accepts (a listener on the
// jail's loopback at port) to the host's loopback on the same port, as
// a tunnel the policy decides on and the audit log records: port must be
// one of the policy's HostPorts (docs/adr/0131-host-loopback-ports.md).
// host is the loopback address the listener is on.
func (p *Proxy) ServeHostPort(l net.Listener, host netip.Addr, port int) error {
	target := netip.AddrPortFrom(host, uint16(port)).String()
	return p.serve(l, func(c net.Conn) {
		start := time.Now()
		e := Entry{Method: HostPortMethod, Target: target}
		v := p.decide(target, true)
		if v.reason != "" {
			// Not one of host_ports: the connection is cut, and recorded.
			e.Reason = v.reason
			p.audit(e, start)
			return
		}
		p.tunnel(c, nil, e, v, start)
	})
}

// HostPortMethod is the audit log's method of a connection to a host
// loopback port (host_ports): a byte stream, no HTTP request.
const HostPortMethod = "TCP"

func (p *Proxy) serve(l net.Listener, handle func(net.Conn)) error {
	if err := p.Policy.Validate(); err != nil {
		return err
	}
	if !p.track(l) {
		l.Close()
		return ErrClosed
	}
	defer p.untrack(l)
	for {
		c, err := l.Accept()
		if err != nil {
			if p.isClosed() {
				return ErrClosed
			}
			// Out of descriptors, or a client gone before accept: wait and go
			// on rather than leave the jail without a proxy.
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) ||
				errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("egress proxy: accepting on %s: %w", l.Addr(), err)
		}
		if !p.trackConn(c) {
			c.Close()
			return ErrClosed
		}
		go func() {
			defer p.handles.Done()
			defer p.untrackConn(c)
			handle(c)
		}()
	}
}

// Close stops every Serve, cuts every open connection and waits for their
// handlers to finish.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.init()
	p.closed = true
	p.cancel()
	for l := range p.lns {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.handles.Wait()
	p.recordUnlogged()
	if p.ownsAudit && p.Audit != nil {
		return p.Audit.Close()
	}
	return nil
}

func (p *Proxy) init() {
	if p.ctx == nil {
		p.ctx, p.cancel = context.WithCancel(context.Background())
		p.lns = map[net.Listener]struct{}{}
		p.conns = map[net.Conn]struct{}{}
	}
}

func (p *Proxy) track(l net.Listener) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	if p.closed {
		return false
	}
	p.lns[l] = struct{}{}
	return true
}

func (p *Proxy) untrack(l net.Listener) {
	p.mu.Lock()
	delete(p.lns, l)
	p.mu.Unlock()
}

func (p *Proxy) trackConn(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	p.handles.Add(1)
	return true
}

func (p *Proxy) untrackConn(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// maxHead bounds a request head, so that a jailed client cannot make the
// host-side proxy buffer without end.
const maxHead = 1 << 20

// readers are the request heads' buffers, kept between connections: a
// fresh one per connection is 32 KiB to clear.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

func (p *Proxy) serveConn(c net.Conn) {
	lim := &headLimit{r: c}
	br := readers.Get().(*bufio.Reader)
	br.Reset(lim)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	for {
		c.SetReadDeadline(time.Now().Add(headerTimeout))
		lim.n = maxHead
		req, err := http.ReadRequest(br)
		if err != nil {
			if errors.Is(err, errHeadTooBig) {
				p.reply(c, http.StatusRequestHeaderFieldsTooLarge, "request head larger than 1 MiB")
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
				p.reply(c, http.StatusBadRequest, "malformed request: "+err.Error())
			}
			return
		}
		lim.n = -1
		c.SetReadDeadline(time.Time{})
		if req.Method == http.MethodConnect {
			p.connect(c, br, req)
			return
		}
		if !p.forward(c, req) {
			return
		}
	}
}

var errHeadTooBig = errors.New("request head too large")

// headLimit fails reads past n bytes; n < 0 is no limit (a body).
type headLimit struct {
	r io.Reader
	n int64
}

func (h *headLimit) Read(b []byte) (int, error) {
	if h.n == 0 {
		return 0, errHeadTooBig
	}
	if h.n > 0 && int64(len(b)) > h.n {
		b = b[:h.n]
	}
	k, err := h.r.Read(b)
	if h.n > 0 {
		h.n -= int64(k)
	}
	return k, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// MaxTarget bounds the destination a request names (host:port, at most
// 260 bytes for a valid one): a longer one is refused, and the audit log
// keeps no more of it, nor of any other field the client chose, than a few
// hundred bytes. A flood of oversized requests then cannot rotate the
// earlier records out of the log (docs/adr/0056-egress-audit-evidence.md).
const MaxTarget = 300

// Bounds of the other fields of an audit entry that carry client bytes.
const (
	maxMethod = 32
	maxReason = 1024
)

// oversized is the refusal of a target longer than MaxTarget, or "".
func oversized(target string) string {
	if len(target) <= MaxTarget {
		return ""
	}
	return fmt.Sprintf("the destination is %d bytes long, more than %d", len(target), MaxTarget)
}

// connect handles CONNECT host:port: check, dial the checked address, then
// relay bytes both ways until both sides are done.
func (p *Proxy) connect(c net.Conn, br *bufio.Reader, req *http.Request) {
	start := time.Now()
	target := req.URL.Host
	e := Entry{Method: http.MethodConnect, Target: target}
	if why := oversized(req.RequestURI); why != "" {
		e.Target = req.RequestURI
		p.refuse(c, http.StatusBadRequest, e, why)
		return
	}
	v := p.decide(target, true)
	if v.reason != "" {
		p.refuse(c, v.status(), e, v.reason)
		return
	}
	p.tunnel(c, br, e, v, start)
}

// status is the answer to a verdict's refusal: 403, or 502 for a name
// that did not resolve.
func (v verdict) status() int {
	if v.failed {
		return http.StatusBadGateway
	}
	return http.StatusForbidden
}

// tunnel dials what v allowed (directly, or through its upstream), says
// so to the client on c, and relays both ways until both sides are done.
func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, e Entry, v verdict, start time.Time) {
	var up net.Conn
	var addr string
	var err error
	if v.via != nil {
		e.Via = v.via.Addr
		up, addr, err = p.connectVia(v.via, v.target)
	} else {
		up, addr, err = p.dial(v)
	}
	if err != nil {
		e.Addr = addr
		p.noteUpstream(err)
		p.refuse(c, http.StatusBadGateway, e, err.Error())
		return
	}
	defer up.Close()
	e.Addr, e.Allowed = addr, true
	if br == nil {
		// A host port's connection: no CONNECT to answer.
		u, d := relay(c, up)
		e.Up, e.Down = u, d
		p.audit(e, start)
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		e.Reason = "client went away"
		p.audit(e, start)
		return
	}
	// Bytes the client sent right after the request head (a pipelined TLS
	// ClientHello) sit in br; after them, the relay reads the raw
	// connection.
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		w, err := up.Write(b)
		e.Up += int64(w)
		if err != nil {
			e.Reason = "upstream write failed: " + err.Error()
			p.audit(e, start)
			return
		}
	}
	u, d := relay(c, up)
	e.Up += u
	e.Down = d
	p.audit(e, start)
}

// refuse answers a refusal or an upstream failure, logs it and audits it.
func (p *Proxy) refuse(c net.Conn, status int, e Entry, reason string) {
	e.Reason = reason
	e = e.bounded()
	// Log and audit first: once the client has its answer, the record exists.
	if status == http.StatusBadGateway {
		e.failed = true
	}
	if p.Log != nil {
		verb := "denied"
		if status == http.StatusBadGateway {
			verb = "failed"
		}
		p.logf("cco egress: %s %s %s: %s\n", verb, e.Method, e.Target, headerSafe(reason))
	}
	p.audit(e, time.Now())
	p.reply(c, status, reason)
}

// logf writes one line to Log; connections log concurrently.
func (p *Proxy) logf(format string, args ...any) {
	if p.Log == nil {
		return
	}
	line := fmt.Sprintf(format, args...)
	p.logMu.Lock()
	io.WriteString(p.Log, line)
	p.logMu.Unlock()
}

func (p *Proxy) reply(c net.Conn, status int, reason string) {
	reason = headerSafe(reason)
	body := fmt.Sprintf("cco egress: %s\n", reason)
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\n%s: %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), ReasonHeader, reason, len(body), body)
}

// headerSafe keeps a reason (which may quote client input) to one printable
// line.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func (p *Proxy) audit(e Entry, start time.Time) {
	e = e.bounded()
	switch {
	case e.Allowed:
		p.Tally.Add(e.Target, tally.Allowed)
	case e.Addr != "" || e.failed:
		// Not allowed, yet dialled (the checked upstream failed), or a
		// name that did not resolve.
		p.Tally.Add(e.Target, tally.Failed)
	default:
		p.Tally.Add(e.Target, tally.Refused)
	}
	if p.Audit == nil {
		return
	}
	if e.Allowed {
		e.Duration = time.Since(start)
	} else if !p.refusalLogged() {
		return // counted, and said once at the end (Close)
	}
	if err := p.Audit.Record(e); err != nil {
		p.logf("cco egress: %v\n", err)
	}
}

// MaxRefusalRecords bounds the refusals and failures a session's proxy
// logs one by one; past it they are counted, named in the session's
// summary, and said in one record when the proxy closes. A session's
// flood of refusals then cannot rotate earlier records out of the log
// (docs/adr/0056-egress-audit-evidence.md). What was allowed is always
// logged. A variable for the tests.
var MaxRefusalRecords = 1000

// refusalLogged counts one refusal and reports whether it is logged.
func (p *Proxy) refusalLogged() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusals++
	return p.refusals <= MaxRefusalRecords
}

// recordUnlogged writes the one record of the refusals past
// MaxRefusalRecords.
func (p *Proxy) recordUnlogged() {
	p.mu.Lock()
	n, said := p.refusals-MaxRefusalRecords, p.unloggedSaid
	p.unloggedSaid = true
	p.mu.Unlock()
	if n <= 0 || said || p.Audit == nil {
		return
	}
	e := Entry{Method: "-", Reason: fmt.Sprintf("%d more refusals and failures in this session, past the %d logged one by one (the session's summary counts them)", n, MaxRefusalRecords)}
	if err := p.Audit.Record(e); err != nil {
		p.logf("cco egress: %v\n", err)
	}
}

// bounded is e with each field the client chose cut to its bound.
func (e Entry) bounded() Entry {
	e.Method = clip(e.Method, maxMethod)
	e.Target = clip(e.Target, MaxTarget)
	e.Reason = clip(e.Reason, maxReason)
	return e
}

// clip cuts s to at most n bytes (on a rune boundary where s is UTF-8),
// saying how long it was: "<start>... (<length> bytes)". A clipped string
// is n bytes or less, so clipping it again keeps it.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	tail := fmt.Sprintf("... (%d bytes)", len(s))
	cut := max(n-len(tail), 0)
	for end := cut; cut > 0 && cut > end-utf8.UTFMax && !utf8.RuneStart(s[cut]); {
		cut--
	}
	return s[:cut] + tail
}

// dial connects to the first reachable address among the checked ones, and
// never to anything else: the name is not resolved again.
func (p *Proxy) dial(v verdict) (net.Conn, string, error) {
	d := p.Dialer
	if d == nil {
		d = &net.Dialer{}
	}
	ctx, cancel := context.WithTimeout(p.baseCtx(), dialTimeout)
	defer cancel()
	var errs []error
	last := ""
	for _, a := range v.addrs {
		last = netip.AddrPortFrom(a, uint16(v.port)).String()
		c, err := d.DialContext(ctx, "tcp", last)
		if err == nil {
			return c, last, nil
		}
		errs = append(errs, err)
	}
	return nil, last, fmt.Errorf("connecting to %s: %w", v.target, errors.Join(errs...))
}

func (p *Proxy) baseCtx() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	return p.ctx
}
