package egress

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cco-dev/cco/sandbox/egress/policy"

	"golang.org/x/sys/unix"
)

// Entry is one line of the audit log: one CONNECT tunnel or one
// absolute-form request, allowed or not.
type Entry struct {
	Time    time.Time `json:"time"`
	Session string    `json:"session"`
	Method  string    `json:"method"`         // CONNECT, GET, ...
	Target  string    `json:"target"`         // host:port as the client asked
	Addr    string    `json:"addr,omitempty"` // the address dialled
	// Via is the upstream proxy (host:port, never its credentials) the
	// request went through, when egress_upstream gives one.
	Via      string        `json:"via,omitempty"`
	Allowed  bool          `json:"allowed"`          // false: refused (403) or failed (502)
	Reason   string        `json:"reason,omitempty"` // why refused, or why it failed
	Up       int64         `json:"up"`               // bytes client -> upstream
	Down     int64         `json:"down"`             // bytes upstream -> client
	Duration time.Duration `json:"duration_ns,omitempty"`

	// failed: a 502 (an upstream or a name that failed), for the tally.
	failed bool
}

// Audit log rotation defaults.
const (
	DefaultAuditMaxBytes = 10 << 20
	DefaultAuditKeep     = 3
)

// AuditLog appends JSON lines to one file shared by every session of a user
// (each line names its session) and rotates it by size: path -> path.1 ->
// ... -> path.Keep. Sessions running at the same time coordinate through an
// flock on path.lock, so that a rotation by one does not lose another's
// lines.
type AuditLog struct {
	// MaxBytes is the size past which the file is rotated before a write.
	MaxBytes int64
	// Keep is how many rotated files are kept.
	Keep int

	path    string
	session string
	mu      sync.Mutex
	lock    *os.File
	f       *os.File
}

// OpenAuditLog opens (creating it and its directory, mode 0700/0600) the
// audit log at path for one session.
func OpenAuditLog(path, session string) (*AuditLog, error) {
	lock, f, err := policy.Policy{LogPath: path}.OpenLog()
	if err != nil {
		return nil, err
	}
	return AuditLogFromFiles(path, session, lock, f), nil
}

// AuditLogFromFiles is the audit log at path for one session, on files
// already opened by policy.Policy.OpenLog (in the shadow, which hands them
// to the proxy process).
func AuditLogFromFiles(path, session string, lock, log *os.File) *AuditLog {
	return &AuditLog{MaxBytes: DefaultAuditMaxBytes, Keep: DefaultAuditKeep, path: path, session: session, lock: lock, f: log}
}

// Path is the file written to.
func (a *AuditLog) Path() string { return a.path }

func (a *AuditLog) reopen() error {
	if a.f != nil {
		a.f.Close()
		a.f = nil
	}
	f, err := policy.OpenLogFile(a.path)
	if err != nil {
		return err
	}
	a.f = f
	return nil
}

// Record appends e (stamped with the time and session) as one line.
func (a *AuditLog) Record(e Entry) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	e.Session = a.session
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("egress audit log: encoding an entry: %w", err)
	}
	line = append(line, '\n')

	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return fmt.Errorf("egress audit log %s: closed", a.path)
	}
	if err := unix.Flock(int(a.lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("egress audit log: locking %s.lock: %w", a.path, err)
	}
	defer unix.Flock(int(a.lock.Fd()), unix.LOCK_UN)

	// Another session may have rotated the file since we opened it.
	cur, err := a.f.Stat()
	if err != nil {
		return fmt.Errorf("egress audit log: %s: %w", a.path, err)
	}
	onDisk, err := os.Lstat(a.path)
	if err != nil || !os.SameFile(cur, onDisk) {
		if err := a.reopen(); err != nil {
			return err
		}
		if onDisk, err = os.Lstat(a.path); err != nil {
			return fmt.Errorf("egress audit log: %w", err)
		}
	}
	if a.MaxBytes > 0 && onDisk.Size() > 0 && onDisk.Size()+int64(len(line)) > a.MaxBytes {
		if err := a.rotate(); err != nil {
			return err
		}
	}
	if _, err := a.f.Write(line); err != nil {
		return fmt.Errorf("egress audit log: writing %s: %w", a.path, err)
	}
	return nil
}

func (a *AuditLog) rotate() error {
	keep := a.Keep
	if keep < 1 {
		keep = 1
	}
	old := a.path + "." + strconv.Itoa(keep)
	if err := os.Remove(old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("egress audit log: rotating: %w", err)
	}
	for i := keep - 1; i >= 1; i-- {
		from := a.path + "." + strconv.Itoa(i)
		if err := os.Rename(from, a.path+"."+strconv.Itoa(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("egress audit log: rotating: %w", err)
		}
	}
	if err := os.Rename(a.path, a.path+".1"); err != nil {
		return fmt.Errorf("egress audit log: rotating: %w", err)
	}
	return a.reopen()
}

// Close closes the log; later Records fail.
func (a *AuditLog) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		return nil
	}
	err := a.f.Close()
	a.lock.Close()
	a.lock, a.f = nil, nil
	return err
}

// ReadAudit reads the entries of one audit log file (not its rotations).
func ReadAudit(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading egress audit log: %w", err)
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("egress audit log %s line %d: %w", path, n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("reading egress audit log %s: %w", path, err)
	}
	return out, nil
}
