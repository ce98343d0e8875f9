package hostview

import (
	"encoding/binary"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Pathname unix sockets: a read-only mount does not stop connect(2) on one,
// so every one the jail would see is masked. The kernel lists them per
// network namespace; the launcher runs in the host's.
//
// The list comes from sock_diag (NETLINK_SOCK_DIAG, family AF_UNIX, the
// socket's name attached): one binary dump, without the text /proc/net/unix
// formats for every socket, which is several times dearer on a host with
// thousands of them.

// unix_diag constants (linux/sock_diag.h, linux/unix_diag.h).
const (
	sockDiagByFamily = 20
	udiagShowName    = 0x1
	unixDiagName     = 0
	unixDiagMsgLen   = 16 // family, type, state, pad, ino, cookie[2]
)

// UnixSocketPaths lists the bound pathname unix sockets of this process's
// network namespace, as absolute cleaned paths (abstract and unnamed ones
// are left out).
func UnixSocketPaths() ([]string, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	req := make([]byte, unix.NLMSG_HDRLEN+24)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], 1)
	r := req[unix.NLMSG_HDRLEN:]
	r[0] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(r[4:], 0xffffffff) // every state
	binary.NativeEndian.PutUint32(r[12:], udiagShowName)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out []string
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// The messages are walked in place: a host with thousands of
		// sockets sends as many, and a copy or an allocation each was
		// most of the dump's cost.
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return nil, unix.EINVAL
			}
			data := b[unix.NLMSG_HDRLEN:l]
			switch binary.NativeEndian.Uint16(b[4:]) {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(data)); e != 0 {
						return nil, unix.Errno(-e)
					}
				}
				return out, nil
			}
			if p := socketName(data); p != "" {
				out = append(out, p)
			}
			b = b[min((l+unix.NLMSG_ALIGNTO-1)&^(unix.NLMSG_ALIGNTO-1), len(b)):]
		}
	}
}

// socketName is the pathname of one unix_diag_msg's name attribute, or "".
func socketName(d []byte) string {
	if len(d) < unixDiagMsgLen {
		return ""
	}
	for a := d[unixDiagMsgLen:]; len(a) >= unix.SizeofRtAttr; {
		l := int(binary.NativeEndian.Uint16(a[0:]))
		typ := binary.NativeEndian.Uint16(a[2:])
		if l < unix.SizeofRtAttr || l > len(a) {
			return ""
		}
		if typ == unixDiagName {
			name := a[unix.SizeofRtAttr:l]
			if len(name) == 0 || name[0] != '/' {
				return "" // abstract or relative
			}
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			if clean(name) {
				return string(name)
			}
			return filepath.Clean(string(name))
		}
		a = a[(l+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1):]
		if len(a) == 0 {
			break
		}
	}
	return ""
}

// clean reports whether an absolute name is already what filepath.Clean
// would make of it (no "//", "/./", "/../" nor trailing "/"), the common
// case, so that most names are not cleaned again.
func clean(name []byte) bool {
	if len(name) > 1 && name[len(name)-1] == '/' {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		rest := name[i+1:]
		if len(rest) > 0 && rest[0] == '/' {
			return false
		}
		if len(rest) > 0 && rest[0] == '.' && (len(rest) == 1 || rest[1] == '/' || rest[1] == '.' && (len(rest) == 2 || rest[2] == '/')) {
			return false
		}
	}
	return true
}
