package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// netProbe reports what the jail's network allows: its interfaces, direct
// TCP, UDP and DNS, a host abstract socket, and a request through the proxy
// the environment names. Direct packets to non-loopback addresses are tried
// only once the jail is seen to hold nothing but lo, where they cannot leave.
func netProbe(p *Params) {
	ifs, err := net.Interfaces()
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	report["ifaces"] = strings.Join(names, ",")
	if b, err := os.ReadFile("/run/cco/jail"); err == nil {
		report["marker"] = string(b)
	}
	if err != nil {
		report["ifaces"] = res(err)
	}
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"} {
		report["env_"+k] = os.Getenv(k)
	}
	if p.Upstream != "" {
		// The host's loopback upstream, dialled directly: the jail's lo is
		// its own, so nothing listens there.
		c, err := net.DialTimeout("tcp", p.Upstream, 2*time.Second)
		report["tcp_loopback"] = closeRes(c, err)
	}
	if report["ifaces"] == "lo" {
		c, err := net.DialTimeout("tcp", "192.0.2.1:80", 2*time.Second)
		report["tcp_direct"] = closeRes(c, err)
		if u, err := net.Dial("udp", "192.0.2.1:53"); err != nil {
			report["udp_direct"] = res(err)
		} else {
			_, err = u.Write([]byte("x"))
			report["udp_direct"] = res(err)
			u.Close()
		}
		// A resolver whose every query goes to a documentation address, never
		// the host's configured server.
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, "192.0.2.53:53")
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = r.LookupHost(ctx, "cco-test.invalid")
		cancel()
		report["dns"] = res(err)
	}
	for _, u := range p.Direct {
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
		resp, err := cl.Get(u)
		if err != nil {
			report["direct:"+u] = res(err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		report["direct:"+u] = strconv.Itoa(resp.StatusCode) + " " + string(b)
	}
	if p.Abstract != "" {
		c, err := net.Dial("unix", "@"+p.Abstract)
		report["abstract"] = closeRes(c, err)
	}
	if pu := os.Getenv("HTTP_PROXY"); pu != "" && p.Upstream != "" {
		// Go's client never proxies a loopback URL by itself (and NO_PROXY
		// names it): this agent insists, as one reaching a host would.
		u, err := url.Parse(pu)
		if err != nil {
			report["via_proxy"] = res(err)
			return
		}
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
		resp, err := cl.Get("http://" + p.Upstream + "/hello")
		if err != nil {
			report["via_proxy"] = res(err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		report["via_proxy"] = strconv.Itoa(resp.StatusCode)
		report["via_proxy_body"] = string(b)
		report["via_proxy_reason"] = resp.Header.Get("X-Cco-Egress-Reason")
	}
}

func closeRes(c net.Conn, err error) string {
	if c != nil {
		c.Close()
	}
	return res(err)
}
