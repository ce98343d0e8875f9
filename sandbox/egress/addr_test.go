package egress

import (
	"net/netip"
	"strings"
	"testing"
)

// refusedAddrs is one address (often both edges) of every refused range.
var refusedAddrs = []struct{ addr, why string }{
	{"0.0.0.0", "this network"},
	{"0.255.255.255", "this network"},
	{"10.0.0.1", "private"},
	{"10.255.255.255", "private"},
	{"100.64.0.1", "CGNAT"},
	{"100.127.255.254", "CGNAT"},
	{"127.0.0.1", "loopback"},
	{"127.255.255.254", "loopback"},
	{"169.254.169.254", "link-local"},
	{"169.254.0.1", "link-local"},
	{"172.16.0.1", "private"},
	{"172.31.255.255", "private"},
	{"192.0.0.8", "IETF"},
	{"192.0.2.1", "TEST-NET-1"},
	{"192.88.99.1", "6to4 relay"},
	{"192.168.0.1", "private"},
	{"192.168.255.255", "private"},
	{"198.18.0.1", "benchmarking"},
	{"198.19.255.255", "benchmarking"},
	{"198.51.100.7", "TEST-NET-2"},
	{"203.0.113.9", "TEST-NET-3"},
	{"224.0.0.1", "multicast"},
	{"239.255.255.250", "multicast"},
	{"240.0.0.1", "reserved"},
	{"255.255.255.255", "reserved"},
	{"::", "unspecified"},
	{"::1", "loopback"},
	{"::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1: loopback"},
	{"::ffff:10.1.2.3", "IPv4-mapped form of 10.1.2.3: private"},
	{"::ffff:169.254.169.254", "IPv4-mapped form of 169.254.169.254: link-local"},
	{"64:ff9b::a9fe:a9fe", "NAT64 form of 169.254.169.254"},
	{"64:ff9b::7f00:1", "NAT64 form of 127.0.0.1"},
	{"64:ff9b::c0a8:101", "NAT64 form of 192.168.1.1"},
	{"2002:7f00:1::1", "6to4 form of 127.0.0.1"},
	{"2002:a9fe:a9fe::", "6to4 form of 169.254.169.254"},
	{"2002:ac10:1::5", "6to4 form of 172.16.0.1"},
	{"64:ff9b:1::1", "outside 2000::/3"},
	{"::7f00:1", "outside 2000::/3"}, // deprecated IPv4-compatible
	{"100::1", "outside 2000::/3"},   // discard-only
	{"4000::1", "outside 2000::/3"},
	{"fc00::1", "unique local"},
	{"fd12:3456::1", "unique local"},
	{"fe80::1", "link-local"},
	{"febf:ffff::1", "link-local"},
	{"fec0::1", "outside 2000::/3"}, // deprecated site-local
	{"ff02::1", "multicast"},
	{"ff0e::1", "multicast"},
	{"2001::1", "Teredo"},
	{"2001:1ff:ffff::1", "2001::/23"},
	{"2001:db8::1", "documentation"},
	{"2001:db8:ffff::1", "documentation"},
	{"3fff::1", "documentation"},
	{"5f00::1", "outside 2000::/3"}, // SRv6 SIDs
}

var publicAddrs = []string{
	"1.1.1.1", "8.8.8.8", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0",
	"126.255.255.255", "128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255",
	"172.32.0.0", "192.0.1.255", "192.31.196.1", "192.52.193.1", "192.169.0.0",
	"192.175.48.1", "198.17.255.255", "198.20.0.0", "223.255.255.255",
	"2606:4700::1111", "2a00:1450::1", "2001:200::1", "::ffff:8.8.8.8",
	"64:ff9b::808:808", "2002:808:808::1", "2620:4f:8000::1",
}

func TestClassifyRefused(t *testing.T) {
	for _, tc := range refusedAddrs {
		why := classifyAddr(netip.MustParseAddr(tc.addr))
		if why == "" {
			t.Errorf("%s: allowed, want refused (%s)", tc.addr, tc.why)
		} else if !strings.Contains(why, tc.why) {
			t.Errorf("%s: reason %q, want it to mention %q", tc.addr, why, tc.why)
		}
	}
}

func TestClassifyPublic(t *testing.T) {
	for _, a := range publicAddrs {
		if why := classifyAddr(netip.MustParseAddr(a)); why != "" {
			t.Errorf("%s: refused (%s), want allowed", a, why)
		}
	}
}

func TestClassifyZoneRefused(t *testing.T) {
	if why := classifyAddr(netip.MustParseAddr("2606:4700::1%eth0")); why == "" {
		t.Error("an address with a zone was allowed")
	}
	if why := classifyAddr(netip.Addr{}); why == "" {
		t.Error("the zero address was allowed")
	}
}
