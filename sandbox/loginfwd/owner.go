package loginfwd

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
)

// errNoOwner is a peer whose socket the host's tables do not show (gone
// already, or not on this host's loopback).
var errNoOwner = errors.New("no socket of the host's has that address")

// ProcNet is where the host's TCP tables are read: the calling thread's
// network namespace, the host's (a thread that enters the jail's namespace
// stays locked to its goroutine until it is back).
var ProcNet = "/proc/thread-self/net/"

// PeerUID is the owner of the host socket connected from peer to local,
// read from the host's /proc/net/tcp (tcp6 for IPv6): the uid of whoever
// made the connection to a forwarded login port.
func PeerUID(peer, local netip.AddrPort) (int, error) {
	name := "tcp"
	if !peer.Addr().Unmap().Is4() {
		name = "tcp6"
	}
	b, err := os.ReadFile(ProcNet + name)
	if err != nil {
		return -1, fmt.Errorf("reading the host's sockets: %w", err)
	}
	return ownerIn(b, peer, local, name == "tcp6")
}

// ownerIn finds the line whose local address is peer and remote address
// is local, and returns its uid column.
func ownerIn(table []byte, peer, local netip.AddrPort, v6 bool) (int, error) {
	lines := bytes.Split(table, []byte("\n"))
	for _, line := range lines[min(1, len(lines)):] { // the first is the header
		f := bytes.Fields(line)
		if len(f) < 8 {
			continue
		}
		l, err := parseAddr(string(f[1]), v6)
		if err != nil || !same(l, peer) {
			continue
		}
		r, err := parseAddr(string(f[2]), v6)
		if err != nil || !same(r, local) {
			continue
		}
		uid, err := strconv.Atoi(string(f[7]))
		if err != nil {
			return -1, fmt.Errorf("the host's socket table: uid %q", f[7])
		}
		return uid, nil
	}
	return -1, errNoOwner
}

func same(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}
