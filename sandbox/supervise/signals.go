package supervise

import "syscall"

// Forward sends s to the agent: the first child of the jail's pid 1 (whose
// host pid bwrap reported), the helper or the agent itself. The jail is in
// a session and a process group of its own, so a signal the terminal sends
// (^C, ^\) reaches only the launcher, which passes it on here.
func Forward(reaper int, s syscall.Signal) {
	if reaper <= 0 {
		return
	}
	target := firstChild(reaper)
	if target == 0 {
		target = reaper
	}
	syscall.Kill(target, s)
}
