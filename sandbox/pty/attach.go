package pty

import (
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Terminal is the launcher's half of the agent's terminal (see control.go):
// it holds the user's terminal, relays it to the pty the jail hands out,
// and gives it back to the shell while the agent is stopped.
type Terminal struct {
	ctl     *os.File
	in, out *os.File
	infd    int
	// stopped, when set, tells whether the agent has really stopped,
	// given the foreground process group of its terminal (a host pid, or
	// 0): a stop message it does not confirm leaves the launcher running.
	stopped func(foreground int) bool

	mu      sync.Mutex
	master  *os.File
	saved   *term.State
	stopIn  func()
	inDone  chan struct{}
	outDone chan struct{}
	served  chan struct{} // closed when the control socket is done
}

// Attach starts serving the control socket ctl for the user's terminal in
// (keys) and out (the agent's output). The terminal turns raw only once the
// jail hands the pty out; Close gives it back.
func Attach(ctl, in, out *os.File) (*Terminal, error) { return AttachChecked(ctl, in, out, nil) }

// AttachChecked is Attach for a launcher that does not take the jail's
// word for a stop: on each stop message it asks stopped, with the
// foreground process group of the agent's terminal as the kernel tells it
// (TIOCGPGRP on the master, in this process's pid namespace), which reads
// the agent's state where the jail cannot forge it (the host's /proc); it
// gives the terminal back and stops itself only when the agent has really
// stopped. Either way the jail's half is told to continue: an agent that
// did stop is continued at once, as if ^Z had not been typed.
func AttachChecked(ctl, in, out *os.File, stopped func(foreground int) bool) (*Terminal, error) {
	fd, err := fdOf(in)
	if err != nil {
		return nil, err
	}
	t := &Terminal{ctl: ctl, in: in, out: out, infd: fd, stopped: stopped, served: make(chan struct{})}
	go t.serve()
	return t, nil
}

func (t *Terminal) serve() {
	defer close(t.served)
	winch := make(chan os.Signal, 4)
	signal.Notify(winch, unix.SIGWINCH)
	defer signal.Stop(winch)
	msgs := make(chan [2]int, 1) // kind, fd
	go func() {
		defer close(msgs)
		for {
			b, fd, err := recv(t.ctl)
			if err != nil || len(b) != 1 {
				if fd >= 0 {
					unix.Close(fd)
				}
				return
			}
			msgs <- [2]int{int(b[0]), fd}
		}
	}()
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return
			}
			switch {
			case m[0] == msgMaster && m[1] >= 0 && t.master == nil:
				// Non-blocking, so that Go's poller gives the drain's
				// reads a deadline.
				_ = unix.SetNonblock(m[1], true)
				t.attach(os.NewFile(uintptr(m[1]), "pty master"))
			case m[0] == msgStopped && t.master != nil:
				if t.stopped == nil || t.stopped(t.foreground()) {
					t.suspend()
				}
				_ = send(t.ctl, []byte{msgContinue}, -1)
			default:
				if m[1] >= 0 {
					unix.Close(m[1])
				}
			}
		case <-winch:
			t.mu.Lock()
			if t.master != nil {
				_ = copyWinsize(t.infd, t.master)
			}
			t.mu.Unlock()
		}
	}
}

// foreground is the foreground process group of the agent's terminal, or
// 0 when the kernel does not say.
func (t *Terminal) foreground() int {
	fd, err := fdOf(t.master)
	if err != nil {
		return 0
	}
	pg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return 0
	}
	return pg
}

// attach puts the user's terminal in raw mode and starts the relays.
func (t *Terminal) attach(master *os.File) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.master = master
	_ = copyWinsize(t.infd, master)
	t.raw()
	t.outDone = make(chan struct{})
	go func() {
		relayOutput(t.out, master)
		close(t.outDone)
	}()
}

// raw makes the terminal raw and starts relaying keys (t.mu held).
func (t *Terminal) raw() {
	if s, err := term.MakeRaw(t.infd); err == nil {
		t.saved = s
	}
	stop, done, err := relayInput(t.infd, t.master)
	if err != nil {
		stop, done = func() {}, make(chan struct{})
		close(done)
	}
	t.stopIn, t.inDone = stop, done
}

// cooked stops relaying keys and gives the terminal its settings back (t.mu
// held).
func (t *Terminal) cooked() {
	if t.stopIn != nil {
		t.stopIn()
		<-t.inDone
		t.stopIn = nil
	}
	if t.saved != nil {
		_ = term.Restore(t.infd, t.saved)
		t.saved = nil
	}
}

// suspend gives the terminal back to the shell and stops this process, as
// the agent stopped; once continued (fg), the terminal is raw again.
func (t *Terminal) suspend() {
	t.mu.Lock()
	t.cooked()
	t.mu.Unlock()
	stopSelf()
	t.mu.Lock()
	// The window may have changed meanwhile, and the shell may have put
	// the terminal in its own mode.
	_ = copyWinsize(t.infd, t.master)
	t.raw()
	t.mu.Unlock()
}

// stopSelf stops this process until it is continued. The signal goes to
// this thread: sent to the process, another thread could take it while
// this one ran on, and made the terminal raw again before the stop.
var stopSelf = func() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Tgkill(os.Getpid(), unix.Gettid(), syscall.SIGSTOP)
}

// Close ends the relay once the jail has ended: the agent's last output is
// read out of the pty (bounded: a process it left behind may hold the slave
// open), and the user's terminal gets its settings back.
func (t *Terminal) Close() {
	t.ctl.Close()
	<-t.served
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.master != nil {
		_ = t.master.SetReadDeadline(time.Now().Add(drainTimeout))
		<-t.outDone
	}
	t.cooked()
	if t.master != nil {
		t.master.Close()
	}
}
