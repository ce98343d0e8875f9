package hostview

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"syscall"

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
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
						return nil, unix.Errno(-e)
					}
				}
				return out, nil
			}
			if p := socketName(m.Data); p != "" {
				out = append(out, p)
			}
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
			return filepath.Clean(string(name))
		}
		a = a[(l+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1):]
		if len(a) == 0 {
			break
		}
	}
	return ""
}
