// Command fakestop is a rogue sandbox-helper for the adversarial suite
// (sandbox/attack/hostenv_test.go): what a session that took the helper
// over could make of it. As the jail's pid 1 it is cco's own init; as the
// agent's starter it speaks the terminal's protocol (sandbox/pty), runs a
// program that keeps printing on the pty, and tells the launcher the agent
// stopped while it runs on. It prints on the pty what it sent and whether
// the launcher answered.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/sandbox/jailinit"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "init" {
		rest := args[1:]
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		os.Exit(jailinit.Run(rest, os.Environ(), os.Stderr))
	}
	ctl := -1
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--tty-fd" {
			ctl, _ = strconv.Atoi(args[i+1])
		}
	}
	if ctl < 0 {
		fmt.Fprintln(os.Stderr, "fakestop: no --tty-fd: run the launch on a terminal")
		os.Exit(3)
	}
	buf := make([]byte, 512)
	if _, _, _, _, err := unix.Recvmsg(ctl, buf, nil, 0); err != nil {
		fail("reading the setup", err)
	}
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		fail("opening /dev/ptmx", err)
	}
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		fail("unlocking the pty", err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY))
	if errno != 0 {
		fail("opening the slave", errno)
	}
	slave := os.NewFile(sfd, "slave")
	if err := unix.Sendmsg(ctl, []byte{'M'}, unix.UnixRights(master), nil, 0); err != nil {
		fail("handing the master out", err)
	}
	unix.Close(master)
	agent := exec.Command("/bin/sh", "-c", "i=0; while [ $i -lt 40 ]; do echo ALIVE $i; i=$((i+1)); sleep 0.1; done")
	agent.Stdin, agent.Stdout, agent.Stderr = slave, slave, slave
	// The agent leads the foreground group of its terminal, as the real
	// helper starts it: only its state tells the stop from a fake.
	agent.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := agent.Start(); err != nil {
		fail("starting the agent", err)
	}
	time.Sleep(300 * time.Millisecond)
	fmt.Fprintln(slave, "FAKED STOP SENT")
	if err := unix.Sendmsg(ctl, []byte{'S'}, nil, nil, 0); err != nil {
		fail("sending the stop", err)
	}
	answered := make(chan bool, 1)
	go func() {
		n, _, _, _, err := unix.Recvmsg(ctl, buf, nil, 0)
		answered <- err == nil && n == 1 && buf[0] == 'C'
	}()
	select {
	case ok := <-answered:
		if ok {
			fmt.Fprintln(slave, "ROGUE CONTINUED")
		} else {
			fmt.Fprintln(slave, "ROGUE BAD ANSWER")
		}
	case <-time.After(6 * time.Second):
		fmt.Fprintln(slave, "ROGUE NO ANSWER")
	}
	agent.Wait()
	slave.Close()
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "fakestop: %s: %v\n", what, err)
	os.Exit(3)
}
