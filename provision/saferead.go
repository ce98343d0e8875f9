package provision

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/cco-dev/cco/internal/safetext"
)

// MaxHomeFile caps what cco-install reads of one file in a user's home: a
// shell start-up file is far smaller, and a larger one (a sparse file of
// 64 GB, say) is refused by name rather than read.
const MaxHomeFile = 4 << 20

// RefusedError is a file in a user's home that cco-install does not read:
// not a regular file (a FIFO would hold the read, and the lock, forever; a
// device would never end), or larger than MaxHomeFile.
type RefusedError struct {
	Path string // as the host sees it
	Why  string
}

func (e *RefusedError) Error() string {
	// A user names the files in a home: the one printer shows the name.
	return fmt.Sprintf("%s %s: cco-install does not read it (make it a regular file under %d MiB, or remove it, to have it checked)", safetext.Escape(e.Path), e.Why, MaxHomeFile>>20)
}

// noFollowOpener opens a path without following any symlink, with
// O_NONBLOCK: Root.OpenNoFollow, and so a home's.
type noFollowOpener interface {
	OpenNoFollow(target string) (*os.File, error)
}

// ReadCapped reads a file that a user controls: opened by r.OpenNoFollow
// (no symlink followed, O_NONBLOCK so that a FIFO cannot hold the open,
// nothing but a regular file), it must be at most MaxHomeFile bytes. Every
// read of a file in a home goes through it.
func ReadCapped(r noFollowOpener, target string) ([]byte, error) {
	f, err := r.OpenNoFollow(target)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxHomeFile {
		return nil, &RefusedError{Path: f.Name(), Why: "is " + sizeOf(fi.Size()) + ", more than the " + sizeOf(MaxHomeFile) + " it may be"}
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxHomeFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	if len(b) > MaxHomeFile {
		return nil, &RefusedError{Path: f.Name(), Why: "grew past " + sizeOf(MaxHomeFile) + " while it was read"}
	}
	return b, nil
}

// regularOnly refuses, by name, a file that f (opened with O_NONBLOCK) is
// not a regular file: what it is instead says why.
func regularOnly(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		return nil
	}
	return &RefusedError{Path: f.Name(), Why: "is " + typeOf(fi.Mode()) + ", not a regular file"}
}

func typeOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	}
	return "a " + m.Type().String() + " file"
}

// sizeOf names a size for people: "64 GiB", "4 MiB", "812 bytes".
func sizeOf(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// HomeProblem is the warning for a file of a home that a check could not
// read, naming it ("" for none). A run without root (status, a dry run)
// cannot read into a closed home: it says once that it skipped the home,
// and no more about each file.
func HomeProblem(path string, err error) string {
	var re *RefusedError
	switch {
	case errors.Is(err, fs.ErrPermission) && !IsRoot():
		return ""
	case errors.As(err, &re):
		return re.Error()
	}
	return fmt.Sprintf("%s: %v", path, err)
}
