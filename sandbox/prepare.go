package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

func markerJSON(m *Marker) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the jail marker: %w", err)
	}
	return b, nil
}

// registryDir holds one record per running launch: what it created on the
// host, so that the next launch can remove what a SIGKILL left behind.
func registryDir(home string) string {
	return filepath.Join(home, ".local/state/cco/mounts")
}

// record is one launch's host-side leftovers.
type record struct {
	PID          int           `json:"pid"`
	Start        string        `json:"start"`
	Runtime      string        `json:"runtime"`
	Placeholders []placeholder `json:"placeholders,omitempty"`
}

type placeholder struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir,omitempty"`
	// Data is the file's content as made ("" for an empty file).
	Data string `json:"data,omitempty"`
	Dev  uint64 `json:"dev,omitempty"`
	Ino  uint64 `json:"ino,omitempty"`
}

// Session is the host-side state of one launch, undone by Finish.
type Session struct {
	home    string
	rec     record
	recPath string
	// recorded: the launch has a record, and so something to undo.
	recorded bool
	watched  map[string]map[string]string
	// ws and repos are the workspace and its repositories' git files at
	// launch (WatchRepos), for the audit after the session.
	ws    string
	repos repoFiles
	// protected are Prep.Protected's inodes once the placeholders exist.
	protected []protectedStamp
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

// watch snapshots the watched state files and the protected paths'
// inodes (the placeholders exist by now).
func (s *Session) watch(pr *Prep) {
	if len(pr.Watched) > 0 {
		s.watched = map[string]map[string]string{}
		for _, w := range pr.Watched {
			s.watched[w], _ = CommandEntries(w)
		}
	}
	s.protected = stampProtected(pr.Protected)
}

func (s *Session) writeRecord() error {
	b, _ := json.Marshal(&s.rec)
	if err := os.WriteFile(s.recPath, b, 0o600); err != nil {
		return fmt.Errorf("recording this launch in %s: %w", s.recPath, err)
	}
	return nil
}

// LockRegistry serialises, between the sessions of one home, the planning
// and preparing of a launch against the end of another: a session that ends
// must not remove a placeholder that one starting is about to bind. The
// launcher holds it from Register through Prepare; Finish takes it itself.
func LockRegistry(home string) (func(), error) {
	dir := registryDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// Register records this launch as live before its jail is planned, so that
// another session in the same home that ends meanwhile leaves the mount-point
// placeholders this one is about to bind in place. Prepare completes the
// record.
//
// A home without any record has no placeholder to protect (each is
// recorded before it is made), so then nothing is written: the common
// launch leaves no trace on the disk. The caller holds LockRegistry.
func Register(home string) error {
	dir := registryDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if len(recordNames(dir)) == 0 {
		return nil
	}
	rec := record{PID: os.Getpid(), Start: procStart(os.Getpid())}
	b, _ := json.Marshal(&rec)
	p := filepath.Join(dir, strconv.Itoa(rec.PID)+".json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return fmt.Errorf("recording this launch in %s: %w", p, err)
	}
	return nil
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

// othersLive reports whether a session other than pid is running in home.
func othersLive(home string, pid int) bool {
	for _, r := range records(home) {
		if r.rec.PID != pid && live(r.rec) {
			return true
		}
	}
	return false
}

func live(r record) bool {
	return r.PID > 0 && r.Start != "" && procStart(r.PID) == r.Start
}

type recordFile struct {
	path string
	rec  record
}

// recordNames lists the registry's records (<pid>.json); anything else
// there (the .lock that LockRegistry holds) is not one, and is never
// touched.
func recordNames(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	return out
}

// records reads the registry; unreadable entries are dropped from it.
func records(home string) []recordFile {
	dir := registryDir(home)
	var out []recordFile
	for _, name := range recordNames(dir) {
		p := filepath.Join(dir, name)
		b, err := ReadCapped(p)
		if err != nil {
			continue
		}
		var r record
		if json.Unmarshal(b, &r) != nil {
			os.Remove(p)
			continue
		}
		out = append(out, recordFile{p, r})
	}
	return out
}

// listed reports whether a recorded placeholder is the file at dev/ino.
func listed(home, path string, dev, ino uint64) bool {
	for _, r := range records(home) {
		for _, ph := range r.rec.Placeholders {
			if ph.Dev == dev && ph.Ino == ino || ph.Path == path && ph.Ino == 0 && live(r.rec) {
				return true
			}
		}
	}
	return false
}

// Added lists, one line each, the command-bearing entries the session added
// or changed in the watched state files, and what git would run from a
// config, hook or redirect created or changed in the workspace's
// repositories (see repoWarnings).
func (s *Session) Added() []string {
	var out []string
	for _, path := range slices.Sorted(maps.Keys(s.watched)) {
		before := s.watched[path]
		after, err := CommandEntries(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			out = append(out, fmt.Sprintf("%s: cannot be read after the session (%v); check its mcpServers yourself", shown(path), shown(err.Error())))
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(after)) {
			if v := after[k]; before[k] != v {
				scope, name, _ := strings.Cut(k, "\x00")
				out = append(out, fmt.Sprintf("%s: mcpServers %q (%s) runs %s", shown(path), name, shown(scope), shown(v)))
			}
		}
	}
	if s.ws != "" {
		out = append(out, repoWarnings(s.repos, FindRepos(s.ws))...)
	}
	return out
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
	b, err := ReadCapped(ph.Path)
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

// adoptStale takes the placeholders of dead launches in home into the
// caller's keeping (removing the dead records and their runtime dirs).
func adoptStale(home string) []placeholder {
	var out []placeholder
	seen := map[[2]uint64]bool{}
	for _, r := range records(home) {
		if r.rec.PID == os.Getpid() || live(r.rec) {
			continue
		}
		for _, ph := range r.rec.Placeholders {
			if k := [2]uint64{ph.Dev, ph.Ino}; ph.Ino != 0 && !seen[k] {
				seen[k] = true
				out = append(out, ph)
			}
		}
		if ownRuntime(r.rec.Runtime) {
			os.RemoveAll(r.rec.Runtime)
		}
		os.Remove(r.path)
	}
	return out
}

// CleanStale undoes the records of launches whose process is gone (a
// SIGKILL leaves its placeholders and runtime directory behind). While a
// session is live in this home, dead sessions' placeholders stay (it may
// have bound them) and only their runtime directories go.
func CleanStale(home string) {
	recs := records(home)
	anyLive := false
	for _, r := range recs {
		if r.rec.PID != os.Getpid() && live(r.rec) {
			anyLive = true
		}
	}
	for _, r := range recs {
		if r.rec.PID == os.Getpid() || live(r.rec) {
			continue
		}
		if anyLive {
			if ownRuntime(r.rec.Runtime) {
				os.RemoveAll(r.rec.Runtime)
			}
			continue
		}
		undo(&r.rec)
		os.Remove(r.path)
	}
}

// ownRuntime reports whether a recorded runtime directory is one a launch
// made (the egress proxy's cco-egress-*, or an older launch's cco-jail-*),
// so that a damaged record never makes a launch remove anything else.
func ownRuntime(dir string) bool {
	base := filepath.Base(dir)
	return dir != "" && filepath.IsAbs(dir) && (strings.HasPrefix(base, "cco-egress-") || strings.HasPrefix(base, "cco-jail-"))
}

// procStart is a process's start time (field 22 of /proc/PID/stat), which
// tells a live launch from a recycled pid.
func procStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// carryOver copies from to to once, as the invoking user, keeping from.
// from is read through ReadCapped: a link, a FIFO, a device or a file
// over the cap is refused with the fix, and nothing is written.
func carryOver(from, to string) error {
	if _, err := os.Lstat(to); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	b, err := ReadCapped(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if errors.Is(err, syscall.ELOOP) {
		err = errors.New("it is a symbolic link")
	}
	if err != nil {
		return fmt.Errorf("carrying %s over to %s: %v (fix: make %s a regular file of at most %d MiB, or copy it to %s yourself)",
			from, to, err, from, MaxStateFile>>20, to)
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

// CommandEntries reads the command-bearing entries of a claude state file:
// every mcpServers entry with a command, at the top level and per project,
// keyed by scope and name, valued by the entry's JSON. The file is read
// through ReadCapped; one it cannot read is the error (a file that is not
// JSON has no entries).
func CommandEntries(path string) (map[string]string, error) {
	out := map[string]string{}
	b, err := ReadCapped(path)
	if err != nil {
		return out, err
	}
	var st struct {
		MCP      map[string]json.RawMessage `json:"mcpServers"`
		Projects map[string]struct {
			MCP map[string]json.RawMessage `json:"mcpServers"`
		} `json:"projects"`
	}
	if json.Unmarshal(b, &st) != nil {
		return out, nil
	}
	add := func(scope string, m map[string]json.RawMessage) {
		for name, raw := range m {
			var e struct {
				Command string   `json:"command"`
				Args    []string `json:"args"`
			}
			if json.Unmarshal(raw, &e) == nil && e.Command != "" {
				out[scope+"\x00"+name] = strings.TrimSpace(e.Command + " " + strings.Join(e.Args, " "))
			}
		}
	}
	add("global", st.MCP)
	for p, v := range st.Projects {
		add("project "+p, v.MCP)
	}
	return out, nil
}
