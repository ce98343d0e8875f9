package supervise

import (
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// Grace is how long after SIGTERM or SIGHUP the agent has to end before
// bwrap, and the jail with it, is killed: the session ends within it, well
// inside the 5 seconds a service manager or a closed terminal waits.
const Grace = 3 * time.Second

// Jail is a started bwrap to supervise.
type Jail struct {
	Proc   *Process
	Status *Status
	// Failed, when it says something, ends the session: bwrap is killed
	// (the egress proxy cannot serve).
	Failed <-chan error
	// Up, when set, runs once the jail's first process exists and before
	// it is let go (bwrap's --block-fd): the launcher's endpoint in the
	// jail's network namespace. Its error kills the jail.
	Up func(childPID int) error
	// Started, when set, is told the jail's pid 1 as soon as bwrap
	// reports it (0: the jail was never built).
	Started func(childPID int)
}

// Result is how a jail ended.
type Result struct {
	Status syscall.WaitStatus
	// Err is a failure to wait for bwrap.
	Err error
	// UpErr is Up's failure: the jail was killed before the agent ran.
	UpErr error
	// ChildPID is the jail's first process (0: bwrap failed before it).
	ChildPID int
	// Ran reports whether the command ran (bwrap's exit-code line).
	Ran bool
	// EndedBy is the SIGTERM or SIGHUP that ended the session, if one did.
	EndedBy syscall.Signal
}

// Wait passes signals on to the agent until bwrap ends, and reaps it.
//
// What starts threads of its own (the runtime's signal loop) starts now,
// while bwrap builds the jail: on a small machine every thread start before
// the fork is a delay of the launch. A signal in the moments before is the
// default's: the launcher dies, bwrap and the jail with it
// (--die-with-parent), and the next launch removes what it left.
//
// SIGTERM and SIGHUP end the session: the agent gets the signal, and bwrap
// (with the jail) is killed should it still run Grace later, so that an
// agent that ignores them cannot hold the session.
func (j *Jail) Wait() Result {
	// From here on the launcher mostly waits: one processor keeps its
	// goroutines on one thread, where a thread start, or a wake-up across
	// processors, costs about a millisecond on a small virtual machine.
	// (Set after the fork, its stop-the-world is off the launch's path.)
	runtime.GOMAXPROCS(1)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT)
	// One goroutine forwards signals and acts on a proxy that cannot
	// serve; the main one learns the jail's pid and waits, and never
	// waits for it: the launch's own path has no handoff.
	child := make(chan int, 1)
	stop := make(chan struct{})
	var endedBy atomic.Int32
	failed := j.Failed
	go func() {
		pid, known := 0, false
		var pending []syscall.Signal
		var grace <-chan time.Time
		for {
			// The jail's pid is waited for only with a signal to pass
			// on: a signal while bwrap builds the jail is forwarded
			// once it is built, and the grace runs meanwhile.
			var pidC chan int
			if !known && len(pending) > 0 {
				pidC = child
			}
			select {
			case pid = <-pidC:
				known = true
				for _, s := range pending {
					Forward(pid, s)
				}
				pending = nil
			case s := <-sigs:
				sig := s.(syscall.Signal)
				if !known {
					select {
					case pid = <-child:
						known = true
					default:
					}
				}
				if known {
					Forward(pid, sig)
				} else {
					pending = append(pending, sig)
				}
				if (sig == syscall.SIGTERM || sig == syscall.SIGHUP) && grace == nil {
					endedBy.Store(int32(sig))
					grace = time.After(Grace)
				}
			case <-grace:
				j.Proc.Signal(syscall.SIGKILL)
				grace = nil
			case <-failed:
				j.Proc.Signal(syscall.SIGKILL)
				failed = nil
			case <-stop:
				return
			}
		}
	}()
	var r Result
	r.ChildPID = j.Status.ChildPID()
	if j.Started != nil {
		j.Started(r.ChildPID)
	}
	if r.ChildPID != 0 && j.Up != nil {
		if r.UpErr = j.Up(r.ChildPID); r.UpErr != nil {
			j.Proc.Signal(syscall.SIGKILL)
		}
	}
	child <- r.ChildPID
	r.Status, r.Err = j.Proc.Wait()
	// Signals stay caught until the process exits: one arriving during the
	// clean-up must not cut it short.
	close(stop)
	r.EndedBy = syscall.Signal(endedBy.Load())
	r.Ran = r.ChildPID != 0 && j.Status.Ran()
	return r
}
