package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// signalCause records which signal ended the run.
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return "interrupted by " + s.sig.String() }

// notifyContext is cancelled by the first SIGINT or SIGTERM: the step in
// flight sees its context end, rolls back, and no further step starts.
func notifyContext(parent context.Context, _ io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(signalCause{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
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
