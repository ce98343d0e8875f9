package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/cco-dev/cco/sandbox/saferead"
)

// Placeholders: the mount points a launch makes on the host because a
// read-only bind must sit at a path that does not exist yet.

type placeholder struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
	// Data is the file's content as made ("" for an empty file).
	Data string `json:"data,omitempty"`
	Dev  uint64 `json:"dev,omitempty"`
	Ino  uint64 `json:"ino,omitempty"`
}

func undo(r *record) {
	for i := len(r.Placeholders) - 1; i >= 0; i-- {
		ph := r.Placeholders[i]
		fi, err := os.Lstat(ph.Path)
		if err != nil {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || ph.Ino == 0 || uint64(st.Dev) != ph.Dev || st.Ino != ph.Ino {
			continue // not the one we made: leave it alone
		}
		// Remove only while still as made: never delete what someone wrote.
		if ph.Dir {
			os.Remove(ph.Path) // fails unless empty
		} else if asMade(ph, fi) {
			os.Remove(ph.Path)
		}
	}
	if ownRuntime(r.Runtime) {
		os.RemoveAll(r.Runtime)
	}
}

// asMade reports whether a placeholder file still holds what it was made
// with.
func asMade(ph placeholder, fi fs.FileInfo) bool {
	if !fi.Mode().IsRegular() || fi.Size() != int64(len(ph.Data)) {
		return false
	}
	if ph.Data == "" {
		return true
	}
	b, err := saferead.ReadCapped(ph.Path)
	return err == nil && string(b) == ph.Data
}

func createPlaceholder(home string, ph *placeholder) error {
	var err error
	if ph.Dir {
		err = os.Mkdir(ph.Path, 0o700)
	} else {
		var f *os.File
		f, err = os.OpenFile(ph.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
		if err == nil {
			_, err = f.WriteString(ph.Data)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(ph.Path)
			}
		}
	}
	if errors.Is(err, fs.ErrExist) {
		// Another session in this home made it since this one planned: an
		// empty placeholder that a record lists is shared, not in the way.
		if fi, lerr := os.Lstat(ph.Path); lerr == nil {
			st := fi.Sys().(*syscall.Stat_t)
			empty := ph.Dir && fi.IsDir() || !ph.Dir && asMade(*ph, fi)
			if empty && listed(home, ph.Path, uint64(st.Dev), st.Ino) {
				ph.Dev, ph.Ino = uint64(st.Dev), st.Ino
				return nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("creating the mount point %s: %w", ph.Path, err)
	}
	fi, err := os.Lstat(ph.Path)
	if err != nil {
		return fmt.Errorf("checking the mount point %s: %w", ph.Path, err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	ph.Dev, ph.Ino = uint64(st.Dev), st.Ino
	return nil
}
