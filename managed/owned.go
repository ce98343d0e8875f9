package managed

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"

	"github.com/cco-dev/cco/provision"
)

// ownedStep writes one policy file where cco owns it. A foreign file is
// parsed and never modified: it either already does what cco needs
// ("<done> (foreign file ...)", Done), or it is a conflict carrying the
// exact text to merge (a Skip with a warning when the agent's
// foreign_policy is "warn"). Codex's files and Gemini CLI's system settings
// are such files.
type ownedStep struct {
	file   *provision.File
	agent  string // whose foreign_policy key applies
	policy string // ForeignConflict or ForeignWarn
	what   string // what the file must do, for messages
	// done and doneWhy make the Done detail of a foreign file that already
	// does it: "<done> (foreign file <path><doneWhy>)".
	done, doneWhy string
	// syntaxFix is the fix for a foreign file that does not parse.
	syntaxFix string
	// parse reads a foreign file: whether it already does what cco needs,
	// and the snippet to merge into it (the whole of it when err is set).
	parse func(path string, b []byte) (present bool, snippet string, err error)
}

// policyFile is a root-owned 0644 policy file with cco's content.
func policyFile(id, name, path string, content []byte) *provision.File {
	return &provision.File{
		StepID: id, StepName: name, Path: path, Mode: 0o644,
		UID: provision.SystemUID(), GID: provision.SystemGID(), Content: content,
	}
}

func (s *ownedStep) ID() string   { return s.file.StepID }
func (s *ownedStep) Name() string { return s.file.StepName }

func (s *ownedStep) Check(run *provision.View) (provision.Check, error) {
	path := s.file.Path
	fi, err := run.Root.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s.file.Check(run)
	}
	if err != nil {
		return provision.Check{Paths: []string{path}}, err
	}
	if e := run.Receipt.Paths[path]; e != nil && e.Kind == provision.KindFile {
		return s.file.Check(run) // ours: up to date, stale, or edited (forceable)
	}
	return s.foreign(run, fi)
}

func (s *ownedStep) foreign(run *provision.View, fi fs.FileInfo) (provision.Check, error) {
	path := s.file.Path
	c := provision.Check{Paths: []string{path}}
	if fi.IsDir() {
		c.State = provision.Conflict
		c.Detail = path + " is a directory, not a policy file: left as it is"
		c.Fix = "move it away, then run cco-install again"
		return c, nil
	}
	b, err := run.Root.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("reading the foreign %s: %w", run.Root.HostPath(path), err)
	}
	note := ""
	if bytes.HasPrefix(b, []byte(Marker)) {
		note = " (it carries cco's marker line, but the receipt does not list it: it was copied here, or the receipt was lost)"
	}
	present, snippet, perr := s.parse(path, b)
	if perr != nil {
		c.State = provision.Conflict
		c.Detail = perr.Error() + "; not cco's file: left as it is" + note
		c.Fix = s.syntaxFix
		c.Snippet = snippet
		return c, nil
	}
	if present {
		c.State = provision.Done
		c.Detail = s.done + " (foreign file " + path + s.doneWhy + ")" + note
		return c, nil
	}
	c.Snippet = snippet
	key := s.agent + ".foreign_policy"
	if s.policy == ForeignWarn {
		c.State = provision.Skip
		c.Detail = fmt.Sprintf("%s is the site's own file and does not %s: left as it is (%s = %q)%s", path, s.what, key, ForeignWarn, note)
		c.Warnings = []string{fmt.Sprintf("%s does not %s: merge the snippet by hand for cco's guarantees to hold", path, s.what)}
		return c, nil
	}
	c.State = provision.Conflict
	c.Detail = fmt.Sprintf("%s is not cco's and does not %s: left as it is%s", path, s.what, note)
	c.Fix = fmt.Sprintf("merge the snippet below into it by hand, or set %s = %q if the site's policy is deliberate", key, ForeignWarn)
	return c, nil
}

func (s *ownedStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	return s.file.Apply(run, c)
}
