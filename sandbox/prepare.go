package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/cco-dev/cco/sandbox/caches"
	"github.com/cco-dev/cco/sandbox/saferead"
	"github.com/cco-dev/cco/sandbox/trust"
	"github.com/cco-dev/cco/sandbox/workspace"
)

func markerJSON(m *Marker) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the jail marker: %w", err)
	}
	return b, nil
}

// Session is the host-side state of one launch, undone by Finish.
type Session struct {
	home    string
	rec     record
	recPath string
	// recorded: the launch has a record, and so something to undo.
	recorded bool
	watched  map[string]map[string]string
	// snap is the workspace's git and sourced files at launch
	// (WatchRepos), for the audit after the session.
	snap *workspace.Snapshot
	// protected are Prep.Protected's inodes once the placeholders exist.
	protected workspace.Protected
	// trust are the agent's trust lists at launch.
	trust *trust.Snapshot
	// launched is the running jail, for a Session that Start made.
	*launched
}

// Prepare does the host-side work of a Prep before bwrap starts: it takes
// over what dead launches left behind, creates the login directories,
// carries state files over, creates and records the placeholders, and
// snapshots the watched state files. runtime, when not "", is the session's
// runtime directory (the egress proxy's), recorded so that it goes even if
// the launcher is killed.
func Prepare(home, runtime string, pr *Prep) (*Session, error) {
	s := &Session{home: home}
	s.rec = record{PID: os.Getpid(), Start: procStart(os.Getpid()), Runtime: runtime}
	// Dead launches' placeholders are taken over, not removed here: this
	// launch's plan may already rely on them (it saw them as existing
	// files); they go when this session, or the last one live, ends.
	s.rec.Placeholders = adoptStale(home)
	for _, d := range pr.LoginDirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("creating the login directory %s: %w", d, err)
		}
	}
	notes, err := caches.Ensure(home, os.Geteuid(), pr.CacheDirs, ConfigPath)
	if err != nil {
		return nil, err
	}
	pr.Notes = append(pr.Notes, notes...)
	if err := makeStandIns(pr.StandIns); err != nil {
		return nil, err
	}
	for _, c := range pr.CarryOver {
		if err := carryOver(c[0], c[1]); err != nil {
			return nil, err
		}
	}
	dir := registryDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	s.recPath = filepath.Join(dir, strconv.Itoa(s.rec.PID)+".json")
	adopted := len(s.rec.Placeholders)
	for _, ph := range pr.Placeholders {
		s.rec.Placeholders = append(s.rec.Placeholders, placeholder{Path: ph.Path, Dir: ph.Dir, Data: ph.Data})
	}
	// A launch that Register did not record, with no placeholder and no
	// runtime directory, has nothing to undo: it writes no record.
	if _, err := os.Lstat(s.recPath); err != nil && len(s.rec.Placeholders) == 0 && runtime == "" {
		s.watch(pr)
		return s, nil
	}
	s.recorded = true
	// The record goes first: a crash between it and the placeholders
	// leaves nothing unrecorded.
	if err := s.writeRecord(); err != nil {
		return nil, err
	}
	if len(pr.Placeholders) > 0 {
		for i := adopted; i < len(s.rec.Placeholders); i++ {
			ph := &s.rec.Placeholders[i]
			if err := createPlaceholder(home, ph); err != nil {
				s.finish()
				return nil, err
			}
		}
		if err := s.writeRecord(); err != nil {
			s.finish()
			return nil, err
		}
	}
	s.watch(pr)
	return s, nil
}

// Finish removes this launch's runtime directory and, when no other session
// in this home is live, its placeholders and record (and those that dead
// sessions left). While another session lives, placeholders stay: it may
// have bound them; the last session out, or the next launch, removes them.
func (s *Session) Finish() {
	if !s.recorded {
		return
	}
	unlock, err := LockRegistry(s.home)
	if err == nil {
		defer unlock()
	}
	s.finish()
}

// finish is Finish for a caller that holds the registry lock.
func (s *Session) finish() {
	if othersLive(s.home, s.rec.PID) {
		if ownRuntime(s.rec.Runtime) {
			os.RemoveAll(s.rec.Runtime)
		}
		s.rec.Runtime = ""
		s.writeRecord()
		return
	}
	undo(&s.rec)
	os.Remove(s.recPath)
	CleanStale(s.home)
}

// carryOver copies from to to once, as the invoking user, keeping from.
// from is read through saferead.ReadCapped: a link, a FIFO, a device or a file
// over the cap is refused with the fix, and nothing is written.
func carryOver(from, to string) error {
	if _, err := os.Lstat(to); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	b, err := saferead.ReadCapped(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, syscall.ELOOP) {
		err = errors.New("it is a symbolic link")
	}
	if err != nil {
		return fmt.Errorf("carrying %s over to %s: %v (fix: make %s a regular file of at most %d MiB, or copy it to %s yourself)",
			from, to, err, from, saferead.MaxStateFile>>20, to)
	}
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("carrying %s over to %s: %w", from, to, err)
	}
	if _, err := dst.Write(b); err != nil {
		dst.Close()
		os.Remove(to)
		return fmt.Errorf("carrying %s over to %s: %w", from, to, err)
	}
	return dst.Close()
}
