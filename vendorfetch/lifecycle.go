package vendorfetch

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/cco-dev/cco/provision"
)

// compareVersions orders versions of the checked shape (digits and dots, an
// optional -suffix): numerically part by part, and a -suffix (a pre-release)
// before the plain version.
func compareVersions(a, b string) int {
	an, as, _ := strings.Cut(a, "-")
	bn, bs, _ := strings.Cut(b, "-")
	ap, bp := strings.Split(an, "."), strings.Split(bn, ".")
	for i := 0; i < max(len(ap), len(bp)); i++ {
		var x, y int
		if i < len(ap) {
			x, _ = strconv.Atoi(ap[i])
		}
		if i < len(bp) {
			y, _ = strconv.Atoi(bp[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case as == bs:
		return 0
	case as == "":
		return 1
	case bs == "":
		return -1
	}
	return strings.Compare(as, bs)
}

// forwardOnly refuses a channel that names an older release than the one
// installed: a store or a mirror must not be able to force an old,
// vulnerable release. A pin is the operator's own choice and may go back.
func forwardOnly(cfg Config, agent string, st *agentState, pin, resolved string) error {
	if st == nil || pin != "" || cfg.AllowDowngrade || compareVersions(resolved, st.Version) >= 0 {
		return nil
	}
	return fmt.Errorf("%s: the channel names %s, older than the installed %s: refusing to downgrade (pass --allow-downgrade if this is meant, or --rollback %s to go back to the previous version)", agent, resolved, st.Version, agent)
}

// RollbackSteps switch each agent's `current` back to the previous version
// the receipt records (rollback.claude, rollback.codex); the version that was
// current becomes the previous one.
func RollbackSteps(cfg Config, agents []string) []provision.Step {
	var out []provision.Step
	for _, a := range agents {
		switch a {
		case AgentClaude:
			out = append(out, &rollbackStep{agent: a, step: StepClaude, dir: ClaudeDir, entry: "claude"})
		case AgentCodex:
			out = append(out, &rollbackStep{agent: a, step: StepCodex, dir: CodexDir, entry: "bin/codex"})
		}
	}
	return out
}

type rollbackStep struct{ agent, step, dir, entry string }

func (s *rollbackStep) ID() string   { return "rollback." + s.agent }
func (s *rollbackStep) Name() string { return "switch " + s.agent + " back to its previous version" }

func (s *rollbackStep) Check(run *provision.Run) (provision.Check, error) {
	c := provision.Check{Paths: []string{s.dir + "/current"}}
	st := loadState(run, s.step)
	if st == nil {
		return c, fmt.Errorf("%s is not installed by cco: nothing to roll back (install it with sudo cco-install)", s.agent)
	}
	if st.Previous == "" {
		return c, fmt.Errorf("%s %s has no previous version to roll back to", s.agent, st.Version)
	}
	bin := s.dir + "/" + st.Previous + "/" + s.entry
	if fi, err := run.Root.Lstat(bin); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return c, fmt.Errorf("%s: the previous version %s is no longer at %s: reinstall it with a pin (%s.version = %q)", s.agent, st.Previous, bin, s.agent, st.Previous)
	}
	if e := run.Receipt.Paths[bin]; e == nil {
		return c, fmt.Errorf("%s: %s is not recorded in the receipt: refusing to switch to bytes cco did not verify", s.agent, bin)
	} else if !e.StatMatches(mustLstat(run, bin)) {
		if sum, err := provision.HashFile(run.Root, bin); err != nil || sum != e.SHA256 {
			return c, fmt.Errorf("%s: %s changed since cco verified it: reinstall it with a pin (%s.version = %q)", s.agent, bin, s.agent, st.Previous)
		}
	}
	c.State, c.Data = provision.ToDo, st
	c.Detail = fmt.Sprintf("switch %s from %s back to %s", s.agent, st.Version, st.Previous)
	return c, nil
}

func mustLstat(run *provision.Run, p string) fs.FileInfo {
	fi, _ := run.Root.Lstat(p)
	return fi
}

func (s *rollbackStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	st := c.Data.(*agentState)
	link := s.dir + "/current"
	if err := run.Root.Symlink(st.Previous, link); err != nil {
		return "", err
	}
	if err := run.Record(link, provision.KindLink, "", s.step); err != nil {
		return "", err
	}
	from := st.Version
	st.Version, st.Previous = st.Previous, from
	if err := saveState(run, s.step, st); err != nil {
		return "", err
	}
	return fmt.Sprintf("switched %s from %s back to %s (roll forward with --upgrade %s)", s.agent, from, st.Version, s.agent), nil
}
