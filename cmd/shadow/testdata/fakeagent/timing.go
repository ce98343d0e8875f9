package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// timeRuns runs each of p.Runs in turn, p.N rounds, with its output to
// /dev/null, and reports each one's median: measured inside the jail, so
// that a nested launch is timed beside a direct exec in the same place.
func timeRuns(p *Params) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		report["time_err"] = err.Error()
		return
	}
	defer null.Close()
	times := make([][]time.Duration, len(p.Runs))
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}}
	for i := 0; i < p.N; i++ {
		for j, argv := range p.Runs {
			start := time.Now()
			pid, err := syscall.ForkExec(argv[0], argv, attr)
			if err != nil {
				report["time_err"] = fmt.Sprintf("%s: %v", argv[0], err)
				return
			}
			var ws syscall.WaitStatus
			for {
				if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
					break
				}
			}
			times[j] = append(times[j], time.Since(start))
			if ws.ExitStatus() != 0 {
				report["time_err"] = fmt.Sprintf("%v exited %d", argv, ws.ExitStatus())
				return
			}
		}
	}
	for j, ts := range times {
		slices.Sort(ts)
		report["time:"+strconv.Itoa(j)] = strconv.FormatInt(ts[len(ts)/2].Microseconds(), 10)
	}
}
