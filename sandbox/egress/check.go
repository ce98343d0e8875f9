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
}

// decide applies the policy to host:port. Everything it refuses, it refuses
// before any dial.
func (p *Proxy) decide(target string) verdict {
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
	if !slices.Contains(pol.EffectivePorts(), port) {
		v.reason = fmt.Sprintf("port %d is not in egress_ports %v", port, pol.EffectivePorts())
		return v
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	v.host = host

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

	if !policy.ValidName(host) {
		v.reason = fmt.Sprintf("%q is not a valid host name", host)
		return v
	}
	exempt := policy.MatchRule(lower(pol.AllowHost), host)
	if pol.EffectiveMode() == ModeAllowlist && !exempt && !policy.MatchRule(lower(pol.Allow), host) {
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
	if err != nil {
		v.reason = fmt.Sprintf("resolving %s: %v", host, err)
		return v
	}
	if len(addrs) == 0 {
		v.reason = fmt.Sprintf("%s has no addresses", host)
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
