package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

// stubborn and plant are the modes of the session-end tests.
//
// stubborn ignores SIGTERM and SIGHUP, as a hung agent would, and sleeps:
// only the shadow's bound ends its session.
//
// plant leaves in the workspace what would hang or flood a careless reader
// after the session: a new repository whose config is a FIFO, one whose
// config is a link to /dev/zero, and one whose config includes a FIFO.
func stubborn(p *Params) {
	if p.Mode == "plant" {
		for _, d := range []string{"fifo/.git", "zero/.git", "incl/.git"} {
			os.MkdirAll(d, 0o755)
		}
		syscall.Mkfifo("fifo/.git/config", 0o644)
		os.Symlink("/dev/zero", "zero/.git/config")
		syscall.Mkfifo("incl/.git/pipe", 0o644)
		os.WriteFile("incl/.git/config", []byte("[include]\n\tpath = pipe\n"), 0o644)
		os.Exit(0)
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP)
	os.WriteFile("started-"+p.Tag, nil, 0o644)
	time.Sleep(time.Hour)
}
