package managed

import (
	"fmt"
	"path"
	"sort"

	"github.com/cco-dev/cco/guard/wiring"
	"github.com/cco-dev/cco/provision"
)

// claudeStep writes cco's Claude Code managed settings (the drop-in, or in
// the legacy mode the base file) and reads, never writes, every other
// managed settings file to report what would defeat the guard.
type claudeStep struct {
	file *provision.File
	base bool
}

func newClaudeStep(cfg Config) *claudeStep {
	s := &claudeStep{base: cfg.ClaudeManagedFile == ClaudeBase}
	f := &provision.File{
		StepID:   "policy.claude",
		StepName: "write Claude Code's managed settings drop-in with cco's guard hooks",
		Path:     wiring.ClaudeDropin,
		Mode:     0o644,
		UID:      provision.SystemUID(),
		GID:      provision.SystemGID(),
		Content:  ClaudeSettings(),
		Fix:      "move it away: cco owns " + wiring.ClaudeDropin + " entirely",
	}
	if s.base {
		f.StepName = "write Claude Code's managed-settings.json with cco's guard hooks"
		f.Path = wiring.ClaudeBase
		f.Fix = fmt.Sprintf("merge the snippet below into it by hand, or set claude.managed_file = %q (the default) so that cco writes its own drop-in instead", ClaudeDropin)
	}
	s.file = f
	return s
}

func (s *claudeStep) ID() string   { return s.file.StepID }
func (s *claudeStep) Name() string { return s.file.StepName }

func (s *claudeStep) Check(run *provision.Run) (provision.Check, error) {
	c, err := s.file.Check(run)
	if err != nil {
		return c, err
	}
	if c.State == provision.Conflict && !c.Forceable && s.base {
		c.Snippet = string(ClaudeSettings())
	}
	c.Warnings = append(c.Warnings, s.defeats(run.Root)...)
	return c, nil
}

func (s *claudeStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	return s.file.Apply(run, c)
}

// defeats reads the other managed settings files in Claude Code's merge
// order and names those that would turn the guard off or replace our
// values: disableAllHooks (a scalar: the last file that sets it wins), an env
// key of ours or enableAllProjectMcpServers set differently by a file merged
// after ours, a file that does not parse.
func (s *claudeStep) defeats(root *provision.Root) []string {
	ours := s.file.Path
	var warns []string
	var disable, mcp *wiring.ClaudeLayer
	layers := wiring.ClaudeLayers(root)
	for i := range layers {
		l := &layers[i]
		if l.Path == ours {
			continue
		}
		// The base file is merged first, then the drop-ins by name.
		after := l.Path != wiring.ClaudeBase && (s.base || path.Base(l.Path) > path.Base(ours))
		if l.Err != nil {
			warns = append(warns, fmt.Sprintf("%v: Claude Code cannot use it; fix it or move it away", l.Err))
			continue
		}
		if l.DisableAllHooks != nil {
			disable = l
		}
		if !after {
			continue
		}
		if l.EnableAllProjectMcpServers != nil {
			mcp = l
		}
		var keys []string
		for k := range l.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if (k == "DISABLE_AUTOUPDATER" || k == "DISABLE_UPDATES") && l.Env[k] != "1" {
				warns = append(warns, fmt.Sprintf("%s is merged after %s and sets env.%s = %q, replacing cco's \"1\": Claude Code may update itself around the shadow; remove that key", l.Path, ours, k, l.Env[k]))
			}
		}
	}
	if mcp != nil && *mcp.EnableAllProjectMcpServers {
		warns = append(warns, fmt.Sprintf("%s is merged after %s and sets enableAllProjectMcpServers: true, so an unwrapped claude starts the servers of any .mcp.json a session wrote, unasked; remove that key", mcp.Path, ours))
	}
	if disable != nil && *disable.DisableAllHooks {
		warns = append(warns, fmt.Sprintf("%s sets disableAllHooks: true, which turns off managed hooks too, so claude runs without cco's guard; remove that key", disable.Path))
	}
	return warns
}
