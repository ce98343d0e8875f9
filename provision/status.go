package provision

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/cco-dev/cco/internal/safetext"
)

// Statuses of an owned path in `cco-install status`.
const (
	PathOK      = "ok"
	PathDrift   = "drift"
	PathMissing = "missing"
	PathError   = "error"
)

// PathStatus is one owned path compared with the receipt.
type PathStatus struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Step   string `json:"step"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	// Fix is the command that puts the path back as installed.
	Fix string `json:"fix,omitempty"`
}

// StatusReport is the outcome of `cco-install status`. It follows the
// install report's conventions: schema, version, root, counts, then lines.
type StatusReport struct {
	Schema   int          `json:"schema"`
	Version  string       `json:"version"`
	Root     string       `json:"root"`
	Verified bool         `json:"verified"`
	InSync   bool         `json:"in_sync"`
	Drift    int          `json:"drift"`
	Failed   int          `json:"failed"`
	Paths    []PathStatus `json:"paths"`
	Findings []Finding    `json:"findings"`
}

// CheckReceipt compares every owned path with the receipt. Without verify a
// file whose stat stamp matches is trusted; with verify every file is
// re-hashed. A file whose stamp differs is always hashed, so a mere touch is
// not reported as drift.
func CheckReceipt(root *Root, rc *Receipt, verify bool) *StatusReport {
	rep := &StatusReport{Schema: ReportSchema, Version: Version, Root: root.Dir(), Verified: verify, Paths: []PathStatus{}, Findings: []Finding{}}
	names := make([]string, 0, len(rc.Paths))
	for p := range rc.Paths {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		e := rc.Paths[p]
		ps := PathStatus{Path: p, Kind: e.Kind, Step: e.Step, Status: PathOK}
		ps.Status, ps.Detail, ps.Fix = checkEntry(root, p, e, verify)
		rep.AddPath(ps)
	}
	return rep
}

// AddPath appends a path line and counts it.
func (rep *StatusReport) AddPath(ps PathStatus) {
	switch ps.Status {
	case PathDrift, PathMissing:
		rep.Drift++
	case PathError:
		rep.Failed++
	}
	rep.Paths = append(rep.Paths, ps)
	rep.InSync = rep.Drift == 0 && rep.Failed == 0
}

// AddFinding appends a drift finding, found by a check other than the
// receipt's (a vendor binary ahead of the shadow on a user's PATH, a
// defeated policy).
func (rep *StatusReport) AddFinding(f Finding) {
	rep.Drift++
	rep.Findings = append(rep.Findings, f)
	rep.InSync = false
}

// AddFailure appends a finding about a check that could not be made. It
// counts as a failure, not as drift.
func (rep *StatusReport) AddFailure(f Finding) {
	rep.Failed++
	rep.Findings = append(rep.Findings, f)
	rep.InSync = false
}

// The fixes of an owned path's drift: a run puts back what is missing or
// has another mode; what someone replaced or changed is theirs until
// --force, which keeps it under the backups directory.
const (
	fixRun   = "sudo cco-install"
	fixForce = "sudo cco-install --force (what is there now is kept under " + StateDir + "/backups)"
)

func checkEntry(root *Root, p string, e *Entry, verify bool) (status, detail, fix string) {
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return PathMissing, p + " is missing: run cco-install to put it back", fixRun
	}
	if err != nil {
		return PathError, err.Error(), ""
	}
	switch e.Kind {
	case KindLink:
		if fi.Mode()&fs.ModeSymlink == 0 {
			return PathDrift, p + " is no longer a symlink", fixForce
		}
		l, err := root.Readlink(p)
		if err != nil {
			return PathError, err.Error(), ""
		}
		if l != e.Target {
			return PathDrift, fmt.Sprintf("%s points at %s, not %s", p, l, e.Target), fixForce
		}
	case KindDir:
		if !fi.IsDir() {
			return PathDrift, p + " is no longer a directory", fixForce
		}
	default:
		if !fi.Mode().IsRegular() {
			return PathDrift, p + " is no longer a regular file", fixForce
		}
		if verify || !e.StatMatches(fi) {
			sum, err := HashFile(root, p)
			if err != nil {
				return PathError, err.Error(), ""
			}
			if sum != e.SHA256 && e.Editable {
				return PathOK, p + " was edited locally: the operator's to change", ""
			}
			if sum != e.SHA256 {
				return PathDrift, fmt.Sprintf("%s was changed (sha256 %s, cco wrote %s)", p, short(sum), short(e.SHA256)), fixForce
			}
		}
		if got := fmt.Sprintf("%04o", uint32(fi.Mode().Perm()|fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))); got != e.Mode {
			return PathDrift, fmt.Sprintf("%s has mode %s, cco set %s", p, got, e.Mode), fixRun
		}
	}
	return PathOK, "as installed", ""
}

// ExitCode is ExitFor's: checks that failed, then drift.
func (rep *StatusReport) ExitCode() int { return ExitFor(rep.Failed, rep.Drift) }

// WriteJSON writes the status as one JSON document.
func (rep *StatusReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteText writes the status for people.
func (rep *StatusReport) WriteText(w io.Writer) {
	for _, p := range rep.Paths {
		if p.Status != PathOK {
			safetext.Linef(w, "%-8s %s", p.Status, p.Detail)
			if p.Fix != "" {
				safetext.Linef(w, "%-8s fix: %s", "", p.Fix)
			}
		}
	}
	for _, f := range rep.Findings {
		safetext.Linef(w, "%-8s %s", "drift", f.Detail)
		if f.Fix != "" {
			safetext.Linef(w, "%-8s fix: %s", "", f.Fix)
		}
	}
	if rep.InSync {
		fmt.Fprintf(w, "in sync: %d owned paths as installed\n", len(rep.Paths))
	} else {
		fmt.Fprintf(w, "%d drifted, %d errors (of %d owned paths)\n", rep.Drift, rep.Failed, len(rep.Paths))
	}
}
