// Package provision is cco-install's engine: an ordered plan of steps, each
// of which reports whether it is done, still to do (with a diff), or in
// conflict with something it does not own (with the reason and the fix),
// and applies itself atomically while recording what it now owns in the
// receipt. Dry-run, diff and apply are the same Check code; only Apply writes.
package provision

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// Version is cco's version, stamped at build time through -ldflags
// "-X github.com/cco-dev/cco/provision.Version=...".
var Version = "dev"

// State is what a step's Check found.
type State int

const (
	// Done: the target already is as the step wants it.
	Done State = iota
	// ToDo: Apply would change something; Check.Detail (and Diff) say what.
	ToDo
	// Conflict: something the step does not own, or owns but someone edited,
	// stands in the way. Check.Detail says what; Check.Fix says what to do.
	Conflict
	// Skip: the step does not apply here (for example a disabled agent).
	Skip
)

// Check is a step's finding.
type Check struct {
	State  State
	Detail string
	// Diff is a unified diff of what Apply would write (filled on request).
	Diff string
	// Fix says what an operator does about a conflict.
	Fix string
	// Snippet is text to merge by hand into a file cco does not own.
	Snippet string
	// Paths are the target-system paths the step is about.
	Paths []string
	// Forceable marks a conflict that --force may resolve (an owned file that
	// was edited: the old bytes are kept in the backups directory). Foreign
	// files are never forceable.
	Forceable bool
	// Warnings are shown to the operator whatever the state.
	Warnings []string
	// Data carries whatever Check learned that Apply needs (a resolved
	// version, say), so Apply does not have to find it out again.
	Data any
}

// Step is one unit of the plan.
type Step interface {
	// ID is stable and dotted ("shadow.claude"): fleet tools key on it.
	ID() string
	// Name is for people.
	Name() string
	// Check inspects the target and reports; it never writes to the target
	// (it may update stat stamps in run.Receipt, which only an apply saves).
	Check(run *Run) (Check, error)
	// Apply makes the change Check found to do (or, with --force, resolves a
	// forceable conflict) and records what it now owns in run.Receipt. It
	// returns a line saying what it did.
	Apply(run *Run, c Check) (string, error)
}

// Needer is a step that makes sense only when other steps succeeded.
type Needer interface {
	Needs() []string
}

// Run is the context every step sees.
type Run struct {
	Ctx     context.Context
	Root    *Root
	Receipt *Receipt
	DryRun  bool
	Force   bool
	Diff    bool
	// Log receives progress lines for people (stderr, never stdout).
	Log io.Writer
	// Now is the clock, for backup names.
	Now func() time.Time
	// AfterStep, when set, is called after each applied step: the test seam
	// for crash-safety tests that kill the installer between steps.
	AfterStep func(id string)

	receiptBytes []byte
	backupStamp  string
	// lockDirs are the directories AcquireLock created for the lock.
	lockDirs []string
}

// NewRun loads the receipt from root and prepares a run.
func NewRun(ctx context.Context, root *Root) (*Run, error) {
	rc, b, err := LoadReceipt(root)
	if err != nil {
		return nil, err
	}
	return &Run{Ctx: ctx, Root: root, Receipt: rc, receiptBytes: b, Log: io.Discard, Now: time.Now}, nil
}

// Logf writes a progress line for people.
func (run *Run) Logf(format string, args ...any) {
	if run.Log != nil {
		fmt.Fprintf(run.Log, format+"\n", args...)
	}
}

// SaveReceipt writes the receipt if its content changed. Never in a dry run.
func (run *Run) SaveReceipt() error {
	if run.DryRun {
		return nil
	}
	for _, d := range run.lockDirs {
		if _, ok := run.Receipt.Dirs[d]; !ok {
			if run.Receipt.Dirs == nil {
				run.Receipt.Dirs = map[string]DirRecord{}
			}
			run.Receipt.Dirs[d] = DirRecord{Step: "state"}
		}
	}
	b, err := run.Receipt.Save(run.Root, run.receiptBytes)
	run.receiptBytes = b
	return err
}

// BackupDir is this run's directory for the old bytes of files that --force
// replaced: under /var/lib/cco/backups, never next to the file (a backup
// beside /usr/local/bin/claude would be an unwrapped agent on PATH, and one
// beside a policy drop-in a second policy).
func (run *Run) BackupDir() string {
	if run.backupStamp == "" {
		run.backupStamp = run.Now().UTC().Format("20060102T150405Z")
	}
	return StateDir + "/backups/" + run.backupStamp
}

// Statuses in the report.
const (
	StatusOK       = "ok"
	StatusChanged  = "changed"
	StatusTodo     = "todo"
	StatusSkipped  = "skipped"
	StatusConflict = "conflict"
	StatusFailed   = "failed"
)

// Execute runs the plan: every step's Check, then (unless dry-run) Apply for
// those with something to do. A failed step does not stop the others (one
// agent's failure must not cost the other), except the steps that need it.
// The receipt is saved after every step that changed something or failed.
func Execute(run *Run, steps []Step) *Report {
	rep := &Report{Schema: ReportSchema, Version: Version, Root: run.Root.Dir(), DryRun: run.DryRun}
	outcome := map[string]string{}
	for _, s := range steps {
		sr := run.step(s, outcome)
		outcome[s.ID()] = sr.Status
		rep.add(sr)
	}
	if err := run.SaveReceipt(); err != nil {
		rep.add(StepReport{ID: "receipt", Name: "write the receipt", Status: StatusFailed, Detail: err.Error(), Paths: []string{ReceiptPath}})
	}
	return rep
}

func (run *Run) step(s Step, outcome map[string]string) StepReport {
	sr := StepReport{ID: s.ID(), Name: s.Name()}
	if n, ok := s.(Needer); ok {
		for _, dep := range n.Needs() {
			// The same in a dry run: it must predict what an apply does.
			if st := outcome[dep]; st == StatusFailed || st == StatusSkipped {
				sr.Status = StatusSkipped
				sr.Detail = fmt.Sprintf("skipped: it needs %s, which %s", dep, st)
				return sr
			}
		}
	}
	c, err := s.Check(run)
	sr.Paths = c.Paths
	sr.Snippet = c.Snippet
	sr.Warnings = c.Warnings
	if run.Diff {
		sr.Diff = c.Diff
	}
	if err != nil {
		sr.Status, sr.Detail = StatusFailed, err.Error()
		return sr
	}
	sr.Detail = c.Detail
	if c.Fix != "" {
		sr.Detail += "; " + c.Fix
	}
	switch c.State {
	case Done:
		sr.Status = StatusOK
		return sr
	case Skip:
		sr.Status = StatusSkipped
		return sr
	case Conflict:
		if !(run.Force && c.Forceable) {
			sr.Status = StatusConflict
			return sr
		}
	}
	if run.DryRun {
		sr.Status = StatusTodo
		if c.State == Conflict {
			sr.Detail += " (--force would replace it, keeping a backup)"
		}
		return sr
	}
	detail, err := s.Apply(run, c)
	if saveErr := run.SaveReceipt(); saveErr != nil && err == nil {
		err = saveErr
	}
	if err != nil {
		sr.Status, sr.Detail = StatusFailed, err.Error()
		return sr
	}
	sr.Status, sr.Detail = StatusChanged, detail
	run.Logf("%s: %s", s.ID(), detail)
	if run.AfterStep != nil {
		run.AfterStep(s.ID())
	}
	return sr
}

// IsRoot reports whether the installer runs with root's privileges.
func IsRoot() bool { return os.Geteuid() == 0 }
