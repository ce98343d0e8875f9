package loginfwd

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strconv"
)

// listenState is TCP_LISTEN as /proc/net/tcp prints it.
const listenState = "0A"

// Listening is one LISTEN socket of a network namespace.
type Listening struct {
	Addr netip.AddrPort
}

// Loopback reports whether the socket takes connections to loopback: a
// loopback address, or a wildcard (which includes loopback).
func (l Listening) Loopback() bool {
	a := l.Addr.Addr().Unmap()
	return a.IsLoopback() || a.IsUnspecified()
}

// Listeners reads the LISTEN sockets of pid's network namespace from
// /proc/<pid>/net/tcp and tcp6, which show the namespace of that process,
// whichever namespace the reader is in. A missing tcp6 (IPv6 disabled) is
// not an error; a missing tcp is: the process is gone.
func Listeners(pid int) ([]Listening, error) {
	base := "/proc/" + strconv.Itoa(pid) + "/net/"
	b4, err := os.ReadFile(base + "tcp")
	if err != nil {
		return nil, err
	}
	out, err := parseTCP(b4, false)
	if err != nil {
		return nil, fmt.Errorf("%stcp: %w", base, err)
	}
	if b6, err := os.ReadFile(base + "tcp6"); err == nil {
		l6, err := parseTCP(b6, true)
		if err != nil {
			return nil, fmt.Errorf("%stcp6: %w", base, err)
		}
		out = append(out, l6...)
	}
	return out, nil
}

// parseTCP reads the LISTEN lines of a /proc/net/tcp or tcp6 table. Its
// addresses are hex words in host byte order: "0100007F:05AF" is
// 127.0.0.1:1455 on a little-endian machine.
func parseTCP(b []byte, v6 bool) ([]Listening, error) {
	var out []Listening
	lines := bytes.Split(b, []byte("\n"))
	for _, line := range lines[min(1, len(lines)):] { // the first is the header
		f := bytes.Fields(line)
		if len(f) < 4 || string(f[3]) != listenState {
			continue
		}
		ap, err := parseAddr(string(f[1]), v6)
		if err != nil {
			return nil, err
		}
		out = append(out, Listening{Addr: ap})
	}
	return out, nil
}

func parseAddr(s string, v6 bool) (netip.AddrPort, error) {
	i := bytes.IndexByte([]byte(s), ':')
	if i < 0 {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	raw, err := hex.DecodeString(s[:i])
	if err != nil || (len(raw) != 4 && len(raw) != 16) || (len(raw) == 16) != v6 {
		return netip.AddrPort{}, fmt.Errorf("address %q: not a hex address", s)
	}
	port, err := strconv.ParseUint(s[i+1:], 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: bad port", s)
	}
	// Each 32-bit word is printed in host order: turn it back into
	// network order.
	var a [16]byte
	for w := 0; w < len(raw); w += 4 {
		binary.BigEndian.PutUint32(a[w:], binary.NativeEndian.Uint32(raw[w:]))
	}
	var addr netip.Addr
	if v6 {
		addr = netip.AddrFrom16(a)
	} else {
		addr = netip.AddrFrom4([4]byte(a[:4]))
	}
	return netip.AddrPortFrom(addr, uint16(port)), nil
}
