// Package pty runs the agent inside the jail on a fresh pseudo-terminal and
// relays it to the user's terminal, as script(1) does, without depending on
// script(1).
//
// The jail cannot use bwrap's --new-session: that keeps TIOCSTI away from the
// user's terminal but also cuts the agent off from SIGWINCH and ^C. Instead the
// agent gets a terminal of its own, from the jail's private devpts, and is the
// session leader and foreground process group of it. The user's terminal is put
// in raw mode, so every key (^C and ^Z included) arrives as a byte, and the
// pty's own line discipline turns it into the signal for the agent, exactly as
// the user's terminal would have. Window-size changes are copied from the
// user's terminal to the pty, and the agent's exit status is returned.
package pty

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	fd, err := fdOf(f)
	if err != nil {
		return false
	}
	return term.IsTerminal(fd)
}

// Run runs cmd and returns its exit status: the exit code, or 128+n when it
// died of signal n. The error is non-nil only when cmd could not be started;
// the status is then 127 when the program does not exist and 126 otherwise,
// as a shell would report it.
//
// When os.Stdin and os.Stdout are terminals, cmd runs on a fresh pty: its
// Stdin, Stdout and Stderr are replaced by the pty's slave (Stderr only when
// os.Stderr is a terminal too; a redirected stderr stays as it is), it becomes the session leader with
// the pty as its controlling terminal, and the user's terminal is in raw mode
// until Run returns (restored on every return path). SIGWINCH is relayed as a
// window-size change and SIGTERM, SIGHUP, SIGINT and SIGQUIT sent to this
// process are forwarded to cmd.
//
// Otherwise (stdin or stdout redirected) cmd runs with the inherited stdio (its nil Stdin, Stdout and
// Stderr become os.Stdin, os.Stdout and os.Stderr); SIGTERM and SIGHUP are
// forwarded, and SIGINT and SIGQUIT are only kept from killing this process,
// since the terminal delivers them to cmd, which shares its process group.
func Run(cmd *exec.Cmd) (int, error) {
	// With stdout redirected (`codex exec ... > out`) a pty would put its
	// CR LF line ends and the agent's terminal-only output into the file.
	if IsTerminal(os.Stdin) && IsTerminal(os.Stdout) {
		var errOut *os.File
		if !IsTerminal(os.Stderr) {
			errOut = os.Stderr // keep `2> log` working
		}
		return runTerminal(cmd, os.Stdin, os.Stdout, errOut)
	}
	return runPlain(cmd)
}

// forwarded are the signals that, sent to this process, are meant for the
// agent.
var forwarded = []os.Signal{unix.SIGTERM, unix.SIGHUP, unix.SIGINT, unix.SIGQUIT}

func runPlain(cmd *exec.Cmd) (int, error) {
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return startFailure(cmd, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	for {
		select {
		case s := <-sigs:
			if s == unix.SIGTERM || s == unix.SIGHUP {
				_ = cmd.Process.Signal(s)
			}
		case <-done:
			return exitStatus(cmd.ProcessState), nil
		}
	}
}

// runTerminal runs cmd on a fresh pty relayed to in and out; errOut, when
// not nil, is cmd's stderr instead of the pty.
func runTerminal(cmd *exec.Cmd, in, out, errOut *os.File) (int, error) {
	infd, err := fdOf(in)
	if err != nil {
		return startFailure(cmd, fmt.Errorf("reading the terminal %s: %w", in.Name(), err))
	}
	master, slave, err := openPTY()
	if err != nil {
		return startFailure(cmd, err)
	}
	defer master.Close()
	// The agent's terminal starts out like the user's (erase character,
	// UTF-8 input, size), not with the kernel's defaults.
	if tio, err := unix.IoctlGetTermios(infd, unix.TCGETS); err == nil {
		if sfd, err := fdOf(slave); err == nil {
			_ = unix.IoctlSetTermios(sfd, unix.TCSETS, tio)
		}
	}
	_ = copyWinsize(infd, master)

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, append([]os.Signal{unix.SIGWINCH}, forwarded...)...)
	defer signal.Stop(sigs)

	// Raw before the agent starts, so that nothing it prompts for can be
	// answered through the cooked terminal.
	saved, err := term.MakeRaw(infd)
	if err != nil {
		slave.Close()
		return startFailure(cmd, fmt.Errorf("putting the terminal %s in raw mode: %w", in.Name(), err))
	}
	defer term.Restore(infd, saved)

	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if errOut != nil {
		cmd.Stderr = errOut
	}
	attr := &syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		c := *cmd.SysProcAttr
		attr = &c
	}
	// A new session whose controlling terminal is the slave (the child's fd
	// 0): the agent is its session leader and foreground process group, so
	// the line discipline signals it and job control has a terminal.
	attr.Setsid, attr.Setctty, attr.Ctty = true, true, 0
	attr.Setpgid, attr.Foreground, attr.Noctty = false, false, false
	cmd.SysProcAttr = attr
	err = cmd.Start()
	slave.Close()
	if err != nil {
		return startFailure(cmd, err)
	}

	outDone := make(chan struct{})
	go func() {
		relayOutput(out, master)
		close(outDone)
	}()
	stopIn, inDone, err := relayInput(infd, master)
	if err != nil {
		stopIn = func() {}
		inDone = make(chan struct{})
		close(inDone)
	}
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	for running := true; running; {
		select {
		case s := <-sigs:
			if s == unix.SIGWINCH {
				_ = copyWinsize(infd, master)
				continue
			}
			_ = cmd.Process.Signal(s)
		case <-waited:
			running = false
		}
	}
	// What the agent wrote before it exited is still in the pty: read it
	// out. A process it left behind may hold the slave open forever, so the
	// drain is bounded.
	_ = master.SetReadDeadline(time.Now().Add(drainTimeout))
	<-outDone
	// Closing the master also unblocks a key relay stuck writing into a pty
	// that nobody reads any more.
	stopIn()
	master.Close()
	<-inDone
	return exitStatus(cmd.ProcessState), nil
}

// startFailure is Run's answer when cmd did not start.
func startFailure(cmd *exec.Cmd, err error) (int, error) {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return 127, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	return 126, fmt.Errorf("starting %s: %w", cmd.Path, err)
}

// exitStatus is the shell's view of how a process ended.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return 126
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
