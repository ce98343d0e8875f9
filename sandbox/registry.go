package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cco-dev/cco/internal/paths"
	"github.com/cco-dev/cco/sandbox/saferead"
)

// The registry: one record per running launch in a home, and the lock that
// orders one launch's planning against another's end.

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
	// Writable are the host trees the launch's jail writes, and Pinned
	// its mount points in them as made: a name there that is not pinned
	// is one the jail can rename, or swap for a link, while another
	// launch is being built.
	Writable []string `json:"writable,omitempty"`
	Pinned   []pin    `json:"pinned,omitempty"`
	// Sealed are the pinned mount points below which the jail cannot
	// change the host (read-only directories, masks).
	Sealed []string `json:"sealed,omitempty"`
}

// pin is a mount point of a live jail in a tree it writes: that jail
// cannot rename or remove it (EBUSY) while it lives.
type pin struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// pins are the mount points among mps that lie in the trees writable, as
// they are now (the tops themselves among them).
func pins(mps, writable []string) []pin {
	var out []pin
	add := func(p string) {
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) == nil {
			out = append(out, pin{Path: p, Dev: uint64(st.Dev), Ino: st.Ino})
		}
	}
	for _, w := range writable {
		add(w)
	}
	for _, p := range mps {
		if under(p, writable) && !slices.Contains(writable, p) {
			add(p)
		}
	}
	return out
}

// pinned reports whether p is, now, one of a record's pins.
func (r *record) pinned(p string) bool {
	var st syscall.Stat_t
	if syscall.Lstat(p, &st) != nil {
		return false
	}
	for _, x := range r.Pinned {
		if x.Path == p && x.Dev == uint64(st.Dev) && x.Ino == st.Ino {
			return true
		}
	}
	return false
}

// errRaced is the refusal of a launch whose mount point another live jail
// could swap while bwrap builds this one.
type errRaced struct {
	path, mountPoint string
	pid              int
}

func (e *errRaced) Error() string {
	what := e.path + ", on the way to the mount point " + e.mountPoint + ","
	if e.path == e.mountPoint {
		what = "the mount point " + e.path
	}
	return fmt.Sprintf("%s lies in a tree that the running session %d writes, and that session's jail does not hold it as a mount point (it was made or changed after that session started), "+
		"so that session could swap it for a link while bubblewrap builds this jail (fix: launch again once session %d has ended, or launch from a directory that does not hold %s)", what, e.pid, e.pid, e.path)
}

// raced checks a launch's mount points against every other live session
// of the home: each directory from the top of a tree that session writes
// down to the mount point, and the mount point itself, must be a mount
// point of that session's jail (it cannot rename it), else bwrap, which
// resolves each by name, could be led through a link out of the tree
// (docs/adr/0120-mount-points-on-descriptors.md). The caller holds
// LockRegistry.
func raced(home string, mps []string) error {
	for _, rf := range records(home) {
		r := rf.rec
		if r.PID == os.Getpid() || len(r.Writable) == 0 || !live(r) {
			continue
		}
		for _, mp := range mps {
			if c := r.unpinned(mp); c != "" {
				return &errRaced{path: c, mountPoint: mp, pid: r.PID}
			}
		}
	}
	return nil
}

// racedAt is raced for the one path p.
func racedAt(home, p string) error { return raced(home, []string{p}) }

// unpinned is a name on the way to p, from the top of a tree the record's
// jail writes, that the jail could rename or swap (p itself included), or
// "": every one is a mount point of that jail. Below a mount point of its
// that seals the host from it (a read-only directory, a mask) only the way
// to that mount point counts.
func (r *record) unpinned(p string) string {
	for _, s := range r.Sealed {
		if s != p && paths.Within(p, s) && r.pinned(s) && len(s) < len(p) {
			p = s
		}
	}
	for _, top := range r.Writable {
		if p == top || !paths.Within(p, top) {
			continue
		}
		for c := p; c != top && c != "/"; c = filepath.Dir(c) {
			if !r.pinned(c) {
				return c
			}
		}
	}
	return ""
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
		b, err := saferead.ReadCapped(p)
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

// livePlaceholders are the paths of the placeholders the other live
// sessions of home made. The caller holds LockRegistry.
func livePlaceholders(home string) map[string]bool {
	out := map[string]bool{}
	for _, r := range records(home) {
		if r.rec.PID == os.Getpid() || !live(r.rec) {
			continue
		}
		for _, ph := range r.rec.Placeholders {
			out[ph.Path] = true
		}
	}
	return out
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
	var dead []*record
	for i := range recs {
		r := &recs[i]
		if r.rec.PID == os.Getpid() || live(r.rec) {
			continue
		}
		if anyLive {
			if ownRuntime(r.rec.Runtime) {
				os.RemoveAll(r.rec.Runtime)
			}
			continue
		}
		dead = append(dead, &r.rec)
	}
	if anyLive {
		return
	}
	undo(dead...)
	for _, r := range recs {
		if r.rec.PID != os.Getpid() && !live(r.rec) {
			os.Remove(r.path)
		}
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
