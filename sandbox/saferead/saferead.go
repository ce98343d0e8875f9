// Package saferead reads the files a session may have planted in a home or
// a workspace without following a link, blocking on a FIFO or reading
// without bound.
package saferead

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxStateFile caps what the shadow reads of one file in a home or a
// workspace: a state or config file is far smaller, and a larger one is
// refused rather than read.
const MaxStateFile = 4 << 20

// errNotRegular is ReadCapped's answer for a FIFO, a device, a socket or a
// directory.
var errNotRegular = errors.New("not a regular file")

// ReadCapped reads a file a session may have planted: opened with
// O_NOFOLLOW (a link is refused, never followed) and O_NONBLOCK (a FIFO
// cannot hold the open), it must be a regular file of at most MaxStateFile
// bytes. Every read of a home or workspace file goes through it, so that no
// link to /dev/zero, FIFO or device can hang or flood a launch.
func ReadCapped(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("reading %s: %w", path, errNotRegular)
	}
	if fi.Size() > MaxStateFile {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", path, MaxStateFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxStateFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxStateFile {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", path, MaxStateFile)
	}
	return b, nil
}
