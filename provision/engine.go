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
	// Installed and Available are a vendor step's findings for status: the
	// installed version, and the newer release its channel offers when a
	// bounded check could tell.
	Installed, Available string
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
	// Check inspects the target and reports. It sees the target through a
	// Reader, which has no write method (it may update stat stamps in
	// Receipt, which only an apply saves).
	Check(run *View) (Check, error)
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
	// View is what Checks see; Root below (the same tree) is Apply's, with
	// the write methods.
	View
	Root *Root
	// AfterStep, when set, is called after each applied step: the test seam
	// for crash-safety tests that kill the installer between steps.
	AfterStep func(id string)

	receiptBytes []byte
	backupStamp  string
	// QuietSteps leaves each applied step's line out of the log: the text
	// report that follows lists it, and the operator reads it once.
	QuietSteps bool
	// warnings are what the step being applied asked to tell (Warn).
	warnings []string
	// lockDirs are the directories AcquireLock created for the lock.
	lockDirs []string
}

// NewRun loads the receipt from root and prepares a run.
func NewRun(ctx context.Context, root *Root) (*Run, error) {
	rc, b, err := LoadReceipt(root)
	if err != nil {
		return nil, err
	}
	return &Run{View: View{Ctx: ctx, Root: root.ReadOnly(), Receipt: rc, Log: io.Discard, Now: time.Now}, Root: root, receiptBytes: b}, nil
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

// Warn adds a warning to the report of the step being applied: what the
// operator must hear even when the step succeeded (an integrity failure at
// a source that a fallback then replaced, a check that could not be made).
func (run *Run) Warn(msg string) {
	run.warnings = append(run.warnings, msg)
	run.Logf("warning: %s", msg)
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
		// Interrupted (SIGINT, SIGTERM): the step in flight has rolled
		// back on its context; no further step starts.
		if run.Ctx != nil && run.Ctx.Err() != nil {
			rep.Interrupted = true
			rep.add(StepReport{ID: s.ID(), Name: s.Name(), Status: StatusSkipped, Detail: "not started: the run was interrupted"})
			outcome[s.ID()] = StatusSkipped
			continue
		}
		sr := run.step(s, outcome)
		outcome[s.ID()] = sr.Status
		rep.add(sr)
	}
	if run.Ctx != nil && run.Ctx.Err() != nil {
		rep.Interrupted = true
	}
	if err := run.SaveReceipt(); err != nil {
		rep.add(StepReport{ID: "receipt", Name: "write the receipt", Status: StatusFailed, Detail: err.Error(), Paths: []string{ReceiptPath}})
	}
	return rep
}

// Plan runs every step's Check over the read-only view and reports what an
// apply would do. It is what status and a dry run are: it cannot write.
func Plan(v *View, steps []Step) *Report {
	rep := &Report{Schema: ReportSchema, Version: Version, Root: v.Root.Dir(), DryRun: true}
	outcome := map[string]string{}
	for _, s := range steps {
		sr, _, _ := check(v, s, outcome)
		if sr.Status == "" {
			sr.Status = StatusTodo
		}
		outcome[s.ID()] = sr.Status
		rep.add(sr)
	}
	return rep
}

// check runs one step's Check. An empty status in the report means the step
// has something to apply (c says what).
func check(v *View, s Step, outcome map[string]string) (StepReport, Check, bool) {
	sr := StepReport{ID: s.ID(), Name: s.Name()}
	if n, ok := s.(Needer); ok {
		for _, dep := range n.Needs() {
			// The same in a dry run: it must predict what an apply does.
			if st := outcome[dep]; st == StatusFailed || st == StatusSkipped {
				sr.Status = StatusSkipped
				sr.Detail = fmt.Sprintf("skipped: it needs %s, which %s", dep, st)
				return sr, Check{}, false
			}
		}
	}
	c, err := s.Check(v)
	sr.Paths = c.Paths
	sr.Snippet = c.Snippet
	sr.Warnings = c.Warnings
	sr.Installed, sr.Available = c.Installed, c.Available
	if v.Diff {
		sr.Diff = c.Diff
	}
	if err != nil {
		sr.Status, sr.Detail = StatusFailed, err.Error()
		return sr, c, false
	}
	sr.Detail = c.Detail
	if c.Fix != "" {
		sr.Detail += "; " + c.Fix
	}
	sr.Fix = c.Fix
	switch c.State {
	case Done:
		sr.Status = StatusOK
		return sr, c, false
	case Skip:
		sr.Status = StatusSkipped
		return sr, c, false
	case Conflict:
		if !(v.Force && c.Forceable) {
			sr.Status = StatusConflict
			return sr, c, false
		}
		if v.DryRun {
			sr.Detail += " (--force would replace it, keeping a backup)"
		}
	}
	return sr, c, true
}

func (run *Run) step(s Step, outcome map[string]string) StepReport {
	sr, c, apply := check(run.ReadOnly(), s, outcome)
	if !apply {
		return sr
	}
	if run.DryRun {
		sr.Status = StatusTodo
		return sr
	}
	run.warnings = nil
	detail, err := s.Apply(run, c)
	sr.Warnings = append(sr.Warnings, run.warnings...)
	if saveErr := run.SaveReceipt(); saveErr != nil && err == nil {
		err = saveErr
	}
	if err != nil {
		sr.Status, sr.Detail = StatusFailed, err.Error()
		return sr
	}
	sr.Status, sr.Detail = StatusChanged, detail
	if !run.QuietSteps {
		run.Logf("%s: %s", s.ID(), detail)
	}
	if run.AfterStep != nil {
		run.AfterStep(s.ID())
	}
	return sr
}

// IsRoot reports whether the installer runs with root's privileges.
func IsRoot() bool { return os.Geteuid() == 0 }
