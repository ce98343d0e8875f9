package provision

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ReceiptPath is where the receipt lives on the target system.
const ReceiptPath = "/var/lib/cco/receipt.json"

// StateDir holds the receipt, the lock, backups and relocated vendor files.
const StateDir = "/var/lib/cco"

// ReceiptSchema is the receipt's format version. Later capabilities extend the
// schema with new optional fields; they do not replace it.
const ReceiptSchema = 1

// Kinds of owned paths.
const (
	KindFile = "file"
	KindLink = "link"
	KindDir  = "dir"
)

// Receipt records what cco owns on the target system: "we wrote these exact
// bytes". A recorded file whose bytes differ was edited by someone; a file
// that was never recorded is foreign. Uninstall undoes exactly what it says.
type Receipt struct {
	Schema int `json:"schema"`
	// Paths is keyed by target-system absolute path (never prefixed by --root).
	Paths map[string]*Entry `json:"paths"`
	// Relocations are vendor files moved out of the shadow's way.
	Relocations []Relocation `json:"relocations,omitempty"`
	// Dirs are directories a step created (so uninstall removes only those).
	Dirs map[string]DirRecord `json:"dirs,omitempty"`
	// Steps lists step ids in the order they first recorded a path, so that
	// uninstall can undo them in reverse.
	Steps []string `json:"steps,omitempty"`
	// Extra is room for later capabilities' state, keyed by step id.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// Entry is one owned path.
type Entry struct {
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
	Mode   string `json:"mode"` // octal permission bits, e.g. "0755"
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Target string `json:"target,omitempty"` // a link's target
	// Inode, MtimeNS and CtimeNS let a no-op run trust SHA256 without reading
	// the file: any write or chmod changes ctime, which no one can set back.
	Inode   uint64 `json:"inode,omitempty"`
	MtimeNS int64  `json:"mtime_ns,omitempty"`
	CtimeNS int64  `json:"ctime_ns,omitempty"`
	Step    string `json:"step"`
	Version string `json:"cco_version"`
	// Editable marks a file cco installs once and the operator then owns
	// the content of (sandbox.toml): an edit is not drift.
	Editable bool `json:"editable,omitempty"`
	// Pending is the sha256 of bytes an apply is about to rename into place.
	// It is saved before the rename, so a run killed between the rename and
	// the receipt's update still knows the new bytes are its own.
	Pending string `json:"pending_sha256,omitempty"`
	// Source identifies the file the bytes were copied from (its path and
	// stat), so that an unchanged source need not be re-hashed either.
	Source *SourceStamp `json:"source,omitempty"`
}

// SourceStamp is the identity of a file on the installer's host.
type SourceStamp struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Inode   uint64 `json:"inode"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// Relocation records a file moved out of the way, so it can be put back.
type Relocation struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Step   string `json:"step"`
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256,omitempty"`
	// User is set when From is in that user's home: putting it back then
	// goes through the home's no-symlink resolution.
	User string `json:"user,omitempty"`
	// What says what was found there, for people ("Claude Code's native
	// installer", "the bash claude-sandbox's shadow").
	What string `json:"what,omitempty"`
}

// DirRecord is a directory a step created.
type DirRecord struct {
	Step string `json:"step"`
}

// NewReceipt is an empty receipt.
func NewReceipt() *Receipt {
	return &Receipt{Schema: ReceiptSchema, Paths: map[string]*Entry{}}
}

// LoadReceipt reads the receipt from root; a missing receipt is an empty one.
func LoadReceipt(r *Root) (*Receipt, []byte, error) {
	b, err := r.ReadFile(ReceiptPath)
	if errors.Is(err, fs.ErrNotExist) {
		return NewReceipt(), nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the receipt: %w", err)
	}
	// Decode into a receipt without a schema, so that a file that parses but
	// is not a receipt ("null", "{}") is refused rather than read as empty.
	rc := &Receipt{}
	if err := json.Unmarshal(b, rc); err != nil {
		return nil, nil, fmt.Errorf("the receipt %s does not parse (%v): restore it from a backup, or move it away to start over (cco then treats its files as foreign)", r.HostPath(ReceiptPath), err)
	}
	switch {
	case rc.Schema > ReceiptSchema:
		return nil, nil, fmt.Errorf("the receipt %s has schema %d; this cco reads schema %d: use a newer cco-install", r.HostPath(ReceiptPath), rc.Schema, ReceiptSchema)
	case rc.Schema < 1:
		return nil, nil, fmt.Errorf("the receipt %s has no schema: it is not a cco receipt; restore it from a backup, or move it away to start over (cco then treats its files as foreign)", r.HostPath(ReceiptPath))
	}
	if rc.Paths == nil {
		rc.Paths = map[string]*Entry{}
	}
	return rc, b, nil
}

// Marshal is the receipt's canonical bytes: map keys sorted, so equal content
// gives equal bytes and a no-op run leaves the file byte-identical.
func (rc *Receipt) Marshal() ([]byte, error) {
	// A total order: two relocations of one path (moved aside twice) must
	// not keep their insertion order, or equal receipts differ in bytes.
	sort.SliceStable(rc.Relocations, func(i, j int) bool {
		a, b := rc.Relocations[i], rc.Relocations[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		return a.Step < b.Step
	})
	b, err := json.MarshalIndent(rc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Save writes the receipt atomically when its bytes differ from last, and
// returns the bytes now on disk.
func (rc *Receipt) Save(r *Root, last []byte) ([]byte, error) {
	b, err := rc.Marshal()
	if err != nil {
		return last, err
	}
	if bytes.Equal(b, last) {
		return last, nil
	}
	// No receipt and nothing to record: leave the target as it was (a run
	// that found only conflicts must not create /var/lib/cco).
	if last == nil && rc.empty() {
		return nil, nil
	}
	if _, err := r.MkdirAll(StateDir, 0o755, SystemUID(), SystemGID()); err != nil {
		return last, err
	}
	if err := r.WriteFile(ReceiptPath, bytes.NewReader(b), 0o644, SystemUID(), SystemGID()); err != nil {
		return last, fmt.Errorf("writing the receipt: %w", err)
	}
	return b, nil
}

// Empty reports whether the receipt records nothing: nothing is installed.
func (rc *Receipt) Empty() bool { return rc.empty() }

func (rc *Receipt) empty() bool {
	return len(rc.Paths) == 0 && len(rc.Relocations) == 0 && len(rc.Dirs) == 0 && len(rc.Extra) == 0
}

// Stamp fills the stat-derived fields of e from fi.
func (e *Entry) Stamp(fi fs.FileInfo) {
	e.Mode = fmt.Sprintf("%04o", uint32(fi.Mode().Perm()|fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)))
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.UID, e.GID = int(st.Uid), int(st.Gid)
		e.Inode = st.Ino
		e.MtimeNS = st.Mtim.Nano()
		e.CtimeNS = st.Ctim.Nano()
	}
	if e.Kind == KindFile {
		e.Size = fi.Size()
	}
}

// settle waits until the clock that stamps file times has moved past
// ctimeNS. File times come from a coarse clock (a tick of 1 to 10 ms on
// kernels without fine-grained timestamps): until the tick has passed, a
// write to the file could leave size, inode, mtime and ctime as recorded,
// and the stamp would vouch for bytes that are no longer there.
func settle(ctimeNS int64) {
	deadline := time.Now().Add(50 * time.Millisecond) // a time in the future is not worth waiting for
	for {
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts) != nil || ts.Nano() > ctimeNS || time.Now().After(deadline) {
			return
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// StatMatches reports whether fi is, by size, inode, mtime and ctime, the
// file the entry was stamped from: then its recorded hash can be trusted
// without reading it.
func (e *Entry) StatMatches(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || e.Inode == 0 {
		return false
	}
	return fi.Size() == e.Size && st.Ino == e.Inode && st.Mtim.Nano() == e.MtimeNS && st.Ctim.Nano() == e.CtimeNS
}

// StampSource is the identity of a host file.
func StampSource(path string, fi fs.FileInfo) *SourceStamp {
	s := &SourceStamp{Path: path, Size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Inode, s.MtimeNS, s.CtimeNS = st.Ino, st.Mtim.Nano(), st.Ctim.Nano()
	}
	return s
}

// HashReader returns the hex sha256 of everything r yields, and its length.
func HashReader(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// HashFile hashes target inside root.
func HashFile(r FileReader, target string) (string, error) {
	f, err := r.Open(target)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum, _, err := HashReader(f)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", r.HostPath(target), err)
	}
	return sum, nil
}

// noChown is set for image builds, where a rootless builder denies chown:
// files then keep whatever owner the builder gives them.
var noChown bool

// SetNoChown makes every write leave owners alone (image builds).
func SetNoChown(v bool) { noChown = v }

// planOwner, when set, is the owner that a run which writes nothing (status,
// a dry run) plans for: a non-root caller previews root's run, not a chown
// to itself.
var planOwner *[2]int

// SetPlanOwner sets the owner a read-only run plans for (-1: any owner).
func SetPlanOwner(uid, gid int) { planOwner = &[2]int{uid, gid} }

// SystemUID and SystemGID are the owner of the files cco writes: root's, or
// the invoking user's when an unprivileged run stages into --root; -1 (leave
// the owner alone) in an image build.
func SystemUID() int {
	if noChown {
		return -1
	}
	if planOwner != nil {
		return planOwner[0]
	}
	return os.Geteuid()
}

// SystemGID: see SystemUID.
func SystemGID() int {
	if noChown {
		return -1
	}
	if planOwner != nil {
		return planOwner[1]
	}
	if os.Geteuid() == 0 {
		return 0
	}
	return os.Getegid()
}
