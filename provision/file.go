package provision

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/safetext"
)

// File is a step that owns one regular file on the target system. Its bytes
// come either from Content or from a file on the installer's host
// (SourcePath, streamed: a source may be hundreds of megabytes).
//
// Ownership rules: an absent file is created; a file the receipt records
// with the same bytes is ours and may be updated; a recorded file whose
// bytes changed was edited by someone and is a conflict (--force keeps the
// old bytes under /var/lib/cco/backups and replaces it); a file that was
// never recorded is foreign and is never overwritten.
type File struct {
	StepID   string
	StepName string
	Path     string // target-system absolute path
	Mode     fs.FileMode
	UID, GID int

	Content    []byte
	SourcePath string // host path; used when Content is nil

	// KeepExisting makes the step install the file only when it is absent:
	// an existing file, foreign or ours but edited, is the operator's and is
	// left as it is (sandbox.toml).
	KeepExisting bool
	// Validate, when set, checks the bytes of a file the step leaves as it
	// is: one that does not pass is a conflict (never replaced: it is the
	// operator's), with ValidateFix as its fix. A run then says what every
	// launch would refuse, as status does.
	Validate    func(b []byte) error
	ValidateFix string
	// Describe, when set, names what a foreign file at Path is (an npm
	// install, a vendor's installer), for the conflict message.
	Describe func(run *View, fi fs.FileInfo) string
	// Fix overrides the default advice for a foreign file.
	Fix string
	// DependsOn lists step ids this step needs.
	DependsOn []string
}

func (f *File) ID() string        { return f.StepID }
func (f *File) Name() string      { return f.StepName }
func (f *File) Needs() []string   { return f.DependsOn }
func (f *File) paths() []string   { return []string{f.target()} }
func (f *File) mode() fs.FileMode { return f.Mode.Perm() }

// target is Path in its canonical form, the receipt's key: "usr/bin/x" and
// "/usr//bin/x" name the same owned file.
func (f *File) target() string { return clean(f.Path) }

// fileData is what Check learned for Apply.
type fileData struct {
	desiredSum string
	backup     bool
}

func (f *File) Check(run *View) (Check, error) {
	c := Check{Paths: f.paths()}
	fi, err := run.Root.Lstat(f.target())
	entry := run.Receipt.Paths[f.target()]
	if errors.Is(err, fs.ErrNotExist) {
		sum, size, err := f.desired(run, nil)
		if err != nil {
			return c, err
		}
		c.State, c.Detail, c.Data = ToDo, fmt.Sprintf("create %s (%d bytes, mode %04o)", f.target(), size, f.mode()), &fileData{desiredSum: sum}
		if run.Diff {
			c.Diff = f.diff(run, nil)
		}
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if entry == nil || entry.Kind != KindFile {
		if f.KeepExisting {
			c.State, c.Detail = Done, fmt.Sprintf("%s exists and is not cco's: left as it is", f.target())
			return f.validate(run, c)
		}
		what := Describe(run.Root, f.target(), fi)
		if f.Describe != nil {
			if d := f.Describe(run, fi); d != "" {
				what = d
			}
		}
		c.State, c.Detail = Conflict, fmt.Sprintf("%s is %s, not written by cco: left as it is", f.target(), what)
		c.Fix = f.Fix
		if c.Fix == "" {
			c.Fix = "move it away (or remove it), then run cco-install again"
		}
		return c, nil
	}
	if !fi.Mode().IsRegular() {
		c.State, c.Detail, c.Forceable = Conflict, fmt.Sprintf("%s was cco's file and is now %s", f.target(), Describe(run.Root, f.target(), fi)), true
		c.Fix = "--force replaces it and keeps what is there under " + StateDir + "/backups"
		c.Data = &fileData{backup: true}
		return c, nil
	}
	current := entry.SHA256
	if !entry.StatMatches(fi) {
		if current, err = HashFile(run.Root, f.target()); err != nil {
			return c, err
		}
		if current == entry.SHA256 {
			// Same bytes, new stat (touched, copied back): refresh the stamp so
			// the next run is fast again. Only an apply saves it.
			entry.Stamp(fi)
			settle(entry.CtimeNS)
		}
	}
	if current != entry.SHA256 && entry.Pending != "" && current == entry.Pending {
		// A run was killed after renaming these bytes into place and before
		// recording them: they are ours.
		// Which source they came from is not known: forget the source stamp,
		// so the desired bytes are hashed again rather than taken as these.
		entry.SHA256, entry.Pending, entry.Source = current, "", nil
		entry.Stamp(fi)
	}
	if current != entry.SHA256 {
		if f.KeepExisting {
			c.State, c.Detail = Done, fmt.Sprintf("%s was edited after cco wrote it: left as it is", f.target())
			return f.validate(run, c)
		}
		c.State, c.Forceable = Conflict, true
		c.Detail = fmt.Sprintf("%s was edited after cco wrote it (sha256 %s, cco wrote %s): left as it is", f.target(), short(current), short(entry.SHA256))
		c.Fix = "undo the edit, or pass --force to replace it (the edited bytes are kept under " + StateDir + "/backups)"
		sum, _, err := f.desired(run, entry)
		if err != nil {
			return c, err
		}
		c.Data = &fileData{backup: true, desiredSum: sum}
		if run.Diff {
			c.Diff = f.diff(run, fi)
		}
		return c, nil
	}
	sum, _, err := f.desired(run, entry)
	if err != nil {
		return c, err
	}
	wantMode := fmt.Sprintf("%04o", uint32(f.mode()))
	switch {
	case sum != current:
		c.State, c.Detail = ToDo, fmt.Sprintf("update %s (sha256 %s -> %s)", f.target(), short(current), short(sum))
		if run.Diff {
			c.Diff = f.diff(run, fi)
		}
	case entry.Mode != wantMode || (f.UID >= 0 && entry.UID != f.UID) || (f.GID >= 0 && entry.GID != f.GID):
		c.State, c.Detail = ToDo, fmt.Sprintf("set %s to mode %s owner %d:%d (is %s %d:%d)", f.target(), wantMode, f.UID, f.GID, entry.Mode, entry.UID, entry.GID)
	default:
		c.State, c.Detail = Done, f.target()+" is up to date"
		return c, nil
	}
	c.Data = &fileData{desiredSum: sum}
	return c, nil
}

// validate checks a file the step leaves as it is: a conflict, with the
// fix, when its bytes do not pass Validate.
func (f *File) validate(run *View, c Check) (Check, error) {
	if f.Validate == nil {
		return c, nil
	}
	b, err := run.Root.ReadFile(f.target())
	if err != nil {
		return c, err
	}
	if err := f.Validate(b); err != nil {
		c.State, c.Detail, c.Fix = Conflict, err.Error(), f.ValidateFix
	}
	return c, nil
}

// desired returns the sha256 and size of the bytes the step wants. For a
// host source whose stat matches the one recorded when cco last copied it,
// the recorded hash is used: a no-op run reads no large file.
func (f *File) desired(run *View, entry *Entry) (string, int64, error) {
	if f.Content != nil {
		s := sha256.Sum256(f.Content)
		return hex.EncodeToString(s[:]), int64(len(f.Content)), nil
	}
	fi, err := os.Stat(f.SourcePath)
	if err != nil {
		return "", 0, fmt.Errorf("source %s: %w", f.SourcePath, err)
	}
	if entry != nil && entry.Source != nil && *entry.Source == *StampSource(f.SourcePath, fi) {
		return entry.SHA256, entry.Size, nil
	}
	src, err := os.Open(f.SourcePath)
	if err != nil {
		return "", 0, fmt.Errorf("source %s: %w", f.SourcePath, err)
	}
	defer src.Close()
	sum, n, err := HashReader(src)
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", f.SourcePath, err)
	}
	return sum, n, nil
}

func (f *File) open() (io.ReadCloser, *SourceStamp, error) {
	if f.Content != nil {
		return io.NopCloser(bytes.NewReader(f.Content)), nil, nil
	}
	src, err := os.Open(f.SourcePath)
	if err != nil {
		return nil, nil, fmt.Errorf("source %s: %w", f.SourcePath, err)
	}
	fi, err := src.Stat()
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	return src, StampSource(f.SourcePath, fi), nil
}

func (f *File) Apply(run *Run, c Check) (string, error) {
	d, _ := c.Data.(*fileData)
	detail := c.Detail
	// The source first: if it cannot be read, a forced run must fail before
	// it has moved the edited file away, not after.
	src, stamp, err := f.open()
	if err != nil {
		return "", err
	}
	defer src.Close()
	if d != nil && d.backup {
		where, err := run.Backup(f.target())
		if err != nil {
			return "", err
		}
		detail = fmt.Sprintf("replaced %s; the old bytes are at %s", f.target(), where)
	} else if strings.HasPrefix(detail, "create ") {
		detail = "created" + strings.TrimPrefix(detail, "create")
	} else if strings.HasPrefix(detail, "update ") {
		detail = "updated" + strings.TrimPrefix(detail, "update")
	}
	if err := run.MkdirAll(path.Dir(f.target()), 0o755, f.ID()); err != nil {
		return "", err
	}
	if d != nil && d.desiredSum != "" {
		if err := run.markPending(f.target(), d.desiredSum, f.ID()); err != nil {
			return "", err
		}
	}
	h := sha256.New()
	if err := run.Root.WriteFile(f.target(), io.TeeReader(src, h), f.mode(), f.UID, f.GID); err != nil {
		run.dropPending(f.target())
		return "", err
	}
	if err := run.Record(f.target(), KindFile, hex.EncodeToString(h.Sum(nil)), f.ID()); err != nil {
		return "", err
	}
	run.Receipt.Paths[f.target()].Source = stamp
	run.Receipt.Paths[f.target()].Editable = f.KeepExisting
	return detail, nil
}

// markPending saves, before a file is replaced, the hash of the bytes about
// to replace it (see Entry.Pending).
func (run *Run) markPending(target, sum, step string) error {
	e := run.Receipt.Paths[target]
	if e == nil {
		e = &Entry{Kind: KindFile, Step: step, Version: Version}
		run.Receipt.Paths[target] = e
	}
	e.Pending = sum
	return run.SaveReceipt()
}

// dropPending withdraws a pending mark after a failed write.
func (run *Run) dropPending(target string) {
	if e := run.Receipt.Paths[target]; e != nil {
		if e.SHA256 == "" {
			delete(run.Receipt.Paths, target)
		} else {
			e.Pending = ""
		}
	}
}

// Record stamps an owned path into the receipt from what is now on disk.
func (run *Run) Record(target, kind, sum, step string) error {
	fi, err := run.Root.Lstat(target)
	if err != nil {
		return err
	}
	e := &Entry{Kind: kind, SHA256: sum, Step: step, Version: Version}
	if kind == KindLink {
		if e.Target, err = run.Root.Readlink(target); err != nil {
			return err
		}
	}
	e.Stamp(fi)
	settle(e.CtimeNS)
	run.Receipt.Paths[clean(target)] = e
	if !slices.Contains(run.Receipt.Steps, step) {
		run.Receipt.Steps = append(run.Receipt.Steps, step)
	}
	return nil
}

// MkdirAll creates a directory and records the ones it created.
func (run *Run) MkdirAll(dir string, mode fs.FileMode, step string) error {
	created, err := run.Root.MkdirAll(dir, mode, SystemUID(), SystemGID())
	for _, d := range created {
		if run.Receipt.Dirs == nil {
			run.Receipt.Dirs = map[string]DirRecord{}
		}
		run.Receipt.Dirs[d] = DirRecord{Step: step}
	}
	return err
}

// Backup moves target into this run's backups directory and returns where.
func (run *Run) Backup(target string) (string, error) {
	dst := run.BackupDir() + clean(target)
	// Two forced runs in one second share a backup directory: never let the
	// second replace the first's backup, which holds someone's edit.
	for i := 1; ; i++ {
		if _, err := run.Root.Lstat(dst); err != nil {
			break
		}
		dst = fmt.Sprintf("%s%s.%d", run.BackupDir(), clean(target), i)
	}
	if err := run.MkdirAll(path.Dir(dst), 0o700, "backups"); err != nil {
		return "", err
	}
	if err := run.Root.Rename(target, dst); err != nil {
		return "", fmt.Errorf("keeping a backup of %s: %w", target, err)
	}
	return dst, nil
}

func (f *File) diff(run *View, fi fs.FileInfo) string {
	// The report prints the diff through the one printer as lines; the
	// path in its headers is one line.
	target := safetext.Escape(f.target())
	var old []byte
	if fi != nil {
		if fi.Size() > 1<<20 {
			return fmt.Sprintf("(%s: a large file, its diff is not shown)\n", target)
		}
		b, err := run.Root.ReadFile(f.target())
		if err != nil {
			return ""
		}
		old = b
	}
	var new []byte
	if f.Content != nil {
		new = f.Content
	} else if st, err := os.Stat(f.SourcePath); err == nil && st.Size() <= 1<<20 {
		new, _ = os.ReadFile(f.SourcePath)
	} else {
		return fmt.Sprintf("(%s: a large file, its diff is not shown)\n", target)
	}
	// A binary gets one line, no diff headers: a patch tool would take
	// headers for a patch it cannot apply.
	if !isText(old) || !isText(new) {
		return fmt.Sprintf("(%s: a binary file, its diff is not shown)\n", target)
	}
	oldLabel := target
	if fi == nil {
		oldLabel = "/dev/null"
	}
	return udiff.Unified(oldLabel, target, string(old), string(new))
}

func isText(b []byte) bool {
	return utf8.Valid(b) && !bytes.ContainsRune(b, 0)
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// DescribeForeign names what a path that cco does not own is, as precisely
// as the file itself tells: operators must know what they are asked to move.
func DescribeForeign(run *Run, target string, fi fs.FileInfo) string {
	return Describe(run.Root, target, fi)
}

// Describe is DescribeForeign over any reader of the target.
func Describe(r FileReader, target string, fi fs.FileInfo) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		l, _ := r.Readlink(target)
		if strings.Contains(l, "node_modules") {
			return fmt.Sprintf("a symlink to %s (an npm global install)", l)
		}
		// The vendors' own installers, as each profile tells them apart.
		for _, p := range agent.All() {
			for _, hl := range p.Installers.HomeLinks {
				if strings.Contains(l, hl[0]) {
					return fmt.Sprintf("a symlink to %s (%s)", l, hl[1])
				}
			}
		}
		return fmt.Sprintf("a symlink to %s", l)
	case fi.IsDir():
		return "a directory"
	case fi.Mode().IsRegular():
		if f, err := r.Open(target); err == nil {
			head := make([]byte, 256)
			n, _ := io.ReadFull(f, head)
			f.Close()
			head = head[:n]
			if bytes.HasPrefix(head, []byte("#!")) {
				line, _, _ := bytes.Cut(head, []byte("\n"))
				if bytes.Contains(head, []byte("claude-sandbox")) {
					return "a script (" + string(line) + ") from the bash claude-sandbox"
				}
				return "a script (" + string(line) + ")"
			}
		}
		return fmt.Sprintf("a file of %d bytes", fi.Size())
	}
	return "a " + fi.Mode().Type().String() + " file"
}
