package sandbox

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/sandbox/pty"
)

// donation is the files a launch hands to bwrap, each numbered as Argv
// writes its flag (in the manner of gVisor's runsc/donation): the child's
// descriptor n is fds[n-3], so a flag cannot name another file than its
// own. The first failure stops the donation, and is the launch's. The
// launcher's copies are plain descriptors: they are only handed on.
type donation struct {
	files []int
	err   error
	// prog is the seccomp program.
	prog []byte
	// statusR is the read end of --json-status-fd's pipe.
	statusR *os.File
	// blockW, when the launcher makes the endpoint, is the write end of
	// --block-fd's pipe: the agent starts once it is written or closed.
	blockW   *os.File
	endpoint bool
	// handbackR is the launcher's end of the helper's hand-back socket.
	handbackR *os.File
	helper    bool
	// ttyHost is the launcher's end of the agent's terminal's control
	// socket, with setup already written to it.
	ttyHost *os.File
	setup   *pty.Setup
}

// give adds f and returns its number in bwrap. The donation owns f's
// descriptor from then on.
func (d *donation) give(f *os.File) int {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return d.fail(fmt.Errorf("a descriptor for the jail: %w", err))
	}
	return d.giveFD(fd)
}

// giveFD adds descriptor fd and returns its number in bwrap.
func (d *donation) giveFD(fd int) int {
	d.files = append(d.files, fd)
	return 2 + len(d.files)
}

func (d *donation) fail(err error) int {
	if d.err == nil {
		d.err = err
	}
	return 0
}

func (d *donation) seccomp() int { return d.dataFile(d.prog) }

func (d *donation) status() int {
	r, w, err := os.Pipe()
	if err != nil {
		return d.fail(fmt.Errorf("a pipe for the jail: %w", err))
	}
	d.statusR = r
	return d.give(w)
}

func (d *donation) block() int {
	if !d.endpoint {
		return 0
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return d.fail(fmt.Errorf("a pipe for the jail: %w", err))
	}
	d.blockW = os.NewFile(uintptr(p[1]), "jail-block")
	return d.give(os.NewFile(uintptr(p[0]), "jail-block"))
}

func (d *donation) handback() int {
	if !d.helper {
		return 0
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return d.fail(fmt.Errorf("a socket for the jail's proxy endpoint: %w", err))
	}
	d.handbackR = os.NewFile(uintptr(fds[0]), "endpoint-handback")
	return d.give(os.NewFile(uintptr(fds[1]), "endpoint-handback"))
}

func (d *donation) tty() int {
	if d.setup == nil {
		return 0
	}
	host, jail, err := pty.NewControl()
	if err != nil {
		return d.fail(err)
	}
	// Written now, read by the helper first: no round trip on the way to
	// the agent's start.
	if err := pty.SendSetup(host, *d.setup); err != nil {
		host.Close()
		jail.Close()
		return d.fail(fmt.Errorf("the agent's terminal: %w", err))
	}
	d.ttyHost = host
	return d.give(jail)
}

func (d *donation) dataFile(data []byte) int {
	if d.err != nil {
		return 0
	}
	r, err := dataPipe(data)
	if err != nil {
		return d.fail(err)
	}
	return d.giveFD(r)
}

// source opens a bind's source (openSource): what is bound is what was
// planned, whatever a session or a user swapped in since.
func (d *donation) source(b *Bind) (int, bool) {
	if d.err != nil {
		return 0, false
	}
	fd, skip, err := openSourceFD(b)
	if err != nil || skip {
		d.fail(err)
		return 0, false
	}
	return d.giveFD(fd), true
}

// fds are the child's descriptors: the standard three, then the donated.
func (d *donation) fds(stdio [3]uintptr) []uintptr {
	out := append(make([]uintptr, 0, 3+len(d.files)), stdio[:]...)
	for _, fd := range d.files {
		out = append(out, uintptr(fd))
	}
	return out
}

// release closes the launcher's copies of the donated files (bwrap has
// its own once started).
func (d *donation) release() {
	for _, fd := range d.files {
		unix.Close(fd)
	}
	d.files = nil
}

// abandon closes everything, the launcher's ends too: the launch stops.
func (d *donation) abandon() {
	d.release()
	for _, f := range []*os.File{d.statusR, d.blockW, d.handbackR, d.ttyHost} {
		if f != nil {
			f.Close()
		}
	}
}

// dataPipe is the read end of a pipe that holds data: bwrap reads it once it
// runs. Up to PIPE_BUF bytes always fit in a pipe, so the write is done
// here; more is written by a goroutine, which ends once bwrap has read it
// or has gone (EPIPE). Plain system calls: these descriptors are only handed
// on, never polled.
func dataPipe(data []byte) (int, error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return -1, fmt.Errorf("a pipe for the jail: %w", err)
	}
	r, w := p[0], p[1]
	write := func() error {
		defer syscall.Close(w)
		for b := data; len(b) > 0; {
			n, err := syscall.Write(w, b)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	}
	if len(data) > 4096 {
		go write()
		return r, nil
	}
	if err := write(); err != nil {
		syscall.Close(r)
		return -1, fmt.Errorf("a pipe for the jail: %w", err)
	}
	return r, nil
}
