package pty

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ptmxPath is the multiplexer of the devpts instance to allocate from. In the
// jail bwrap's --dev /dev gives a private devpts, so /dev/ptmx there is a
// fresh instance that no host process shares.
const ptmxPath = "/dev/ptmx"

// openPTY allocates a new pseudo-terminal. The master is non-blocking and so
// registered with Go's poller (reads honour deadlines and Close unblocks
// them); the slave is blocking, as a child's stdio must be.
//
// The slave is opened from the master with TIOCGPTPEER (Linux 4.13), which
// needs no path lookup and so cannot pick up a pts of another devpts mount;
// older kernels fall back to /dev/pts/N.
func openPTY() (master, slave *os.File, err error) {
	mfd, err := unix.Open(ptmxPath, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w (the jail needs a devpts: bwrap --dev /dev)", ptmxPath, err)
	}
	fail := func(e error) (*os.File, *os.File, error) {
		unix.Close(mfd)
		return nil, nil, e
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return fail(fmt.Errorf("unlocking the pty from %s: %w", ptmxPath, err))
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER,
		uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	name := "pty peer"
	if errno != 0 {
		if !errors.Is(errno, unix.EINVAL) && !errors.Is(errno, unix.ENOTTY) {
			return fail(fmt.Errorf("opening the pty slave of %s: %w", ptmxPath, errno))
		}
		n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
		if err != nil {
			return fail(fmt.Errorf("naming the pty slave of %s: %w", ptmxPath, err))
		}
		name = "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
		fd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("opening the pty slave %s: %w", name, err))
		}
		sfd = uintptr(fd)
	}
	return os.NewFile(uintptr(mfd), ptmxPath), os.NewFile(sfd, name), nil
}

// fdOf returns f's descriptor without f.Fd(), which would switch a
// non-blocking descriptor to blocking mode and so detach it from the poller
// (and, for a terminal, change the mode of a file description the outer
// processes share).
func fdOf(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// copyWinsize gives dst (a pty master) the window size of the terminal src.
// Setting it on the master makes the kernel send SIGWINCH to the pty's
// foreground process group, which is how the agent learns of a resize.
func copyWinsize(src int, dst *os.File) error {
	ws, err := unix.IoctlGetWinsize(src, unix.TIOCGWINSZ)
	if err != nil {
		return fmt.Errorf("reading the terminal's window size: %w", err)
	}
	d, err := fdOf(dst)
	if err != nil {
		return err
	}
	if err := unix.IoctlSetWinsize(d, unix.TIOCSWINSZ, ws); err != nil {
		return fmt.Errorf("setting the pty's window size: %w", err)
	}
	return nil
}
