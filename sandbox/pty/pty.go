// Package pty runs the agent inside the jail on a fresh pseudo-terminal and
// relays it to the user's terminal from outside the jail, as script(1)
// does, without depending on script(1).
//
// The jail cannot use bwrap's --new-session: that keeps TIOCSTI away from the
// user's terminal but also cuts the agent off from SIGWINCH and ^C. Instead the
// agent gets a terminal of its own, from the jail's private devpts, and is the
// session leader and foreground process group of it. The user's terminal is put
// in raw mode, so every key (^C and ^Z included) arrives as a byte, and the
// pty's own line discipline turns it into the signal for the agent, exactly as
// the user's terminal would have. Window-size changes are copied from the
// user's terminal to the pty, ^Z that stops the agent gives the shell its
// terminal back, and the agent's exit status is returned. The user's
// terminal stays outside the jail: see control.go.
package pty

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/cco-dev/cco/sandbox/jailinit"

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

// control, when set (UseControl), is the launcher's socket for the agent's
// terminal: Run then serves it (Serve) instead of a terminal of its own.
var control *os.File

// UseControl makes Run run every command on a pty handed out over ctl to
// the launcher, which holds the user's terminal (the in-jail helper's
// mode: the jail never holds the user's terminal).
func UseControl(ctl *os.File) {
	// The agent must not inherit the launcher's socket.
	if fd, err := fdOf(ctl); err == nil {
		unix.CloseOnExec(fd)
	}
	control = ctl
}

// Controlled reports whether Run serves a launcher's terminal (UseControl).
func Controlled() bool { return control != nil }

// Run runs cmd and returns its exit status: the exit code, or 128+n when it
// died of signal n. The error is non-nil only when cmd could not be started;
// the status is then 127 when the program does not exist and 126 otherwise,
// as a shell would report it.
//
// With a control socket (UseControl), cmd runs on a fresh pty whose master
// the launcher relays (Serve). Otherwise, when os.Stdin and os.Stdout are
// terminals, both halves run here: cmd on a fresh pty, the user's terminal
// raw and relayed until Run returns (restored on every return path); ^Z
// that stops cmd stops this process too, and continuing it continues cmd.
// Its Stdin, Stdout and Stderr are the pty's slave (Stderr only when
// os.Stderr is a terminal too; a redirected stderr stays as it is), it is
// the session leader with the pty as its controlling terminal. SIGWINCH is
// relayed as a window-size change and SIGTERM, SIGHUP, SIGINT and SIGQUIT
// sent to this process are forwarded to cmd.
//
// Otherwise (stdin or stdout redirected) cmd runs with the inherited stdio (its nil Stdin, Stdout and
// Stderr become os.Stdin, os.Stdout and os.Stderr); SIGTERM and SIGHUP are
// forwarded, and SIGINT and SIGQUIT are only kept from killing this process,
// since the terminal delivers them to cmd, which shares its process group.
func Run(cmd *exec.Cmd) (int, error) {
	if control != nil {
		return Serve(cmd, control)
	}
	// With stdout redirected (`codex exec ... > out`) a pty would put its
	// CR LF line ends and the agent's terminal-only output into the file.
	if IsTerminal(os.Stdin) && IsTerminal(os.Stdout) {
		return runTerminal(cmd, os.Stdin, os.Stdout, !IsTerminal(os.Stderr))
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
	// Through jailinit: where this process is the jail's pid 1, its
	// reaper leaves cmd's status to the Wait below.
	release, err := jailinit.Start(cmd)
	if err != nil {
		return startFailure(cmd, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		release()
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

// runTerminal runs both halves of the agent's terminal in this process:
// Serve for cmd, a Terminal for in and out; keepStderr leaves cmd's stderr
// this process's (a redirected one).
func runTerminal(cmd *exec.Cmd, in, out *os.File, keepStderr bool) (int, error) {
	setup, err := SetupOf(in, keepStderr)
	if err != nil {
		return startFailure(cmd, fmt.Errorf("reading the terminal %s: %w", in.Name(), err))
	}
	host, jail, err := NewControl()
	if err != nil {
		return startFailure(cmd, err)
	}
	defer jail.Close()
	if err := SendSetup(host, setup); err != nil {
		host.Close()
		return startFailure(cmd, err)
	}
	t, err := Attach(host, in, out)
	if err != nil {
		host.Close()
		return startFailure(cmd, err)
	}
	code, err := Serve(cmd, jail)
	jail.Close()
	t.Close()
	return code, err
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
