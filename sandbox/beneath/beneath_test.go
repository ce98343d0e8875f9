package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNothingOutsideTheTree: while every directory on the way is swapped
// for a link to a decoy outside the tree (rename-exchange, in a tight
// loop), making and removing files and directories below the top never
// touches the decoy; each call either works in the tree or fails.
func TestNothingOutsideTheTree(t *testing.T) {
	base := t.TempDir()
	top, decoy := filepath.Join(base, "ws"), filepath.Join(base, "decoy")
	for _, d := range []string{top + "/a/b/.git", decoy} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	targets := []string{decoy, decoy + "/dangling", "../../decoy", "/proc/self/cwd"}
	ways := []string{top + "/a", top + "/a/b", top + "/a/b/.git"}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			p := ways[i%len(ways)]
			link := p + ".swap"
			os.Remove(link)
			if os.Symlink(targets[i%len(targets)], link) != nil {
				continue
			}
			if unix.Renameat2(unix.AT_FDCWD, p, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE) == nil {
				swaps.Add(1)
				unix.Renameat2(unix.AT_FDCWD, p, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
			}
			os.Remove(link)
		}
	}()
	d, err := Open(top)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	made, refused := 0, 0
	for i := 0; i < 4000; i++ {
		for _, p := range []string{top + "/a/b/.git/config", top + "/a/b/.git/hooks"} {
			var in Inode
			var err error
			dir := filepath.Base(p) == "hooks"
			if dir {
				in, err = d.Mkdir(p, 0o700)
			} else {
				in, err = d.Create(p, []byte(".\n"), 0o600)
			}
			if err != nil {
				if !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR) {
					t.Fatalf("making %s: %v", p, err)
				}
				refused++
				continue
			}
			made++
			// Removed once no link stands in the way; one that the swaps
			// keep from it waits for the end of the race.
			err = d.Remove(p, in, dir, ".\n")
			if err != nil && !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ENOENT) {
				t.Fatalf("removing %s: %v", p, err)
			}
			for err != nil && !stop.Load() {
				if err = d.Remove(p, in, dir, ".\n"); err == nil {
					break
				}
				stop.Store(true)
				wg.Wait()
			}
			if err != nil {
				if err = d.Remove(p, in, dir, ".\n"); err != nil {
					t.Fatalf("removing %s with no race: %v", p, err)
				}
			}
		}
		if stop.Load() {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if ents, _ := os.ReadDir(decoy); len(ents) != 0 {
		t.Errorf("the decoy holds %v", ents)
	}
	if swaps.Load() == 0 || made == 0 {
		t.Fatalf("no race: %d swaps, %d made", swaps.Load(), made)
	}
	t.Logf("%d made and removed, %d refused, %d swaps", made, refused, swaps.Load())
	// The tree is as it was.
	if ents, _ := os.ReadDir(top + "/a/b/.git"); len(ents) != 0 {
		t.Errorf("left in the tree: %v", ents)
	}
}

// TestRefusesWhatIsNotAsMade: Remove leaves alone a file that is not the
// inode made, or no longer holds its data, and a directory that is not
// empty; a name outside the top is refused.
func TestRefusesWhatIsNotAsMade(t *testing.T) {
	top := t.TempDir()
	d, err := Open(top)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in, err := d.Create(top+"/f", []byte("x"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(top+"/f", []byte("y"), 0o600)
	if err := d.Remove(top+"/f", in, false, "x"); !errors.Is(err, ErrNotAsMade) {
		t.Errorf("a changed file: %v", err)
	}
	din, err := d.Mkdir(top+"/d", 0o700)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(top+"/d/own", nil, 0o600)
	if err := d.Remove(top+"/d", din, true, ""); err == nil {
		t.Error("a directory someone wrote in was removed")
	}
	if _, err := d.Create(filepath.Dir(top)+"/outside", nil, 0o600); err == nil {
		t.Error("a name outside the top was made")
	}
	os.Symlink(filepath.Dir(top), top+"/up")
	if _, err := d.Create(top+"/up/outside", nil, 0o600); !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("through a link: %v", err)
	}
}

// TestOpenPath: a mount point is opened beneath the top, file or
// directory; a link at it or on the way is refused.
func TestOpenPath(t *testing.T) {
	top := t.TempDir()
	os.MkdirAll(top+"/a/.git", 0o700)
	os.WriteFile(top+"/a/.git/config", nil, 0o600)
	os.Symlink("/etc", top+"/link")
	d, err := Open(top)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, rel := range []string{"a/.git/config", "a/.git", "."} {
		fd, err := d.OpenPath(rel)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		unix.Close(fd)
	}
	for _, rel := range []string{"link", "link/passwd", "../x"} {
		if fd, err := d.OpenPath(rel); err == nil {
			unix.Close(fd)
			t.Errorf("%s was opened", rel)
		}
	}
}
