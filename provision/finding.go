package provision

import "strings"

// Exit codes of cco-install.
const (
	ExitOK       = 0
	ExitFailed   = 1
	ExitUsage    = 2
	ExitConflict = 3
)

// ExitFor is the one exit rule of every report cco-install writes: 1 when
// anything failed, else 3 when a conflict or a drift is left for the
// operator, else 0. A failure outranks a conflict because a run that could
// not look cannot say the host is otherwise in order.
func ExitFor(failed, unresolved int) int {
	switch {
	case failed > 0:
		return ExitFailed
	case unresolved > 0:
		return ExitConflict
	}
	return ExitOK
}

// Finding is one thing an operator must act on: what is wrong, where, and
// the fix. Status lists its drift as findings, the preflight checks refuse
// a run with them, and the guard's wiring check returns them.
type Finding struct {
	ID     string `json:"id"`
	Path   string `json:"path,omitempty"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// String is the finding on one line, the fix last.
func (f Finding) String() string {
	if f.Fix == "" {
		return f.Detail
	}
	return f.Detail + ": " + f.Fix
}

// Finding is a step's line as a finding. The detail loses the fix that
// Execute appended to it, since the finding carries the fix apart.
func (sr StepReport) Finding() Finding {
	f := Finding{ID: sr.ID, Detail: sr.Detail, Fix: sr.Fix}
	if len(sr.Paths) > 0 {
		f.Path = sr.Paths[0]
	}
	if sr.Fix != "" {
		f.Detail = strings.TrimSuffix(f.Detail, "; "+sr.Fix)
	}
	return f
}
