package vendorfetch

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/cco-dev/cco/provision"
)

// adoptable is a Claude binary found on the machine, opened without
// following any symlink a user controls.
type adoptable struct {
	name string // target path, for the report
	open func() (io.ReadCloser, error)
}

// adoptCandidates lists the vendor installer's copies of version in users'
// homes (~/.local/share/claude/versions/<version>). Codex trees are never
// adopted: an unpacked tree cannot be verified against the archive's hash.
func adoptCandidates(run *provision.Run, users []*provision.User, version string) []adoptable {
	var out []adoptable
	rel := ".local/share/claude/versions/" + version
	for _, u := range users {
		u := u
		out = append(out, adoptable{name: u.Home + "/" + rel, open: func() (io.ReadCloser, error) {
			h, err := run.Root.OpenHome(u)
			if err != nil {
				return nil, err
			}
			defer h.Close()
			return h.OpenNoFollow(rel)
		}})
	}
	return out
}

// adopt copies a found binary into the version directory through the hash
// and keeps it only when size and checksum are the manifest's: the bytes
// checked are exactly the bytes kept, whatever the original does meanwhile.
func adopt(a adoptable, rel *claudeRelease, dir *os.File) error {
	src, err := a.open()
	if err != nil {
		return err
	}
	defer src.Close()
	// The open refused anything but a regular file; the manifest's size is
	// the cap: a larger (or sparse, huge) file is refused unread.
	if f, ok := src.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Size() != rel.size {
			return fmt.Errorf("%s: %d bytes, but the manifest says %d (size mismatch): refusing it unread", a.name, fi.Size(), rel.size)
		}
	}
	f, err := createIn(dir, "claude.partial", 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(src, rel.size+1))
	if err != nil {
		return err
	}
	return finishBinary(f, dir, a.name, rel, n, hex.EncodeToString(h.Sum(nil)))
}
