package provision

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
)

// Uninstall undoes exactly what the receipt records: owned files and links
// are removed (never one whose bytes differ from the receipt, unless Force,
// which keeps a backup), relocated vendor files are put back, the
// directories cco created are removed when empty, and the receipt goes last.
// It keeps going past errors and reports each one.
func Uninstall(run *Run) *Report {
	rep := &Report{Schema: ReportSchema, Version: Version, Root: run.Root.Dir(), DryRun: run.DryRun}
	rc := run.Receipt
	if rc.empty() {
		// Nothing is installed: a second uninstall changes nothing and
		// says so (an Ansible state: absent is then ok, not changed).
		rep.add(StepReport{ID: "uninstall.receipt", Name: "remove the receipt", Status: StatusOK, Paths: []string{ReceiptPath},
			Detail: "nothing to uninstall: there is no receipt at " + ReceiptPath + " (cco is not installed here)"})
		return rep
	}

	// Owned paths, grouped by step, undone in the reverse of the order the
	// steps first recorded something.
	byStep := map[string][]string{}
	for p, e := range rc.Paths {
		byStep[e.Step] = append(byStep[e.Step], p)
	}
	order := append([]string(nil), rc.Steps...)
	for _, step := range deepestFirst(keysOf(byStep)) {
		if !slices.Contains(order, step) {
			order = append([]string{step}, order...)
		}
	}
	for i := len(order) - 1; i >= 0; i-- {
		step := order[i]
		paths := deepestFirst(byStep[step])
		if len(paths) == 0 {
			continue
		}
		sr := StepReport{ID: "uninstall." + step, Name: "remove what " + step + " installed", Paths: paths}
		var done, problems []string
		conflict := false
		for _, p := range paths {
			msg, err := run.removeOwned(p, rc.Paths[p])
			switch {
			case errors.Is(err, errEdited):
				conflict = true
				problems = append(problems, msg)
			case err != nil:
				sr.Status = StatusFailed
				problems = append(problems, err.Error())
			default:
				if !run.DryRun {
					delete(rc.Paths, p)
				}
				done = append(done, msg)
			}
		}
		switch {
		case sr.Status == StatusFailed:
		case conflict:
			sr.Status = StatusConflict
		case run.DryRun:
			sr.Status = StatusTodo
		default:
			sr.Status = StatusChanged
		}
		sr.Detail = strings.Join(append(problems, done...), "; ")
		rep.add(sr)
		run.SaveReceipt()
	}

	// Relocated vendor files go back where they were, now that the names are free.
	var kept []Relocation
	for i := len(rc.Relocations) - 1; i >= 0; i-- {
		r := rc.Relocations[i]
		sr := StepReport{ID: "uninstall.restore", Name: "put back " + r.From, Paths: []string{r.From}}
		if err := run.restore(r); err != nil {
			sr.Status, sr.Detail = StatusFailed, err.Error()
			kept = append(kept, r)
		} else if run.DryRun {
			sr.Status, sr.Detail = StatusTodo, fmt.Sprintf("move %s back to %s", r.To, r.From)
		} else {
			sr.Status, sr.Detail = StatusChanged, fmt.Sprintf("moved %s back to %s", r.To, r.From)
		}
		rep.add(sr)
	}
	if !run.DryRun {
		rc.Relocations = kept
		run.SaveReceipt()
	}

	// The receipt goes last, and only when nothing it records is left.
	sr := StepReport{ID: "uninstall.receipt", Name: "remove the receipt", Paths: []string{ReceiptPath}}
	keep := len(rc.Paths) > 0 || len(rc.Relocations) > 0
	switch {
	case keep:
		sr.Status, sr.Detail = StatusSkipped, fmt.Sprintf("kept: it still records %d paths and %d relocations", len(rc.Paths), len(rc.Relocations))
	case run.DryRun:
		sr.Status, sr.Detail = StatusTodo, "remove "+ReceiptPath
	default:
		sr.Status, sr.Detail = StatusChanged, "removed "+ReceiptPath
		for _, p := range []string{ReceiptPath, LockPath} {
			if err := run.Root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				sr.Status, sr.Detail = StatusFailed, err.Error()
			}
		}
		run.receiptBytes = nil
	}

	// Then the directories cco created, deepest first, when they are empty.
	if !run.DryRun {
		var left []string
		for _, d := range deepestFirst(keysOf(rc.Dirs)) {
			if err := run.Root.Remove(d); err == nil || errors.Is(err, fs.ErrNotExist) {
				delete(rc.Dirs, d)
			} else if !(keep && (d == StateDir || strings.HasPrefix(StateDir, d+"/"))) {
				left = append(left, d)
			}
		}
		if len(left) > 0 {
			rep.add(StepReport{ID: "uninstall.dirs", Name: "remove the directories cco created", Status: StatusOK, Paths: left,
				Detail: "left in place because they are not empty (files created since): " + strings.Join(left, ", ")})
		}
		if keep {
			run.SaveReceipt()
		}
	}
	rep.add(sr)
	return rep
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// deepestFirst orders paths so that everything inside a directory comes
// before the directory itself.
func deepestFirst(paths []string) []string {
	sort.Slice(paths, func(i, j int) bool {
		if di, dj := strings.Count(paths[i], "/"), strings.Count(paths[j], "/"); di != dj {
			return di > dj
		}
		return paths[i] > paths[j]
	})
	return paths
}

var errEdited = errors.New("edited since cco wrote it")

// removeOwned removes one owned path if it is still as cco left it.
func (run *Run) removeOwned(p string, e *Entry) (string, error) {
	fi, err := run.Root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return p + " was already gone", nil
	}
	if err != nil {
		return "", err
	}
	status, detail, _ := checkEntry(run.Root, p, e, false)
	if status == PathError {
		return "", errors.New(detail)
	}
	if e.Editable && e.Kind == KindFile && fi.Mode().IsRegular() {
		// An operator's edit is "fine" for status, but never ours to delete.
		if sum, err := HashFile(run.Root, p); err != nil {
			return "", err
		} else if sum != e.SHA256 {
			status, detail = PathDrift, p+" was edited locally"
		}
	}
	if status == PathDrift && !(e.Kind == KindFile && strings.Contains(detail, "mode")) {
		if !run.Force {
			return fmt.Sprintf("%s left in place: %s (--force removes it, keeping a backup)", p, detail), errEdited
		}
		if run.DryRun {
			return "back up and remove " + p, nil
		}
		where, err := run.Backup(p)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("moved the edited %s to %s", p, where), nil
	}
	if run.DryRun {
		return "remove " + p, nil
	}
	if fi.IsDir() {
		if err := run.Root.Remove(p); err != nil {
			return "", fmt.Errorf("removing %s: %w", p, err)
		}
		return "removed " + p, nil
	}
	if err := run.Root.Remove(p); err != nil {
		return "", err
	}
	return "removed " + p, nil
}

// restore puts a relocated file back, unless something new stands there.
func (run *Run) restore(r Relocation) error {
	if _, err := run.Root.Lstat(r.To); err != nil {
		return fmt.Errorf("the relocated copy %s is gone: %w", r.To, err)
	}
	if r.User != "" {
		u, err := LookupUser(run.Root, r.User)
		if err != nil {
			return err
		}
		h, err := run.Root.OpenHome(u)
		if err != nil {
			return err
		}
		defer h.Close()
		rel := strings.TrimPrefix(strings.TrimPrefix(r.From, path.Clean(u.Home)), "/")
		if run.DryRun {
			return nil
		}
		return h.MoveIn(r.To, rel)
	}
	// A dry run has not removed the owned file (the shadow) that the real
	// run removes first: that one is no obstacle.
	if _, err := run.Root.Lstat(r.From); err == nil && !(run.DryRun && run.Receipt.Paths[r.From] != nil) {
		return fmt.Errorf("%s exists again (a new install?): the original stays at %s; move it back by hand if you want it", r.From, r.To)
	}
	if run.DryRun {
		return nil
	}
	if _, err := run.Root.MkdirAll(path.Dir(r.From), 0o755, SystemUID(), SystemGID()); err != nil {
		return err
	}
	return run.Root.Rename(r.To, r.From)
}
