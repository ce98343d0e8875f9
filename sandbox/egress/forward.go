package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// forward handles one absolute-form request (GET http://host/path). It
// dials a fresh checked upstream for each request, so a keep-alive client
// cannot ride one check to another host. It reports whether the client
// connection can carry another request.
func (p *Proxy) forward(c net.Conn, req *http.Request) bool {
	start := time.Now()
	e := Entry{Method: req.Method, Target: req.URL.Host}
	if !req.URL.IsAbs() || req.URL.Scheme != "http" || req.URL.Host == "" {
		e.Target = req.RequestURI
		p.refuse(c, http.StatusBadRequest, e, "not a proxy request: use CONNECT host:port or an absolute http:// URL")
		return false
	}
	if why := oversized(e.Target); why != "" {
		p.refuse(c, http.StatusBadRequest, e, why)
		return false
	}
	if req.URL.Port() == "" {
		e.Target = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	v := p.decide(e.Target, false)
	if v.reason != "" {
		p.refuse(c, v.status(), e, v.reason)
		return false
	}
	var raw net.Conn
	var addr string
	var err error
	if v.via != nil {
		e.Via = v.via.Addr
		raw, addr, err = p.dialUpstream(v.via)
	} else {
		raw, addr, err = p.dial(v)
	}
	if err != nil {
		p.noteUpstream(err)
		e.Addr = addr
		p.refuse(c, http.StatusBadGateway, e, err.Error())
		return false
	}
	up := &countConn{Conn: raw}
	defer up.Close()
	e.Addr, e.Allowed = addr, true
	defer func() { e.Up, e.Down = up.written, up.read; p.audit(e, start) }()

	clientClose := req.Close
	// Answer "Expect: 100-continue" here: the upstream is already chosen,
	// and a client waiting for the 100 would otherwise stall.
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		if _, err := io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			e.Reason = "client went away"
			return false
		}
	}
	stripHopByHop(req.Header)
	req.Close = true
	req.RequestURI = ""
	write := req.Write
	if v.via != nil {
		// The upstream takes the absolute form, and its credentials.
		authorize(req.Header, v.via)
		write = req.WriteProxy
	}
	if err := write(up); err != nil {
		e.Reason = "writing the request upstream: " + err.Error()
		p.reply(c, http.StatusBadGateway, e.Reason)
		return false
	}
	ubr := bufio.NewReaderSize(up, 32<<10)
	for {
		resp, err := http.ReadResponse(ubr, req)
		if err != nil {
			e.Reason = "reading the upstream response: " + err.Error()
			p.reply(c, http.StatusBadGateway, e.Reason)
			return false
		}
		if v.via != nil && resp.StatusCode == http.StatusProxyAuthRequired {
			// The upstream's own refusal: the client did not speak to it.
			resp.Body.Close()
			e.Allowed = false
			e.Reason = upstreamRefusal(v.via, req.Method+" "+e.Target, resp)
			p.noteUpstream(&upstreamError{e.Reason})
			e.failed = true
			p.reply(c, http.StatusBadGateway, e.Reason)
			return false
		}
		informational := resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols
		stripHopByHop(resp.Header)
		keep := !clientClose && (resp.ContentLength >= 0 || isChunked(resp.TransferEncoding))
		resp.Close = !keep
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil {
			e.Reason = "writing the response to the client: " + err.Error()
			return false
		}
		if !informational {
			return keep
		}
	}
}

func isChunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

// stripHopByHop removes the headers that describe one hop, not the message
// (RFC 9110 7.6.1), including whatever Connection names.
func stripHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Trailer", "Upgrade"} {
		h.Del(k)
	}
}

// countConn counts the bytes of an absolute-form exchange (the CONNECT path
// counts with the relay's result instead, which reads the raw connection).
type countConn struct {
	net.Conn
	read, written int64
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read += int64(n)
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written += int64(n)
	return n, err
}
