// Package agentio is the test agents' side of the real-jail tests: the
// parameters a test passes after the agent's "probe" argument, and how a
// result is written in a report. It is linked into the agent binaries, so
// it imports nothing of the testing machinery.
package agentio

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Params decodes into v the argument after "probe" in args (the vendor's
// flags come before it). No "probe" leaves v as it is.
func Params(args []string, v any) error {
	for i, a := range args {
		if a == "probe" && i+1 < len(args) {
			if err := json.Unmarshal([]byte(args[i+1]), v); err != nil {
				return fmt.Errorf("bad params: %w", err)
			}
		}
	}
	return nil
}

// Result is how a call ended, for a report: "ok", the errno's name
// (EPERM, ENOENT), or the error's text.
func Result(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}
