package egress

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// An upstream proxy (egress_upstream, docs/adr/0130-egress-upstream-proxy.md)
// sees a request only once this proxy's policy has allowed it: decide runs
// first, and only an allowed CONNECT or plain http request is forwarded.
// The upstream's own address is no destination of the jail's: it needs no
// allow_ip. Its Basic credentials travel here on the process's standard
// input and go only to the upstream.

// upstreamError is an upstream proxy's failure: the 502's reason, and the
// line the session's end says.
type upstreamError struct {
	reason string
}

func (e *upstreamError) Error() string { return e.reason }

// spokenSchemes are the proxy authentication schemes cco answers.
var spokenSchemes = []string{"basic"}

// dialUpstream connects to the upstream proxy: its name resolved here, and
// no address check (the operator named it).
func (p *Proxy) dialUpstream(up *policy.UpstreamProxy) (net.Conn, string, error) {
	host, port, err := net.SplitHostPort(up.Addr)
	if err != nil {
		return nil, "", &upstreamError{fmt.Sprintf("upstream proxy %s: %v", up.Addr, err)}
	}
	ctx, cancel := context.WithTimeout(p.baseCtx(), dialTimeout)
	defer cancel()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		r := p.Resolver
		if r == nil {
			r = NetResolver{}
		}
		rctx, rcancel := context.WithTimeout(ctx, resolveTimeout)
		addrs, err = r.LookupNetIP(rctx, host)
		rcancel()
		if err != nil || len(addrs) == 0 {
			return nil, "", &upstreamError{fmt.Sprintf("upstream proxy %s: resolving %s: %v (fix: correct egress_upstream, or the proxy variables it reads)", up.Addr, host, err)}
		}
	}
	d := p.Dialer
	if d == nil {
		d = &net.Dialer{}
	}
	var errs []error
	last := ""
	for _, a := range addrs {
		last = netip.AddrPortFrom(a.Unmap().WithZone(""), mustPort(port)).String()
		c, err := d.DialContext(ctx, "tcp", last)
		if err == nil {
			return c, last, nil
		}
		errs = append(errs, err)
	}
	return nil, last, &upstreamError{fmt.Sprintf("upstream proxy %s: connecting: %v", up.Addr, errors.Join(errs...))}
}

func mustPort(s string) uint16 {
	var n int
	fmt.Sscanf(s, "%d", &n)
	return uint16(n)
}

// authorize sets Proxy-Authorization from the upstream's credentials.
func authorize(h http.Header, up *policy.UpstreamProxy) {
	if up.User == "" && up.Password == "" {
		return
	}
	h.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(up.User+":"+up.Password)))
}

// connectVia opens a tunnel to target through the upstream. The returned
// connection reads whatever the upstream sent after its answer first.
func (p *Proxy) connectVia(up *policy.UpstreamProxy, target string) (net.Conn, string, error) {
	raw, addr, err := p.dialUpstream(up)
	if err != nil {
		return nil, addr, err
	}
	req := &http.Request{Method: http.MethodConnect, Host: target, Header: http.Header{}, URL: &url.URL{Host: target}}
	authorize(req.Header, up)
	if err := req.Write(raw); err != nil {
		raw.Close()
		return nil, addr, &upstreamError{fmt.Sprintf("upstream proxy %s: sending CONNECT %s: %v", up.Addr, target, err)}
	}
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		raw.Close()
		return nil, addr, &upstreamError{fmt.Sprintf("upstream proxy %s: reading its answer to CONNECT %s: %v", up.Addr, target, err)}
	}
	if resp.StatusCode/100 != 2 {
		resp.Body.Close()
		raw.Close()
		return nil, addr, &upstreamError{upstreamRefusal(up, "CONNECT "+target, resp)}
	}
	if br.Buffered() == 0 {
		return raw, addr, nil
	}
	return &bufferedConn{Conn: raw, r: br}, addr, nil
}

// upstreamRefusal says why the upstream did not forward a request: the
// authentication it asks for, or its status. It names the upstream and
// the scheme, never the credentials.
func upstreamRefusal(up *policy.UpstreamProxy, what string, resp *http.Response) string {
	if resp.StatusCode != http.StatusProxyAuthRequired {
		return fmt.Sprintf("upstream proxy %s refused %s: %s", up.Addr, what, resp.Status)
	}
	var schemes []string
	basic := false
	for _, v := range resp.Header.Values("Proxy-Authenticate") {
		s, _, _ := strings.Cut(strings.TrimSpace(v), " ")
		s = strings.TrimSuffix(s, ",")
		if s == "" {
			continue
		}
		if slices.Contains(spokenSchemes, strings.ToLower(s)) {
			basic = true
		} else if !slices.Contains(schemes, s) {
			schemes = append(schemes, s)
		}
	}
	hasCreds := up.User != "" || up.Password != ""
	switch {
	case basic && hasCreds:
		return fmt.Sprintf("upstream proxy %s refused the Basic credentials egress_upstream gives (407 Proxy Authentication Required; fix: correct the user and password in egress_upstream)", up.Addr)
	case basic:
		return fmt.Sprintf("upstream proxy %s asks for Basic authentication, and no credentials are set (fix: egress_upstream = \"http://USER:PASSWORD@%s\" in /etc/cco/sandbox.toml)", up.Addr, up.Addr)
	case len(schemes) > 0:
		return fmt.Sprintf("upstream proxy %s asks for %s authentication, which cco does not speak (only Basic; fix: have the proxy accept Basic or this host without authentication, or run a local proxy that speaks %s, such as cntlm, and name it in egress_upstream)", up.Addr, strings.Join(schemes, ", "), schemes[0])
	}
	return fmt.Sprintf("upstream proxy %s refused %s: %s with no Proxy-Authenticate scheme", up.Addr, what, resp.Status)
}

// bufferedConn reads r (what the upstream sent past its answer) before the
// connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// CloseWrite passes the half-close on, where the connection has one.
func (b *bufferedConn) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

var _ io.Reader = (*bufferedConn)(nil)

// noteUpstream counts an upstream's failure for the line the session's
// end says about it.
func (p *Proxy) noteUpstream(err error) {
	var ue *upstreamError
	if errors.As(err, &ue) {
		p.Tally.Upstream(ue.reason)
	}
}
