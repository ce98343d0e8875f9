package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// signalCause records which signal ended the run.
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return "interrupted by " + s.sig.String() }

// stopGrace is how long the step in flight has, after a signal, to roll
// back and let the run end by itself.
var stopGrace = 2 * time.Second

// notifyContext is cancelled by the first SIGINT or SIGTERM: the step in
// flight sees its context end, rolls back, and no further step starts. A
// run that has not ended stopGrace later (a step stuck in a system call
// that no context reaches), or a second signal, ends the process at once
// with the same exit code. That is safe at any point: every write is a
// rename of a finished file, the receipt records pending bytes before they
// land, the lock is a flock that dies with the process, and the next run
// removes a staging directory left behind.
func notifyContext(parent context.Context, stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		var s os.Signal
		select {
		case s = <-ch:
			cancel(signalCause{s})
		case <-done:
			return
		}
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		why := fmt.Sprintf("the step in flight did not stop within %v", stopGrace)
		select {
		case <-done:
			return
		case <-t.C:
		case s2 := <-ch:
			why = "a second " + s2.String()
		}
		fmt.Fprintf(stderr, "cco-install: interrupted (%s: stopped at once; the next run finishes or undoes what it left)\n", why)
		os.Exit(interruptCode(ctx))
	}()
	return ctx, func() { signal.Stop(ch); close(done); cancel(nil) }
}

func interrupted(ctx context.Context) bool {
	_, ok := context.Cause(ctx).(signalCause)
	return ok
}

// interruptCode is the shell's convention: 128 + the signal's number.
func interruptCode(ctx context.Context) int {
	if sc, ok := context.Cause(ctx).(signalCause); ok && sc.sig == syscall.SIGTERM {
		return 143
	}
	return 130
}
