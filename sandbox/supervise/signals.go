package supervise

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Forward sends s to the agent: the child of bwrap's pid-1 reaper (whose
// host pid bwrap reported). The jail is in a session and a process group
// of its own, so a signal the terminal sends (^C, ^\) reaches only the
// launcher, which passes it on here.
func Forward(reaper int, s syscall.Signal) {
	if reaper <= 0 {
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
