package pty

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The agent's terminal has two halves. In the jail, Serve allocates the pty
// from the jail's own devpts, runs the agent on its slave and watches it;
// outside, the launcher's Terminal holds the user's terminal, puts it in raw
// mode and relays it to the pty's master. No process in the jail ever holds
// the user's terminal: the master is all that crosses, and it crosses
// outwards. The halves speak over a SOCK_SEQPACKET socket pair, one message
// a datagram:
//
//	'I' termios winsize flags   launcher -> jail, written before the jail starts
//	'M' + the master (SCM_RIGHTS) jail -> launcher, once the pty exists
//	'S'                         jail -> launcher: the agent stopped (^Z)
//	'C'                         launcher -> jail: continue it (fg)
//
// When the agent stops, the launcher gives the user's terminal back as it
// found it and stops itself, so that the shell takes the terminal back;
// when the shell continues it, it makes the terminal raw again and
// continues the agent.

const (
	msgSetup    = 'I'
	msgMaster   = 'M'
	msgStopped  = 'S'
	msgContinue = 'C'
)

// Setup is what the jail's half needs to know of the user's terminal
// before the agent starts.
type Setup struct {
	Termios unix.Termios
	Winsize unix.Winsize
	// KeepStderr: the agent's stderr is the jail's stderr (the user's
	// redirected stderr, `2> log`), not the pty.
	KeepStderr bool
}

// NewControl is a connected pair of control sockets: the launcher keeps
// host, the jail gets jail.
func NewControl() (host, jail *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("a socket for the agent's terminal: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "pty-control"), os.NewFile(uintptr(fds[1]), "pty-control"), nil
}

// SetupOf reads the user's terminal in: its settings and size; keepStderr
// is true when the user's stderr is not that terminal.
func SetupOf(in *os.File, keepStderr bool) (Setup, error) {
	fd, err := fdOf(in)
	if err != nil {
		return Setup{}, err
	}
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return Setup{}, fmt.Errorf("reading the terminal's settings: %w", err)
	}
	s := Setup{Termios: *tio, KeepStderr: keepStderr}
	if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
		s.Winsize = *ws
	}
	return s, nil
}

// SendSetup writes s to the control socket: the launcher does it before
// the jail starts, and the jail's half reads it first.
func SendSetup(ctl *os.File, s Setup) error {
	b := make([]byte, 0, 1+unsafe.Sizeof(s.Termios)+unsafe.Sizeof(s.Winsize)+1)
	b = append(b, msgSetup)
	b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&s.Termios)), unsafe.Sizeof(s.Termios))...)
	b = append(b, unsafe.Slice((*byte)(unsafe.Pointer(&s.Winsize)), unsafe.Sizeof(s.Winsize))...)
	if s.KeepStderr {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return send(ctl, b, -1)
}

// readSetup reads the launcher's Setup.
func readSetup(ctl *os.File) (Setup, error) {
	var s Setup
	b, _, err := recv(ctl)
	if err != nil {
		return s, err
	}
	nt, nw := int(unsafe.Sizeof(s.Termios)), int(unsafe.Sizeof(s.Winsize))
	if len(b) != 1+nt+nw+1 || b[0] != msgSetup {
		return s, errors.New("the launcher sent no terminal setup")
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&s.Termios)), nt), b[1:])
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&s.Winsize)), nw), b[1+nt:])
	s.KeepStderr = b[1+nt+nw] == 1
	return s, nil
}

// send writes one message, with fd attached when fd >= 0.
func send(ctl *os.File, b []byte, fd int) error {
	rc, err := ctl.SyscallConn()
	if err != nil {
		return err
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	var serr error
	err = rc.Write(func(s uintptr) bool {
		serr = unix.Sendmsg(int(s), b, oob, nil, 0)
		return serr != unix.EAGAIN
	})
	if err == nil {
		err = serr
	}
	return err
}

// recv reads one message and the descriptor attached to it (-1: none).
func recv(ctl *os.File) ([]byte, int, error) {
	rc, err := ctl.SyscallConn()
	if err != nil {
		return nil, -1, err
	}
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var rerr error
	err = rc.Read(func(s uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(s), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, -1, err
	}
	if n == 0 {
		return nil, -1, errors.New("the other half of the agent's terminal is gone")
	}
	fd := -1
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil && len(msgs) == 1 {
			if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
				fd = fds[0]
			}
		}
	}
	return buf[:n], fd, nil
}
