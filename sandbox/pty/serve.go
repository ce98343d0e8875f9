package pty

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/cco-dev/cco/sandbox/jailinit"

	"golang.org/x/sys/unix"
)

// Serve is the jail's half of the agent's terminal (see control.go): it
// reads the launcher's Setup from ctl, allocates a pty of the jail's devpts
// with the user's settings and size, hands the master out over ctl, and runs
// cmd on the slave as the foreground process group. When cmd stops (^Z), it
// tells the launcher and continues cmd when the launcher says so.
//
// This process becomes the session leader whose controlling terminal is
// the slave, and cmd gets a process group of its own in that session: a
// process group whose parent lies in another session is orphaned, and the
// kernel discards ^Z's SIGTSTP (and an agent's own) sent to one, so that an
// agent that is its own session leader can never be suspended. SIGTERM, SIGHUP, SIGINT and SIGQUIT sent to this process are
// passed on to cmd. It returns cmd's exit status (128+n for signal n); the
// error is non-nil only when cmd could not be started.
func Serve(cmd *exec.Cmd, ctl *os.File) (int, error) {
	// The agent must not inherit the launcher's socket.
	if fd, err := fdOf(ctl); err == nil {
		unix.CloseOnExec(fd)
	}
	setup, err := readSetup(ctl)
	if err != nil {
		return startFailure(cmd, fmt.Errorf("the agent's terminal: %w", err))
	}
	if _, err := unix.Setsid(); err != nil {
		// A process group leader cannot: it must lead its session already
		// (bwrap --new-session).
		if sid, _ := unix.Getsid(0); sid != os.Getpid() {
			return startFailure(cmd, fmt.Errorf("a session for the agent's terminal: %w", err))
		}
	}
	master, slave, err := openPTY()
	if err != nil {
		return startFailure(cmd, err)
	}
	sfd, err := fdOf(slave)
	if err == nil {
		err = unix.IoctlSetInt(sfd, unix.TIOCSCTTY, 0)
	}
	if err != nil {
		master.Close()
		slave.Close()
		return startFailure(cmd, fmt.Errorf("taking the agent's terminal: %w", err))
	}
	_ = unix.IoctlSetTermios(sfd, unix.TCSETS, &setup.Termios)
	if setup.Winsize.Row != 0 {
		_ = unix.IoctlSetWinsize(sfd, unix.TIOCSWINSZ, &setup.Winsize)
	}
	mfd, err := fdOf(master)
	if err == nil {
		err = send(ctl, []byte{msgMaster}, mfd)
	}
	// Only the launcher holds the master from now on: when the agent and
	// what it started are gone, its reads end (EIO).
	master.Close()
	if err != nil {
		slave.Close()
		return startFailure(cmd, fmt.Errorf("handing the agent's terminal out: %w", err))
	}

	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if setup.KeepStderr {
		cmd.Stderr = os.Stderr
	}
	attr := &syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		c := *cmd.SysProcAttr
		attr = &c
	}
	// The foreground process group of the slave (Foreground takes this
	// process's descriptor): the line discipline signals the agent, and
	// job control has a terminal.
	attr.Setsid, attr.Setctty, attr.Noctty = false, false, false
	attr.Setpgid, attr.Foreground, attr.Ctty = true, true, sfd
	cmd.SysProcAttr = attr
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	// Through jailinit: where this process is the jail's pid 1, its
	// reaper leaves the agent's status to the wait4 below.
	release, err := jailinit.Start(cmd)
	slave.Close()
	if err != nil {
		return startFailure(cmd, err)
	}
	defer release()
	pid := cmd.Process.Pid
	go func() {
		for s := range sigs {
			_ = syscall.Kill(pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 126, fmt.Errorf("waiting for %s: %w", cmd.Path, err)
		}
		if ws.Stopped() {
			// The launcher gives the terminal back and stops itself;
			// its 'C' comes when the shell continues it. Should the
			// launcher be gone, the agent is continued all the same, to
			// meet the end of its session.
			if send(ctl, []byte{msgStopped}, -1) == nil {
				for {
					b, _, err := recv(ctl)
					if err != nil || len(b) == 1 && b[0] == msgContinue {
						break
					}
				}
			}
			_ = syscall.Kill(-pid, syscall.SIGCONT)
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ws.ExitStatus(), nil
	}
}
