package vendorfetch

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/cco-dev/cco/provision"
)

// compareVersions is the one order of versions: semantic versioning's
// (Masterminds/semver, lenient: "1.2" is 1.2.0), so a pre-release such as
// 1.2.0-beta.1 sorts before 1.2.0. Versions are checked by CheckVersion first;
// one that still does not parse sorts before every one that does, so an odd
// name never wins an upgrade.
func compareVersions(a, b string) int {
	va, ea := semver.NewVersion(a)
	vb, eb := semver.NewVersion(b)
	switch {
	case ea == nil && eb == nil:
		return va.Compare(vb)
	case ea == nil:
		return 1
	case eb == nil:
		return -1
	}
	return strings.Compare(a, b)
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
// the receipt records (rollback.claude, rollback.codex, rollback.gemini); the
// version that was current becomes the previous one.
func RollbackSteps(cfg Config, agents []string) []provision.Step {
	var out []provision.Step
	for _, name := range agents {
		if a, ok := lookupAgent(name); ok {
			out = append(out, &rollbackStep{agent: a.name, step: a.step, dir: a.dir, entry: a.entry, exec: a.exec, va: a, cfg: cfg})
		}
	}
	return out
}

type rollbackStep struct {
	agent, step, dir, entry string
	exec                    bool
	// va and cfg are for the interpreter link, when the agent has one.
	va  vendorAgent
	cfg Config
}

// rollbackPlan is the rollback's state, and the interpreter to link the
// previous version to first ("" when its link is right).
type rollbackPlan struct {
	st     *agentState
	relink string
}

func (s *rollbackStep) ID() string   { return "rollback." + s.agent }
func (s *rollbackStep) Name() string { return "switch " + s.agent + " back to its previous version" }

func (s *rollbackStep) Check(run *provision.View) (provision.Check, error) {
	c := provision.Check{Paths: []string{s.dir + "/current"}}
	st := loadState(run, s.step)
	if st == nil {
		return c, fmt.Errorf("%s is not installed by cco: nothing to roll back (install it with sudo cco-install)", s.agent)
	}
	if st.Previous == "" {
		return c, fmt.Errorf("%s %s has no previous version to roll back to", s.agent, st.Version)
	}
	// After a rollback the previous version is the newer one: going there
	// would be an upgrade, which is --upgrade's to do.
	if compareVersions(st.Previous, st.Version) >= 0 {
		return c, fmt.Errorf("%s %s: nothing older is installed (the other kept version, %s, is newer: use --upgrade %s to go forward)", s.agent, st.Version, st.Previous, s.agent)
	}
	bin := s.dir + "/" + st.Previous + "/" + s.entry
	if fi, err := run.Root.Lstat(bin); err != nil || !fi.Mode().IsRegular() || s.exec && fi.Mode()&0o111 == 0 {
		return c, fmt.Errorf("%s: the previous version %s is no longer at %s: reinstall it with a pin (%s.version = %q)", s.agent, st.Previous, bin, s.agent, st.Previous)
	}
	if e := run.Receipt.Paths[bin]; e == nil {
		return c, fmt.Errorf("%s: %s is not recorded in the receipt: refusing to switch to bytes cco did not verify", s.agent, bin)
	} else if !e.StatMatches(mustLstat(run, bin)) {
		if sum, err := provision.HashFile(run.Root, bin); err != nil || sum != e.SHA256 {
			return c, fmt.Errorf("%s: %s changed since cco verified it: reinstall it with a pin (%s.version = %q)", s.agent, bin, s.agent, st.Previous)
		}
	}
	plan := &rollbackPlan{st: st}
	c.State, c.Data = provision.ToDo, plan
	c.Detail = fmt.Sprintf("switch %s from %s back to %s", s.agent, st.Version, st.Previous)
	// The previous version's interpreter link may predate a change of
	// gemini.node, or cco's making of it: it is made again first.
	drift, err := interpreterDrift(run, s.cfg, s.va, st.Previous)
	if err != nil {
		return c, fmt.Errorf("%s: %w", s.agent, err)
	}
	if drift != "" && !run.Status {
		var err error
		if plan.relink, err = installedNode(run, s.cfg, s.va, st.Previous); err != nil {
			return c, fmt.Errorf("%s: %w", s.agent, err)
		}
		c.Detail += fmt.Sprintf(", linked to the interpreter %s (%s)", plan.relink, drift)
	}
	return c, nil
}

func mustLstat(run *provision.View, p string) fs.FileInfo {
	fi, _ := run.Root.Lstat(p)
	return fi
}

func (s *rollbackStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	plan := c.Data.(*rollbackPlan)
	st := plan.st
	if plan.relink != "" {
		if err := relinkInterpreter(run, s.va, st.Previous, plan.relink); err != nil {
			return "", err
		}
	}
	if s.va.interp != "" {
		// The state names the interpreter of the version that is current.
		st.Node, _ = run.Root.Readlink(s.dir + "/" + st.Previous + "/" + s.va.interp)
	}
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

// prune removes the version directories of step older than the current and
// the previous one, except any that a running process still executes, maps
// or holds open (a session started before an upgrade keeps running). It
// returns a note for the step's detail; a failure to prune is reported
// there, never a failed install.
func prune(run *provision.Run, step, agentDir string, st *agentState) string {
	var versions []string
	for d, rec := range run.Receipt.Dirs {
		if rec.Step != step || path.Dir(d) != agentDir {
			continue
		}
		if v := path.Base(d); v != st.Version && v != st.Previous && CheckVersion("receipt", v) == nil {
			versions = append(versions, v)
		}
	}
	sort.Strings(versions)
	var pruned, kept []string
	for _, v := range versions {
		dir := agentDir + "/" + v
		if pid := inUse(run.Root.HostPath(dir)); pid != 0 {
			kept = append(kept, fmt.Sprintf("%s (in use by pid %d)", v, pid))
			continue
		}
		if err := run.Root.RemoveAll(dir); err != nil {
			kept = append(kept, fmt.Sprintf("%s (%v)", v, err))
			continue
		}
		for p := range run.Receipt.Paths {
			if strings.HasPrefix(p, dir+"/") {
				delete(run.Receipt.Paths, p)
			}
		}
		for p := range run.Receipt.Dirs {
			if p == dir || strings.HasPrefix(p, dir+"/") {
				delete(run.Receipt.Dirs, p)
			}
		}
		pruned = append(pruned, v)
	}
	note := ""
	if len(pruned) > 0 {
		note += "; pruned " + strings.Join(pruned, ", ")
	}
	if len(kept) > 0 {
		note += "; kept " + strings.Join(kept, ", ") + " (pruned at a later upgrade)"
	}
	return note
}

// procDir is the test seam for inUse's view of /proc.
var procDir = "/proc"

// inUse returns a pid whose executable, mappings or open files lie under
// hostDir, or 0.
func inUse(hostDir string) int {
	prefix := hostDir + "/"
	ents, err := os.ReadDir(procDir)
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		base := procDir + "/" + e.Name()
		if l, err := os.Readlink(base + "/exe"); err == nil && strings.HasPrefix(l, prefix) {
			return pid
		}
		if fds, err := os.ReadDir(base + "/fd"); err == nil {
			for _, fd := range fds {
				if l, err := os.Readlink(base + "/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, prefix) {
					return pid
				}
			}
		}
		if b, err := os.ReadFile(base + "/maps"); err == nil && strings.Contains(string(b), prefix) {
			return pid
		}
	}
	return 0
}

// noticeTimeout bounds the one small request a normal run makes to tell the
// operator about a newer release: an air-gapped machine loses at most this.
var noticeTimeout = 3 * time.Second

// newerNotice resolves the channel once and, when it names a newer release
// than the installed one, says so with the command that upgrades. A failure
// to resolve is no notice, never an error: nothing is fetched without
// --upgrade.
// It returns the newer version too ("" when there is none or it cannot tell).
func newerNotice(ctx context.Context, agent, channel, installed string, resolve func(context.Context) (string, error)) (string, []string) {
	ctx, cancel := context.WithTimeout(ctx, noticeTimeout)
	defer cancel()
	v, err := resolve(ctx)
	if err != nil || compareVersions(v, installed) <= 0 {
		return "", nil
	}
	return v, []string{fmt.Sprintf("%s %s is available on the %s channel (installed: %s): sudo cco-install --upgrade %s", agent, v, channel, installed, agent)}
}

// notInstalled is a health check's finding for an agent whose configured
// release is not in place: said without resolving anything over the network.
func notInstalled(c provision.Check, agent string, st *agentState, pin, channel string) provision.Check {
	want := "the " + channel + " channel"
	if pin != "" {
		want = pin + " (pinned)"
	}
	c.State = provision.ToDo
	if st == nil {
		c.Detail = fmt.Sprintf("%s is not installed (configured: %s)", agent, want)
	} else {
		c.Detail = fmt.Sprintf("%s %s is installed, but the configuration asks for %s", agent, st.Version, want)
	}
	c.Fix = "run `sudo cco-install` (it needs the network), or `sudo cco-install --bundle FILE` with a bundle made by `cco-install bundle`"
	return c
}
