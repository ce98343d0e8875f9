package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/sandbox/beneath"
)

// Placeholders: the mount points a launch makes on the host because a
// read-only bind must sit at a path that does not exist yet. Each is made,
// checked and removed on descriptors, from the top of the tree that holds
// it (the workspace, the home, an allow_write tree) down, never by path: a
// directory on the way that another session swapped for a link fails the
// call instead of leading it out of the tree (package beneath,
// docs/adr/0120-mount-points-on-descriptors.md).

type placeholder struct {
	Path string `json:"path"`
	// Root is the tree's top it is resolved beneath ("" in an older
	// record: its parent directory, opened without following a link).
	Root string `json:"root,omitempty"`
	Dir  bool   `json:"dir,omitempty"`
	// Data is the file's content as made ("" for an empty file).
	Data string `json:"data,omitempty"`
	Dev  uint64 `json:"dev,omitempty"`
	Ino  uint64 `json:"ino,omitempty"`
}

func (ph placeholder) root() string {
	if ph.Root != "" && beneath.Within(ph.Path, ph.Root) && ph.Path != ph.Root {
		return ph.Root
	}
	return filepath.Dir(ph.Path)
}

// trees keeps the tree tops a launch opened, each once.
type trees map[string]*beneath.Dir

func (t trees) open(top string) (*beneath.Dir, error) {
	if d, ok := t[top]; ok {
		return d, nil
	}
	d, err := beneath.Open(top)
	if err != nil {
		return nil, err
	}
	t[top] = d
	return d, nil
}

func (t trees) close() {
	for _, d := range t {
		d.Close()
	}
}

// undo removes the placeholders of recs that are still as made, deepest
// first (a directory another record lists goes after the files in it,
// whichever session made which), each once, and the records' runtime
// directories.
func undo(recs ...*record) {
	var all []placeholder
	seen := map[beneath.Inode]bool{}
	for _, r := range recs {
		for _, ph := range r.Placeholders {
			k := beneath.Inode{Dev: ph.Dev, Ino: ph.Ino}
			if ph.Ino == 0 || seen[k] {
				continue // never made: nothing of ours is there
			}
			seen[k] = true
			all = append(all, ph)
		}
	}
	slices.SortStableFunc(all, func(a, b placeholder) int {
		return -cmp.Compare(strings.Count(a.Path, "/"), strings.Count(b.Path, "/"))
	})
	t := trees{}
	defer t.close()
	for _, ph := range all {
		d, err := t.open(ph.root())
		if err != nil {
			continue // its tree is gone, or now lies below a link
		}
		// Removed only while still as made: never what someone wrote.
		d.Remove(ph.Path, beneath.Inode{Dev: ph.Dev, Ino: ph.Ino}, ph.Dir, ph.Data)
	}
	for _, r := range recs {
		if ownRuntime(r.Runtime) {
			os.RemoveAll(r.Runtime)
		}
	}
}

// asMade reports whether a placeholder file still holds what it was made
// with.
func asMade(d *beneath.Dir, ph placeholder, st *unix.Stat_t) bool {
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != int64(len(ph.Data)) {
		return false
	}
	if ph.Data == "" {
		return true
	}
	b, err := d.ReadSmall(ph.Path, len(ph.Data))
	return err == nil && string(b) == ph.Data
}

// createPlaceholder makes ph beneath its tree's top.
func createPlaceholder(home string, t trees, ph *placeholder) error {
	d, err := t.open(ph.root())
	if err != nil {
		return fmt.Errorf("creating the mount point %s: %w (fix: replace the link on the way with the directory it points to)", ph.Path, noLink(err))
	}
	var in beneath.Inode
	if ph.Dir {
		in, err = d.Mkdir(ph.Path, 0o700)
	} else {
		in, err = d.Create(ph.Path, []byte(ph.Data), 0o600)
	}
	if errors.Is(err, fs.ErrExist) {
		// Another session in this home made it since this one planned: an
		// empty placeholder that a record lists is shared, not in the way.
		if st, lerr := d.Lstat(ph.Path); lerr == nil {
			empty := ph.Dir && st.Mode&unix.S_IFMT == unix.S_IFDIR || !ph.Dir && asMade(d, *ph, &st)
			if empty && listed(home, ph.Path, uint64(st.Dev), st.Ino) {
				ph.Dev, ph.Ino = uint64(st.Dev), st.Ino
				return nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("creating the mount point %s: %w", ph.Path, noLink(err))
	}
	ph.Dev, ph.Ino = in.Dev, in.Ino
	return nil
}

// noLink says what ELOOP and EXDEV mean on the way down a tree.
func noLink(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("%w: a symbolic link is on the way, which the launch never follows", err)
	}
	return err
}
