package supervise

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Forward sends s to the agent: the child of bwrap's pid-1 reaper (whose
// host pid bwrap reported). A ^C typed at the terminal already reached the
// agent, so SIGINT and SIGQUIT are forwarded only when this process is not
// in the terminal's foreground.
func Forward(reaper int, s syscall.Signal) {
	if reaper <= 0 {
		return
	}
	if (s == syscall.SIGINT || s == syscall.SIGQUIT) && inForeground() {
		return
	}
	target := reaper
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(reaper) + "/task/" + strconv.Itoa(reaper) + "/children"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				target = n
			}
		}
	}
	syscall.Kill(target, s)
}

func inForeground() bool {
	f, err := os.Open("/dev/tty")
	if err != nil {
		return false
	}
	defer f.Close()
	pg, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pg == syscall.Getpgrp()
}
