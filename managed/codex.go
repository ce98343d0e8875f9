package managed

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/guard/wiring"
	"github.com/cco-dev/cco/provision"
)

// codexStep writes one Codex policy file where cco owns it. A foreign file
// is parsed and never modified: it either already does what cco needs
// ("present (foreign file)", Done), or it is a conflict carrying the exact
// TOML to merge (a Skip with a warning when codex.foreign_policy is "warn").
type codexStep struct {
	file    *provision.File
	policy  string
	what    string                          // what the file must do, for messages
	present func(wiring.CodexPolicy) bool   // the foreign file already does it
	snippet func(wiring.CodexPolicy) string // what to merge into the foreign file
}

func newRequirementsStep(cfg Config) *codexStep {
	return &codexStep{
		file:   codexFile("policy.codex.requirements", "write Codex's requirements.toml with cco's guard hooks", wiring.CodexRequirements, CodexRequirements()),
		policy: foreignPolicy(cfg),
		what:   "wire cco's guard hooks",
		present: func(p wiring.CodexPolicy) bool {
			return p.Wires() && (p.FeatureHooks == nil || *p.FeatureHooks)
		},
		snippet: requirementsSnippet,
	}
}

func newManagedConfigStep(cfg Config) *codexStep {
	return &codexStep{
		file:   codexFile("policy.codex.managed-config", "write Codex's managed_config.toml that turns off its own update check", wiring.CodexManagedConfig, CodexManagedConfig()),
		policy: foreignPolicy(cfg),
		what:   "set check_for_update_on_startup = false",
		present: func(p wiring.CodexPolicy) bool {
			return p.CheckForUpdate != nil && !*p.CheckForUpdate
		},
		snippet: func(p wiring.CodexPolicy) string {
			if p.CheckForUpdate != nil {
				return "# change the existing top-level key to:\ncheck_for_update_on_startup = false\n"
			}
			return "# at the top level, before the first [table] header:\ncheck_for_update_on_startup = false\n"
		},
	}
}

func foreignPolicy(cfg Config) string {
	if cfg.CodexForeignPolicy == "" {
		return ForeignConflict
	}
	return cfg.CodexForeignPolicy
}

func codexFile(id, name, path string, content []byte) *provision.File {
	return &provision.File{
		StepID: id, StepName: name, Path: path, Mode: 0o644,
		UID: provision.SystemUID(), GID: provision.SystemGID(), Content: content,
	}
}

// requirementsSnippet is the TOML to append to a foreign requirements.toml:
// only what it lacks, and for a [features] table it already has, the one key
// to put there (appending a second [features] header would not parse).
func requirementsSnippet(p wiring.CodexPolicy) string {
	var b strings.Builder
	b.WriteString("# cco's guard hooks (" + guard.PromptGateScript + ", " + guard.SessionStartScript + ")\n")
	switch {
	case !p.Features:
		b.WriteString("[features]\nhooks = true\n\n")
	case p.FeatureHooks == nil:
		b.WriteString("# add to the existing [features] table:\n#   hooks = true\n\n")
	case !*p.FeatureHooks:
		b.WriteString("# in the existing [features] table, change hooks = false to:\n#   hooks = true\n\n")
	}
	b.WriteString(codexHooks(!p.SessionStart, !p.PromptGate))
	return b.String()
}

func (s *codexStep) ID() string   { return s.file.StepID }
func (s *codexStep) Name() string { return s.file.StepName }

func (s *codexStep) Check(run *provision.View) (provision.Check, error) {
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

func (s *codexStep) foreign(run *provision.View, fi fs.FileInfo) (provision.Check, error) {
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
	p, perr := wiring.ParseCodexPolicy(path, b)
	if perr != nil {
		c.State = provision.Conflict
		c.Detail = perr.Error() + "; not cco's file: left as it is" + note
		c.Fix = "fix the TOML at that line (codex refuses a policy file that does not parse), then run cco-install again"
		c.Snippet = s.snippet(wiring.CodexPolicy{})
		return c, nil
	}
	if s.present(p) {
		c.State = provision.Done
		c.Detail = "guard present (foreign file " + path + ")" + note
		if s.file.StepID != "policy.codex.requirements" {
			c.Detail = "present (foreign file " + path + " already sets check_for_update_on_startup = false)" + note
		}
		return c, nil
	}
	c.Snippet = s.snippet(p)
	if s.policy == ForeignWarn {
		c.State = provision.Skip
		c.Detail = fmt.Sprintf("%s is the site's own file and does not %s: left as it is (codex.foreign_policy = %q)%s", path, s.what, ForeignWarn, note)
		c.Warnings = []string{fmt.Sprintf("%s does not %s: merge the snippet by hand for cco's guarantees to hold", path, s.what)}
		return c, nil
	}
	c.State = provision.Conflict
	c.Detail = fmt.Sprintf("%s is not cco's and does not %s: left as it is%s", path, s.what, note)
	c.Fix = fmt.Sprintf("merge the snippet below into it by hand, or set codex.foreign_policy = %q if the site's policy is deliberate", ForeignWarn)
	return c, nil
}

func (s *codexStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	return s.file.Apply(run, c)
}
