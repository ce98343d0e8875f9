package egress

import (
	"fmt"
	"net/netip"
)

// refusedRange is one entry of the IANA special-purpose address registries
// (IPv4 and IPv6) that a jail must not reach, with the name the audit log and
// the 403 reason use for it.
type refusedRange struct {
	prefix netip.Prefix
	name   string
}

func mustRanges(pairs ...string) []refusedRange {
	out := make([]refusedRange, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, refusedRange{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// refusedV4 is every IPv4 block that is not globally routable unicast.
// The few globally reachable anycast entries inside 192.0.0.0/24 are refused
// with the rest of the block: no agent needs them, and failing closed is the
// point. AS112 (192.31.196.0/24, 192.175.48.0/24) and AMT (192.52.193.0/24)
// are globally reachable and are therefore not listed.
var refusedV4 = mustRanges(
	"0.0.0.0/8", "this network (0.0.0.0/8)",
	"10.0.0.0/8", "private (10.0.0.0/8)",
	"100.64.0.0/10", "shared address space / CGNAT (100.64.0.0/10)",
	"127.0.0.0/8", "loopback (127.0.0.0/8)",
	"169.254.0.0/16", "link-local / cloud metadata (169.254.0.0/16)",
	"172.16.0.0/12", "private (172.16.0.0/12)",
	"192.0.0.0/24", "IETF protocol assignments (192.0.0.0/24)",
	"192.0.2.0/24", "documentation TEST-NET-1 (192.0.2.0/24)",
	"192.88.99.0/24", "deprecated 6to4 relay anycast (192.88.99.0/24)",
	"192.168.0.0/16", "private (192.168.0.0/16)",
	"198.18.0.0/15", "benchmarking (198.18.0.0/15)",
	"198.51.100.0/24", "documentation TEST-NET-2 (198.51.100.0/24)",
	"203.0.113.0/24", "documentation TEST-NET-3 (203.0.113.0/24)",
	"224.0.0.0/4", "multicast (224.0.0.0/4)",
	"240.0.0.0/4", "reserved (240.0.0.0/4)",
)

// refusedV6 is every IPv6 block inside global unicast 2000::/3 that is not
// globally routable; everything outside 2000::/3 is refused by
// classifyAddr before this list is consulted (except the forms that embed an
// IPv4 address, which are judged by that address). 2001::/23 is refused as a
// whole (Teredo, ORCHID, benchmarking and the protocol anycasts inside it).
// SRv6 SIDs (5f00::/16), the discard prefix (100::/64) and 64:ff9b:1::/48
// lie outside 2000::/3.
var refusedV6 = mustRanges(
	"2001::/23", "IETF protocol assignments incl. Teredo (2001::/23)",
	"2001:db8::/32", "documentation (2001:db8::/32)",
	"3fff::/20", "documentation (3fff::/20)",
)

var (
	mapped4   = netip.MustParsePrefix("::ffff:0:0/96")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	global6   = netip.MustParsePrefix("2000::/3")
)

// refusal is why an address may not be reached; empty means it may.
func classifyAddr(a netip.Addr) string {
	if !a.IsValid() {
		return "invalid address"
	}
	if a.Zone() != "" {
		return fmt.Sprintf("address %s carries a zone", a)
	}
	if a.Is4() {
		for _, r := range refusedV4 {
			if r.prefix.Contains(a) {
				return r.name
			}
		}
		return ""
	}
	// IPv6 forms that carry an IPv4 address are judged by that address:
	// otherwise ::ffff:127.0.0.1 or 2002:a9fe:a9fe:: would reach loopback or
	// the metadata service through a translator.
	b := a.As16()
	switch {
	case mapped4.Contains(a):
		return embedded("IPv4-mapped", netip.AddrFrom4([4]byte(b[12:16])))
	case nat64.Contains(a):
		return embedded("NAT64", netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return embedded("6to4", netip.AddrFrom4([4]byte(b[2:6])))
	}
	switch {
	case a.IsUnspecified():
		return "unspecified (::/128)"
	case a.IsLoopback():
		return "loopback (::1/128)"
	case a.IsMulticast():
		return "multicast (ff00::/8)"
	case a.IsLinkLocalUnicast():
		return "link-local (fe80::/10)"
	case a.IsPrivate():
		return "unique local (fc00::/7)"
	case !global6.Contains(a):
		return "not global unicast (outside 2000::/3)"
	}
	for _, r := range refusedV6 {
		if r.prefix.Contains(a) {
			return r.name
		}
	}
	return ""
}

func embedded(form string, v4 netip.Addr) string {
	if why := classifyAddr(v4); why != "" {
		return fmt.Sprintf("%s form of %s: %s", form, v4, why)
	}
	return ""
}
