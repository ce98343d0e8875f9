package vendorfetch

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/extract"
)

// vendorAgent is one agent's fixed facts for the vendor step: where its
// versions live and which files of a version run.
type vendorAgent struct {
	name, step, dir string
	title           string // the vendor's name of it, for the step's name
	// entry is the file of a version directory that is run (the rollback
	// checks it is still there); exec says it must be executable.
	entry string
	exec  bool
	// interp, when set, is the link in a version directory to the
	// interpreter that runs entry; pkgJSON is then the package.json (in the
	// version directory) whose engines.node it must satisfy.
	interp, pkgJSON string
}

// vendorAgents is the one table of the agents this package installs. What
// runs of a version is the profile's to say: fromProfiles fills in entry
// and interp from agent.Profile's Binary and Interpreter.
var vendorAgents = fromProfiles([]vendorAgent{
	{name: AgentClaude, title: "Claude Code", step: StepClaude, dir: ClaudeDir, exec: true},
	{name: AgentCodex, title: "Codex", step: StepCodex, dir: CodexDir, exec: true},
	{name: AgentGemini, title: "Gemini CLI", step: StepGemini, dir: GeminiDir},
	{name: AgentOpencode, title: "OpenCode", step: StepOpencode, dir: OpencodeDir, exec: true},
	{name: AgentDroid, title: "Droid", step: StepDroid, dir: DroidDir, exec: true},
	{name: AgentPi, title: "Pi", step: StepPi, dir: PiDir},
	{name: AgentCopilot, title: "Copilot CLI", step: StepCopilot, dir: CopilotDir, exec: true},
})

// fromProfiles sets each agent's entry and interp to its profile's Binary
// and Interpreter, below <dir>/current/. A profile that runs anything else
// disagrees with this table: a mistake that every start of the program
// (and so every test) reports.
func fromProfiles(as []vendorAgent) []vendorAgent {
	for i := range as {
		a := &as[i]
		p, ok := agent.Lookup(a.name)
		if !ok {
			panic("vendorfetch: no agent profile " + a.name + ": add it to the agent table")
		}
		cur := a.dir + "/current/"
		if a.entry, ok = strings.CutPrefix(p.Binary, cur); !ok {
			panic("vendorfetch: " + a.name + "'s profile runs " + p.Binary + ", not a file below " + cur)
		}
		if p.Interpreter == "" {
			continue
		}
		if a.interp, ok = strings.CutPrefix(p.Interpreter, cur); !ok || strings.Contains(a.interp, "/") {
			panic("vendorfetch: " + a.name + "'s interpreter " + p.Interpreter + " is not a link in " + cur)
		}
		// A tree's package sits in node_modules; a bundle is the version.
		a.pkgJSON = "package.json"
		if pkg := "node_modules/" + p.Installers.NPMPackage + "/"; strings.HasPrefix(a.entry, pkg) {
			a.pkgJSON = pkg + "package.json"
		}
	}
	return as
}

func lookupAgent(name string) (vendorAgent, bool) {
	for _, a := range vendorAgents {
		if a.name == name {
			return a, true
		}
	}
	return vendorAgent{}, false
}

// agentNames lists the table's names, for messages.
func agentNames() string {
	var n []string
	for _, a := range vendorAgents {
		n = append(n, a.name)
	}
	return strings.Join(n, ", ")
}

// releaseSource is one way to an agent's releases: Claude's store, Codex's
// stores with their GitHub fallback, or an npm registry. The vendor step
// does everything else (what is installed, upgrade, placing, the receipt,
// pruning) the same way for every source.
type releaseSource interface {
	// target names the build for a platform, as the receipt records it
	// (Claude's platform, Codex's target triple).
	target(platform string) string
	// resolve names the version to install: the pin, checked where the
	// source can, or the version the channel names now.
	resolve(ctx context.Context, run *provision.View, tr source, pin, channel, target string) (string, *resolved, error)
	// fetch fetches the planned version, verifies it, and leaves the
	// verified tree as the directory "version" of the staging directory.
	fetch(run *provision.Run, p *vendorPlan, sg *staging) (*fetched, error)
}

// resolved is what a source learned while resolving that its fetch uses.
type resolved struct {
	digests map[string]string // Codex: the GitHub API's per-asset sha256
	node    string            // npm: the Node binary that runs the package
	// note says the source installs another build than the release names
	// (a mirror without the exact native build): a warning.
	note string
}

// warnings are what the resolution has to say (nil for none).
func (r *resolved) warnings() []string {
	if r == nil || r.note == "" {
		return nil
	}
	return []string{r.note}
}

// vendorPlan is what the check learned for the apply.
type vendorPlan struct {
	version, platform, target string
	res                       *resolved
	tr                        source
	// relink, when set, is the interpreter to link the installed version
	// to: nothing is fetched.
	relink string
	// restamp: the installed version is the one wanted, but the receipt
	// records it as from another channel or bundle; only the record
	// changes (so that status agrees with what the run found).
	restamp bool
}

// fetched is a verified tree in the staging directory.
type fetched struct {
	url      string // where the bytes came from
	verified string // what was checked, for the report and the receipt
	// members are the tree's entries, relative to the version directory,
	// as the receipt records them.
	members  []extract.Member
	stripped []string // members whose setuid/setgid bits were removed
	warnings []string
	noKey    string // why a signature could not be checked (said once)
	node     string // the interpreter the entry runs under, if any
}

// vendorStep installs one agent's release from its source.
type vendorStep struct {
	agent vendorAgent
	cfg   Config
}

func (s *vendorStep) ID() string { return s.agent.step }
func (s *vendorStep) Name() string {
	return fmt.Sprintf("install %s (%s)", s.agent.title, s.agent.dir)
}

// settings are the agent's pin and channel as configured.
func (c Config) settings(agent string) (pin, channel string) {
	switch agent {
	case AgentClaude:
		return c.Claude.Version, c.Claude.Channel
	case AgentCodex:
		return c.Codex.Version, c.Codex.Channel
	}
	n, _ := c.npmSettings(agent)
	return n.Version, n.Channel
}

func (s *vendorStep) platform(run *provision.View) (string, error) {
	if s.cfg.Platform != "" {
		return s.cfg.Platform, nil
	}
	return DetectPlatform(run.Root)
}

func (s *vendorStep) Check(run *provision.View) (provision.Check, error) {
	c, err := s.check(run)
	if run.DryRun && !run.Status && retryable(err) {
		err = fmt.Errorf("%w (a dry run does not retry; the real run retries for up to download.retry_budget)", err)
	}
	return c, err
}

// retryable reports a failure that a real run would have retried: one of
// the network (a refused connection, a timeout) or a server's 5xx, 408 or
// 429; not a 404, a bad document, or a refusal of cco's own.
func retryable(err error) bool {
	var ue *url.Error
	var se *StatusError
	return (errors.As(err, &ue) || errors.As(err, &se)) && !isLocal(err) && !isOffline(err)
}

func (s *vendorStep) check(run *provision.View) (provision.Check, error) {
	a, cfg := s.agent, s.cfg
	if run.DryRun {
		// A dry run never waits on a retry: it reports what it could
		// not reach.
		cfg.Retries = 0
	}
	c := provision.Check{Paths: []string{a.dir + "/current"}}
	platform, err := s.platform(run)
	if err != nil {
		return c, fmt.Errorf("%s: %w", a.name, err)
	}
	rs := newReleaseSource(cfg, a.name)
	target := rs.target(platform)
	tr, pin, channel, err := agentSource(cfg, a.name, target)
	if err != nil {
		return c, fmt.Errorf("%s: %w", a.name, err)
	}
	st := loadState(run, a.step)
	// A version installed from a bundle is pinned by it: in sync, offline.
	bundlePinned := st != nil && pin == "" && st.Bundle != ""
	if st != nil && !cfg.Upgrade[a.name] && st.Platform == target && (pin == st.Version || pin == "" && st.Channel == channel || bundlePinned) {
		ok, why := intact(run, a.step, a.dir, st.Version)
		if ok {
			c.Installed = st.Version
			if c, done, err := s.interpreterCheck(run, c, st.Version); done {
				return c, err
			}
			c.State, c.Detail = provision.Done, fmt.Sprintf("%s %s is installed (%s)", a.name, st.Version, target)
			if bundlePinned {
				c.Detail = fmt.Sprintf("%s %s is installed (%s, pinned by the bundle %s)", a.name, st.Version, target, st.Bundle)
			}
			if cfg.Bundle != "" && st.Bundle != cfg.Bundle {
				// The bundle holds the installed version: it pins it now.
				c.State, c.Detail = provision.ToDo, fmt.Sprintf("record %s %s as pinned by the bundle %s (nothing to fetch)", a.name, st.Version, cfg.Bundle)
				c.Data = &vendorPlan{version: st.Version, restamp: true}
				return c, nil
			}
			if pin == "" && cfg.Bundle == "" && !bundlePinned {
				// One quick try, and no fallback: a notice must not slow a run.
				ncfg := cfg
				ncfg.Retries, ncfg.Codex.GitHubAPIURL = 0, ""
				nrs := newReleaseSource(ncfg, a.name)
				var warns []string
				c.Available, warns = newerNotice(run.Ctx, a.name, channel, st.Version, func(ctx context.Context) (string, error) {
					v, _, err := nrs.resolve(ctx, run, newNetSource(ncfg), "", channel, target)
					return v, err
				})
				c.Warnings = append(c.Warnings, warns...)
			}
			return c, nil
		}
		if run.Status {
			c.State, c.Detail = provision.ToDo, fmt.Sprintf("reinstall %s %s: %s", a.name, st.Version, why)
			return c, nil
		}
		v, res, err := rs.resolve(run.Ctx, run, tr, st.Version, "", target)
		if err != nil {
			return c, fmt.Errorf("%s: %w", a.name, err)
		}
		c.Warnings = append(c.Warnings, res.warnings()...)
		c.State, c.Detail = provision.ToDo, fmt.Sprintf("reinstall %s %s: %s", a.name, v, why)
		c.Data = &vendorPlan{version: v, platform: platform, target: target, res: res, tr: tr}
		return c, nil
	}
	if run.Status {
		c = notInstalled(c, a.name, st, pin, channel)
		if st != nil {
			if ok, _ := intact(run, a.step, a.dir, st.Version); ok {
				c.Installed = st.Version
			}
		}
		return c, nil
	}
	v, res, err := rs.resolve(run.Ctx, run, tr, pin, channel, target)
	if err != nil {
		return c, fmt.Errorf("%s: %w", a.name, err)
	}
	c.Warnings = append(c.Warnings, res.warnings()...)
	if err := forwardOnly(cfg, a.name, st, pin, v); err != nil {
		return c, err
	}
	if st != nil && st.Version == v && st.Platform == target {
		if ok, _ := intact(run, a.step, a.dir, v); ok {
			if c, done, err := s.interpreterCheck(run, c, v); done {
				return c, err
			}
			c.State, c.Detail = provision.Done, fmt.Sprintf("%s %s is installed and is the newest on the %s channel", a.name, v, channel)
			if pin != "" {
				c.Detail = fmt.Sprintf("%s %s is installed (pinned)", a.name, v)
			}
			if pin == "" && (st.Channel != channel || st.Bundle != "") {
				// The channel now asked for names the installed version:
				// only the record is behind (status said so).
				c.State, c.Detail = provision.ToDo, fmt.Sprintf("record %s %s as on the %s channel, which names it (nothing to fetch)", a.name, v, channel)
				c.Data = &vendorPlan{version: v, restamp: true}
			}
			return c, nil
		}
	}
	from := "pinned"
	if pin == "" {
		from = "the " + channel + " channel"
	}
	if cfg.Bundle != "" {
		from = "the bundle " + cfg.Bundle
	}
	c.State, c.Detail = provision.ToDo, fmt.Sprintf("install %s %s (%s, %s)", a.name, v, target, from)
	if st != nil && st.Version != v {
		c.Detail = fmt.Sprintf("upgrade %s %s -> %s (%s, %s)", a.name, st.Version, v, target, from)
	}
	c.Data = &vendorPlan{version: v, platform: platform, target: target, res: res, tr: tr}
	return c, nil
}

// interpreterCheck checks an intact version's interpreter: a conflict when
// someone but root can change the Node its link runs, or the one
// <agent>.node names (never replaced by cco: the fix is the operator's); a
// relink when the link is not that key's Node. done is false when there
// is nothing to say.
func (s *vendorStep) interpreterCheck(run *provision.View, c provision.Check, version string) (provision.Check, bool, error) {
	drift, err := interpreterDrift(run, s.cfg, s.agent, version)
	var un *unsafeNodeError
	switch {
	case errors.As(err, &un):
		c.State, c.Detail, c.Fix = provision.Conflict, un.msg, un.fix
		return c, true, nil
	case drift != "":
		c, err := s.relinkCheck(run, c, version, drift)
		return c, true, err
	}
	return c, false, nil
}

// relinkCheck plans to link an intact version to the interpreter the
// configuration names now; a status only says so.
func (s *vendorStep) relinkCheck(run *provision.View, c provision.Check, version, drift string) (provision.Check, error) {
	a := s.agent
	c.Installed = version
	c.State, c.Detail = provision.ToDo, fmt.Sprintf("link %s %s to its interpreter again: %s", a.name, version, drift)
	if run.Status {
		return c, nil
	}
	node, err := installedNode(run, s.cfg, a, version)
	if err != nil {
		return c, fmt.Errorf("%s: %w", a.name, err)
	}
	c.Detail = fmt.Sprintf("link %s %s to the interpreter %s (%s)", a.name, version, node, drift)
	c.Data = &vendorPlan{version: version, relink: node}
	return c, nil
}

func (s *vendorStep) Apply(run *provision.Run, c provision.Check) (string, error) {
	a, cfg := s.agent, s.cfg
	p, ok := c.Data.(*vendorPlan)
	if !ok {
		return "", fmt.Errorf("%s: no plan from the check", a.name)
	}
	if p.relink != "" {
		return s.relink(run, p)
	}
	if p.restamp {
		return s.restamp(run, p)
	}
	prev := loadState(&run.View, a.step)
	sgd, err := newStaging(run, a.name, a.step)
	if err != nil {
		return "", fmt.Errorf("%s: %w", a.name, err)
	}
	defer sgd.close()
	f, err := newReleaseSource(cfg, a.name).fetch(run, p, sgd)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", a.name, p.version, err)
	}
	for _, w := range f.warnings {
		run.Warn(w)
	}
	if a.interp != "" {
		// The link goes in before the switch: no moment runs the script
		// without it.
		if f.node == "" {
			return "", fmt.Errorf("%s %s: the source named no interpreter to link as %s", a.name, p.version, a.interp)
		}
		if err := linkInterpreter(sgd, a.interp, f.node); err != nil {
			return "", fmt.Errorf("%s %s: %w", a.name, p.version, err)
		}
		f.members = append(f.members, extract.Member{Name: a.interp, Kind: extract.KindLink, Target: f.node})
	}
	if err := sgd.place(a.step, a.dir, p.version, "version"); err != nil {
		return "", fmt.Errorf("%s %s: %w", a.name, p.version, err)
	}
	vdir := a.dir + "/" + p.version
	for _, m := range f.members {
		t := vdir + "/" + m.Name
		switch m.Kind {
		case extract.KindDir:
			run.Receipt.Dirs[t] = provision.DirRecord{Step: a.step}
		case extract.KindFile:
			err = run.Record(t, provision.KindFile, m.SHA256, a.step)
		case extract.KindLink:
			err = run.Record(t, provision.KindLink, "", a.step)
		}
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", a.name, p.version, err)
		}
	}
	src := sourceName(cfg, f.url)
	st := &agentState{Version: p.version, Platform: p.target, Source: src, Verified: f.verified, NoKey: f.noKey, Node: f.node}
	st.Channel, st.Bundle = cfg.pinnedBy(a.name)
	if prev != nil && prev.Version != p.version {
		st.Previous = prev.Version
	}
	if err := saveState(run, a.step, st); err != nil {
		return "", err
	}
	detail := fmt.Sprintf("installed %s %s (%s) from %s; verified %s", a.name, p.version, p.target, src, f.verified)
	detail += prune(run, a.step, a.dir, st)
	if len(f.stripped) > 0 {
		detail += "; stripped setuid/setgid bits from " + strings.Join(f.stripped, ", ")
	}
	return detail, nil
}

// pinnedBy is what the receipt records an installed version as following:
// the channel, or the bundle that pins it ("" for both under a pin).
func (c Config) pinnedBy(agent string) (channel, bundle string) {
	if c.Bundle != "" {
		return "", c.Bundle
	}
	if pin, ch := c.settings(agent); pin == "" {
		return ch, ""
	}
	return "", ""
}

// restamp records the installed, intact version as following what the
// configuration now names: nothing is fetched or placed.
func (s *vendorStep) restamp(run *provision.Run, p *vendorPlan) (string, error) {
	a := s.agent
	st := loadState(&run.View, a.step)
	if st == nil || st.Version != p.version {
		return "", fmt.Errorf("%s: the receipt no longer records %s %s", a.name, a.name, p.version)
	}
	st.Channel, st.Bundle = s.cfg.pinnedBy(a.name)
	if err := saveState(run, a.step, st); err != nil {
		return "", err
	}
	if st.Bundle != "" {
		return fmt.Sprintf("recorded %s %s as pinned by the bundle %s", a.name, p.version, st.Bundle), nil
	}
	return fmt.Sprintf("recorded %s %s as on the %s channel", a.name, p.version, st.Channel), nil
}

// relink points the installed version's interpreter link at the planned
// interpreter and records it in the agent's state.
func (s *vendorStep) relink(run *provision.Run, p *vendorPlan) (string, error) {
	a := s.agent
	if err := relinkInterpreter(run, a, p.version, p.relink); err != nil {
		return "", fmt.Errorf("%s %s: %w", a.name, p.version, err)
	}
	if st := loadState(&run.View, a.step); st != nil {
		st.Node = p.relink
		if err := saveState(run, a.step, st); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("linked %s %s to the interpreter %s", a.name, p.version, p.relink), nil
}
