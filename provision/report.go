package provision

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cco-dev/cco/internal/safetext"
)

// ReportSchema is the version of the --json document. Fleet tools parse it:
// fields are only ever added.
const ReportSchema = 1

// Report is the outcome of a run, one entry per step.
type Report struct {
	Schema    int    `json:"schema"`
	Version   string `json:"version"`
	Root      string `json:"root"`
	DryRun    bool   `json:"dry_run"`
	Changed   int    `json:"changed"`
	Conflicts int    `json:"conflicts"`
	Failed    int    `json:"failed"`
	// Interrupted is set when SIGINT or SIGTERM stopped the run.
	Interrupted bool         `json:"interrupted,omitempty"`
	Steps       []StepReport `json:"steps"`
}

// StepReport is one step's line.
type StepReport struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Status   string   `json:"status"`
	Detail   string   `json:"detail"`
	Paths    []string `json:"paths"`
	Snippet  string   `json:"snippet,omitempty"`
	Diff     string   `json:"diff,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Fix is what an operator does about a conflict (also in Detail).
	Fix string `json:"-"`
	// Installed and Available: see Check.
	Installed string `json:"-"`
	Available string `json:"-"`
}

func (rep *Report) add(sr StepReport) {
	if sr.Paths == nil {
		sr.Paths = []string{}
	}
	switch sr.Status {
	case StatusChanged, StatusTodo:
		rep.Changed++
	case StatusConflict:
		rep.Conflicts++
	case StatusFailed:
		rep.Failed++
	}
	rep.Steps = append(rep.Steps, sr)
}

// Add appends a step line to the report (for steps run outside Execute).
func (rep *Report) Add(sr StepReport) { rep.add(sr) }

// ExitCode is ExitFor's: failed steps, then conflicts.
func (rep *Report) ExitCode() int { return ExitFor(rep.Failed, rep.Conflicts) }

// WriteJSON writes the report as exactly one JSON document.
func (rep *Report) WriteJSON(w io.Writer) error {
	if rep.Steps == nil {
		rep.Steps = []StepReport{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteText writes the report for people.
func (rep *Report) WriteText(w io.Writer) {
	width := 0
	for _, s := range rep.Steps {
		width = max(width, len(s.ID))
	}
	for _, s := range rep.Steps {
		// Details, warnings, snippets and diffs quote paths and file
		// contents from homes and foreign files: each goes through the
		// one printer, a detail or a warning as one line.
		safetext.Linef(w, "%-8s %-*s  %s", s.Status, width, s.ID, shorten(s.Detail))
		for _, warn := range s.Warnings {
			safetext.Linef(w, "%-8s %-*s  warning: %s", "", width, "", warn)
		}
		if s.Snippet != "" {
			fmt.Fprintf(w, "%-8s %-*s  merge this by hand:\n", "", width, "")
			for _, l := range strings.Split(strings.TrimRight(s.Snippet, "\n"), "\n") {
				fmt.Fprintf(w, "    %s\n", safetext.Lines(l))
			}
		}
		if s.Diff != "" {
			fmt.Fprint(w, safetext.Lines(s.Diff))
			if !strings.HasSuffix(s.Diff, "\n") {
				fmt.Fprintln(w)
			}
		}
	}
	verb := "changed"
	if rep.DryRun {
		verb = "to change"
	}
	switch {
	case rep.Changed == 0 && rep.Conflicts == 0 && rep.Failed == 0:
		fmt.Fprintf(w, "nothing to do: %d steps, all as they should be\n", len(rep.Steps))
	default:
		fmt.Fprintf(w, "%d %s, %d conflicts, %d failed (of %d steps)\n", rep.Changed, verb, rep.Conflicts, rep.Failed, len(rep.Steps))
	}
}

// maxParts is how many "; "-separated parts of a step's detail the text
// report shows: an uninstall or a login step may name hundreds of paths,
// which the JSON report keeps whole.
const maxParts = 4

// shorten cuts a long list in a detail to its first parts and a count.
func shorten(detail string) string {
	parts := strings.Split(detail, "; ")
	if len(parts) <= maxParts+1 {
		return detail
	}
	return strings.Join(parts[:maxParts], "; ") + fmt.Sprintf("; ... and %d more (--json lists them all)", len(parts)-maxParts)
}
