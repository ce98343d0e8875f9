package pty

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// drainTimeout bounds how long, after the agent exited, its last output is
// read from the pty while something else still holds the pty open.
const drainTimeout = 250 * time.Millisecond

// relayOutput copies the pty's output to the user's terminal until the pty
// reports that no process holds its slave any more (EIO) or its read
// deadline passes.
//
// When the terminal can no longer be written (it hung up), the output is
// still read and dropped, so that the agent is never left blocked writing
// into a pty that nobody reads.
func relayOutput(out io.Writer, master *os.File) {
	buf := make([]byte, 32*1024)
	for {
		n, err := master.Read(buf)
		if n > 0 && out != nil {
			if _, werr := out.Write(buf[:n]); werr != nil {
				out = nil
			}
		}
		if err != nil {
			return
		}
	}
}

// relayInput copies the user's keys from the terminal descriptor in to the
// pty until stop is called or the terminal hangs up; done is closed when it
// has returned.
//
// It polls in together with a pipe that stop writes to, instead of reading
// os.Stdin: a read blocked on the terminal could not be interrupted, and
// making the terminal non-blocking would change the file description that
// the processes outside the jail share.
func relayInput(in int, master *os.File) (stop func(), done chan struct{}, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	done = make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(p[0])
		buf := make([]byte, 32*1024)
		fds := []unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}, {Fd: int32(p[0]), Events: unix.POLLIN}}
		for {
			fds[0].Revents, fds[1].Revents = 0, 0
			if _, err := unix.Poll(fds, -1); err != nil {
				if errors.Is(err, unix.EINTR) {
					continue
				}
				return
			}
			if fds[1].Revents != 0 {
				return
			}
			if fds[0].Revents&unix.POLLNVAL != 0 {
				return
			}
			if fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) == 0 {
				continue
			}
			n, err := unix.Read(in, buf)
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			if n <= 0 {
				return
			}
			if _, err := master.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	stop = func() {
		_, _ = unix.Write(p[1], []byte{0})
		unix.Close(p[1])
	}
	return stop, done, nil
}
