package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/cco-dev/cco/sandbox/egress/policy"
)

// verdict is the proxy's decision on one destination: the addresses it may
// dial (all checked), or why not.
type verdict struct {
	target string
	host   string
	port   int
	addrs  []netip.Addr
	reason string // empty: allowed
	// failed: the name did not resolve (the summary's "failed", a 502),
	// not a refusal by the policy.
	failed bool
	// via is the upstream proxy the request goes through (nil: dialled
	// directly); with it, addrs may be empty: the name did not resolve
	// on the host, and the upstream resolves it.
	via *policy.UpstreamProxy
	// hostLoopback: the destination is the host's loopback on one of
	// host_ports, dialled directly whatever the upstream.
	hostLoopback bool
}

// decide applies the policy to host:port; connect tells a CONNECT from a
// plain http request (each has its upstream). Everything it refuses, it
// refuses before any dial, and before any upstream sees it.
func (p *Proxy) decide(target string, connect bool) verdict {
	v := verdict{target: target}
	host, portStr, err := net.SplitHostPort(target)
	if err != nil {
		v.reason = fmt.Sprintf("%q is not host:port", target)
		return v
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		v.reason = fmt.Sprintf("%q is not a port", portStr)
		return v
	}
	v.port = port
	pol := p.Policy
	if a, ok := hostLoopback(host); ok && slices.Contains(pol.HostPorts, port) {
		// One of host_ports: the host's own loopback service, and only
		// on that port (docs/adr/0131-host-loopback-ports.md).
		// A service may listen on one loopback family only: the other
		// is tried next. The port is opened on 127.0.0.1 and ::1 alone,
		// whichever loopback address was asked for: another service may
		// listen on the same port at 127.0.0.2.
		loop4 := netip.AddrFrom4([4]byte{127, 0, 0, 1})
		first, other := loop4, netip.IPv6Loopback()
		if a.Is6() {
			first, other = other, loop4
		}
		v.host, v.addrs, v.hostLoopback = first.String(), []netip.Addr{first, other}, true
		return v
	}
	// ssh_hosts on port 22: named by the operator for ssh (ssh_agent).
	sshHost := port == sshPort && policy.MatchRule(pol.SSHHosts, strings.TrimSuffix(strings.ToLower(host), "."))
	if !sshHost && !slices.Contains(pol.EffectivePorts(), port) {
		v.reason = fmt.Sprintf("port %d is not in egress_ports %v", port, pol.EffectivePorts())
		return v
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	v.host = host
	v.via = pol.Upstream.For(host, connect)

	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			v.reason = fmt.Sprintf("address %s carries a zone", host)
			return v
		}
		if p.inAllowIP(a) {
			v.addrs = []netip.Addr{a.Unmap()}
			return v
		}
		if pol.EffectiveMode() == ModeAllowlist {
			v.reason = fmt.Sprintf("address %s is not in allow_ip (egress = allowlist admits only names in egress_allow)", a)
			return v
		}
		if why := p.refusedAddr(a); why != "" {
			v.reason = fmt.Sprintf("address %s is %s", a, why)
			return v
		}
		v.addrs = []netip.Addr{a.Unmap()}
		return v
	}

	if labels := strings.Split(host, "."); policy.EndsInNumber(labels[len(labels)-1]) {
		v.reason = fmt.Sprintf("%q is a numeric address in a form other than dotted decimal; name it as 1.2.3.4", host)
		return v
	}
	if !policy.ValidName(host) {
		v.reason = fmt.Sprintf("%q is not a valid host name", host)
		return v
	}
	if isLocalhost(host) {
		// RFC 6761: every name under localhost is loopback, to the
		// host's resolver (nss-myhostname) and to an upstream's alike.
		v.reason = fmt.Sprintf("%s is loopback (a name under localhost); to reach a service on the host's loopback, list its port in host_ports", host)
		return v
	}
	exempt := policy.MatchRule(lower(pol.AllowHost), host)
	if pol.EffectiveMode() == ModeAllowlist && !exempt && !sshHost && !policy.MatchRule(lower(pol.Allow), host) {
		v.reason = fmt.Sprintf("%s is not in egress_allow", host)
		return v
	}
	r := p.Resolver
	if r == nil {
		r = NetResolver{}
	}
	ctx, cancel := context.WithTimeout(p.baseCtx(), resolveTimeout)
	addrs, err := r.LookupNetIP(ctx, host)
	cancel()
	if (err != nil || len(addrs) == 0) && v.via != nil {
		// Behind an upstream the host often resolves no outside name:
		// the name, which the policy allowed, goes to the upstream,
		// which resolves it (docs/adr/0130-egress-upstream-proxy.md).
		return v
	}
	if err != nil {
		v.reason, v.failed = fmt.Sprintf("resolving %s: %v", host, err), true
		return v
	}
	if len(addrs) == 0 {
		v.reason, v.failed = fmt.Sprintf("%s has no addresses", host), true
		return v
	}
	for _, a := range addrs {
		if exempt || p.inAllowIP(a) {
			continue
		}
		// One bad address refuses the name: a name that answers both a public
		// and a private address is an attack on whoever picks the address.
		if why := p.refusedAddr(a); why != "" {
			v.reason = fmt.Sprintf("%s resolves to %s, which is %s", host, a, why)
			return v
		}
	}
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if !slices.Contains(v.addrs, a) {
			v.addrs = append(v.addrs, a)
		}
	}
	return v
}

func lower(rules []string) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = strings.TrimSuffix(strings.ToLower(r), ".")
	}
	return out
}

func (p *Proxy) inAllowIP(a netip.Addr) bool {
	u := a.Unmap()
	for _, pfx := range p.Policy.AllowIP {
		if policy.UnmapPrefix(pfx).Contains(u) {
			return true
		}
	}
	return false
}

// refusedAddr is why a (not in allow_ip) may not be reached: a special
// range, or one of the host's own addresses. If the host's addresses cannot
// be listed, everything is refused.
func (p *Proxy) refusedAddr(a netip.Addr) string {
	if why := classifyAddr(a); why != "" {
		return why
	}
	local := p.LocalAddrs
	if local == nil {
		local = InterfaceAddrs
	}
	own, err := local()
	if err != nil {
		return fmt.Sprintf("not checkable against the host's own addresses (%v)", err)
	}
	u := a.Unmap()
	for _, o := range own {
		if o.Unmap().WithZone("") == u {
			return "one of this host's own addresses"
		}
	}
	return ""
}

// sshPort is SSH's, which ssh_hosts open.
const sshPort = 22

// hostLoopback is the host loopback address a destination names:
// 127.0.0.1 for "localhost", else the loopback literal itself.
func hostLoopback(host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if isLocalhost(h) {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), true
	}
	a, err := netip.ParseAddr(h)
	if err != nil || a.Zone() != "" || !a.Unmap().IsLoopback() {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// isLocalhost reports whether h (lower case, no trailing dot) is localhost
// or a name under it.
func isLocalhost(h string) bool {
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}
