package vendorfetch

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/provision"
)

// LibexecDir holds every agent's versions (each agent's directory is in
// its own file: ClaudeDir, CodexDir, GeminiDir) on the target system.
const LibexecDir = "/usr/libexec/cco"

// stagingPrefix names the staging directories (and nothing else) under
// LibexecDir, so that one left by a killed run is recognised and removed.
const stagingPrefix = ".staging-"

// staging is a private directory under LibexecDir, on the destination's
// filesystem so that the final move is a rename.
type staging struct {
	run    *provision.Run
	target string // target-system path
	dir    *os.File
}

// newStaging removes stale staging directories of agent and makes a fresh one.
func newStaging(run *provision.Run, agent, step string) (*staging, error) {
	if err := run.MkdirAll(LibexecDir, 0o755, step); err != nil {
		return nil, err
	}
	if d, err := run.Root.Open(LibexecDir); err == nil {
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			if strings.HasPrefix(n, stagingPrefix+agent+"-") {
				run.Root.RemoveAll(LibexecDir + "/" + n)
			}
		}
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	t := LibexecDir + "/" + stagingPrefix + agent + "-" + hex.EncodeToString(rnd[:])
	if _, err := run.Root.MkdirAll(t, 0o700, provision.SystemUID(), provision.SystemGID()); err != nil {
		return nil, err
	}
	dir, err := run.Root.Open(t)
	if err != nil {
		run.Root.RemoveAll(t)
		return nil, err
	}
	return &staging{run: run, target: t, dir: dir}, nil
}

// close removes the staging directory and everything left in it.
func (s *staging) close() {
	s.dir.Close()
	s.run.Root.RemoveAll(s.target)
}

// createIn creates name in dir for writing; it must not exist.
func createIn(dir *os.File, name string, perm uint32) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: path.Join(dir.Name(), name), Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), name)), nil
}

// openIn opens name in dir for reading, never following a link.
func openIn(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path.Join(dir.Name(), name), Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), name)), nil
}

// subdir makes and opens name in dir.
func subdir(dir *os.File, name string) (*os.File, error) {
	if err := unix.Mkdirat(int(dir.Fd()), name, 0o700); err != nil {
		return nil, &fs.PathError{Op: "mkdir", Path: path.Join(dir.Name(), name), Err: err}
	}
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path.Join(dir.Name(), name), Err: err}
	}
	return os.NewFile(uintptr(fd), path.Join(dir.Name(), name)), nil
}

func renameIn(dir *os.File, from, to string) error {
	if err := unix.Renameat(int(dir.Fd()), from, int(dir.Fd()), to); err != nil {
		return fmt.Errorf("renaming %s to %s in %s: %w", from, to, dir.Name(), err)
	}
	return nil
}

// place moves the staged version directory staged (a name in the staging
// directory) to <agentDir>/<version> and points <agentDir>/current at it.
// A directory already at the version's place (a damaged copy being
// repaired) is moved into the staging directory first, so it is removed
// with it; the previous version's directory is kept for a rollback.
func (s *staging) place(step, agentDir, version, staged string) error {
	run := s.run
	if err := run.MkdirAll(agentDir, 0o755, step); err != nil {
		return err
	}
	if err := unix.Fchmodat(int(s.dir.Fd()), staged, 0o755, 0); err != nil {
		return fmt.Errorf("setting the mode of %s: %w", run.Root.HostPath(s.target+"/"+staged), err)
	}
	dst := agentDir + "/" + version
	if _, err := run.Root.Lstat(dst); err == nil {
		if err := run.Root.Rename(dst, s.target+"/replaced"); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := run.Root.Rename(s.target+"/"+staged, dst); err != nil {
		return err
	}
	if run.Receipt.Dirs == nil {
		run.Receipt.Dirs = map[string]provision.DirRecord{}
	}
	// Whatever the receipt said about a replaced copy of this version no
	// longer exists; the caller records the new tree.
	for p := range run.Receipt.Paths {
		if strings.HasPrefix(p, dst+"/") {
			delete(run.Receipt.Paths, p)
		}
	}
	for p := range run.Receipt.Dirs {
		if strings.HasPrefix(p, dst+"/") {
			delete(run.Receipt.Dirs, p)
		}
	}
	run.Receipt.Dirs[dst] = provision.DirRecord{Step: step}
	link := agentDir + "/current"
	if fi, err := run.Root.Lstat(link); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
		return fmt.Errorf("%s exists and is not a symlink: move it away, then run again", run.Root.HostPath(link))
	}
	if err := run.Root.Symlink(version, link); err != nil {
		return err
	}
	return run.Record(link, provision.KindLink, "", step)
}

// hashFile is provision.HashFile; a test seam that proves a no-op run
// reads no installed file.
var hashFile = provision.HashFile

// agentState is what the receipt keeps about an installed agent, under
// Receipt.Extra[step id].
type agentState struct {
	Version  string `json:"version"`
	Platform string `json:"platform"`
	Channel  string `json:"channel,omitempty"` // "" when pinned
	// Bundle is the offline bundle the version was installed from: the
	// bundle pins it (an air-gapped host or an image is in sync with no
	// network), until a pin, another bundle or --upgrade moves it.
	Bundle   string `json:"bundle,omitempty"`
	Source   string `json:"source"`   // the URL (or bundle) the bytes came from
	Verified string `json:"verified"` // what was checked
	Previous string `json:"previous,omitempty"`
	// NoKey is why the manifest's signature could not be checked, so that
	// the reason is said once, not on every run.
	NoKey string `json:"no_key,omitempty"`
	// Node is the Node binary (a host path of the target) that runs an
	// npm package's script; "" for native binaries.
	Node string `json:"node,omitempty"`
}

func loadState(run *provision.View, step string) *agentState {
	raw, ok := run.Receipt.Extra[step]
	if !ok {
		return nil
	}
	var st agentState
	if json.Unmarshal(raw, &st) != nil || CheckVersion("receipt", st.Version) != nil {
		return nil
	}
	return &st
}

func saveState(run *provision.Run, step string, st *agentState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if run.Receipt.Extra == nil {
		run.Receipt.Extra = map[string]json.RawMessage{}
	}
	run.Receipt.Extra[step] = b
	return nil
}

// intact reports whether every path the receipt records for step under
// dir still holds the recorded bytes and dir/current points at version.
// Stat stamps are trusted, so a no-op run reads no large file; a file
// whose stamp changed is hashed.
func intact(run *provision.View, step, agentDir, version string) (bool, string) {
	link := agentDir + "/current"
	if l, err := run.Root.Readlink(link); err != nil || l != version {
		return false, fmt.Sprintf("%s does not point at %s", link, version)
	}
	prefix := agentDir + "/" + version + "/"
	n := 0
	for p, e := range run.Receipt.Paths {
		if e.Step != step || !strings.HasPrefix(p, prefix) {
			continue
		}
		n++
		fi, err := run.Root.Lstat(p)
		if err != nil {
			return false, fmt.Sprintf("%s is missing", p)
		}
		switch e.Kind {
		case provision.KindLink:
			if l, err := run.Root.Readlink(p); err != nil || l != e.Target {
				return false, fmt.Sprintf("%s no longer points at %s", p, e.Target)
			}
		case provision.KindFile:
			if !fi.Mode().IsRegular() {
				return false, fmt.Sprintf("%s is no longer a file", p)
			}
			if fmt.Sprintf("%04o", uint32(fi.Mode().Perm())) != e.Mode {
				return false, fmt.Sprintf("%s has mode %04o, not %s", p, fi.Mode().Perm(), e.Mode)
			}
			if e.StatMatches(fi) {
				continue
			}
			sum, err := hashFile(run.Root, p)
			if err != nil || sum != e.SHA256 {
				return false, fmt.Sprintf("%s was changed after cco installed it", p)
			}
			e.Stamp(fi) // same bytes, new stat: the next run is fast again
		}
	}
	if n == 0 {
		return false, fmt.Sprintf("the receipt records no files under %s", prefix)
	}
	return true, ""
}
