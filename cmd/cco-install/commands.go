package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/cco-dev/cco/guard/wiring"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/managed"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/sandbox/egress/policy"
	"github.com/cco-dev/cco/userns"
	"github.com/cco-dev/cco/vendorfetch"
	"github.com/cco-dev/cco/verify"
)

// printConfig shows every key's effective value and where it came from; a
// key that could not be read is marked with its line and column (exit 1).
func printConfig(root provision.FileReader, cfg *Config, o *options, stdout io.Writer) (int, error) {
	lines := cfg.Lines()
	sb := sandboxConfig(root)
	problems := len(cfg.Problems)
	if sb.Problem != "" {
		problems++
	}
	code := provision.ExitFor(problems, 0)
	if o.json {
		o.wrote = true
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		doc := map[string]any{"schema": provision.ReportSchema, "file": cfg.path, "keys": lines, "sandbox": sb}
		if len(cfg.Problems) > 0 {
			doc["problems"] = cfg.Problems
		}
		return code, enc.Encode(doc)
	}
	for _, l := range lines {
		// A value as a JSON string, its controls as \u escapes: it stays
		// a literal to paste into the file.
		b, _ := json.Marshal(l.Value)
		line := fmt.Sprintf("%s = %s  # %s", l.Key, safetext.JSON(b), l.Source)
		if l.Problem != "" {
			line += "  # BAD: " + l.Problem
		}
		safetext.Linef(stdout, "%s", line)
	}
	for _, p := range cfg.Problems {
		if p.Key == "" || !knownKey(p.Key) {
			safetext.Linef(stdout, "# BAD: %s", p.Message)
		}
	}
	// sandbox.toml as this user's launches take it.
	safetext.Linef(stdout, "# sandbox.toml for %s, from %s", sb.User, strings.Join(append(sb.Files, "the defaults"), ", "))
	for _, k := range sb.Keys {
		b, _ := json.Marshal(k.Value)
		safetext.Linef(stdout, "%s = %s  # %s", k.Key, safetext.JSON(b), k.Source)
	}
	for _, n := range sb.Notes {
		safetext.Linef(stdout, "# %s", n)
	}
	if sb.Problem != "" {
		safetext.Linef(stdout, "# BAD: %s", sb.Problem)
	}
	return code, nil
}

func knownKey(name string) bool {
	for _, k := range keys {
		if k.name == name {
			return true
		}
	}
	return false
}

// status is the plan's own checks over a read-only view of the system, with
// the receipt's record of every owned path: one finding per cause, exit 3
// when the host is not in sync. It writes nothing.
func status(ctx context.Context, root *provision.Root, cfg *Config, o *options, stdout io.Writer) (int, error) {
	rc, _, err := provision.LoadReceipt(root)
	if err != nil {
		return provision.ExitFailed, err
	}
	v := &provision.View{Ctx: ctx, Root: root.ReadOnly(), Receipt: rc, DryRun: true, Status: true, Log: io.Discard, Now: time.Now}
	rep := provision.CheckReceipt(root, rc, o.verify)
	installed := len(rc.Paths) > 0
	if !installed {
		rep.AddFinding(provision.Finding{ID: "receipt", Path: provision.ReceiptPath, Detail: "cco is not installed here (no receipt)", Fix: "sudo cco-install"})
	}
	st := &statusDoc{StatusReport: rep, Notes: []string{}, Warnings: []string{}}
	// One finding per cause: a path the receipt check already reported is
	// not reported again by the step that owns it.
	reported := map[string]bool{}
	for _, p := range rep.Paths {
		if p.Status != provision.PathOK {
			reported[p.Path] = true
		}
	}
	f, interruptedNote := upgradeFinding(v.Root)
	if f != nil {
		rep.AddFinding(*f)
	}
	st.LastUpgrade = interruptedNote
	for _, p := range cfg.Problems {
		rep.AddFinding(provision.Finding{ID: "config", Path: ConfigPath, Detail: p.Message, Fix: "fix the key: every install run refuses the file until then"})
	}
	image := isImage(v.Root, cfg, o)
	probs := preflight(v.Root, cfg, image)
	switch {
	case image || len(probs) > 0:
	case provision.IsRoot():
		probs = usernsProblem(v.Root, image, userns.RealHost.Probe)
	case v.Root.IsHost():
		// The probe runs bwrap as nobody, the way an agent's user does:
		// switching to nobody needs root.
		st.Notes = append(st.Notes, "the user-namespace probe: it runs bwrap as nobody, which only root can; run `sudo cco-install status` to check it")
	}
	for _, p := range probs {
		rep.AddFinding(p)
	}
	st.Notes = append(st.Notes, engineNote())
	if v.Root.IsHost() && !image {
		// What preflight does not refuse on is still said: a cause status
		// can name (AppArmor's restriction uncovered) is a finding, a
		// weaker layer or the fallback engine a warning.
		for _, f := range hostFindings(v.Root) {
			switch {
			case f.Blocking:
			case f.ID == "preflight.apparmor_userns":
				rep.AddFinding(provision.Finding{ID: f.ID, Detail: f.Cause, Fix: f.Fix})
			default:
				st.Warnings = append(st.Warnings, f.Cause+" (fix: "+f.Fix+")")
			}
		}
	}
	if !provision.IsRoot() {
		st.Notes = append(st.Notes, unreadableHomes(v.Root, statusUsers(v.Root, cfg, rc), "sudo cco-install status")...)
	}
	steps, err := buildPlan(v, cfg, o)
	if err != nil {
		rep.AddFailure(provision.Finding{ID: "plan", Detail: "the plan could not be made: " + err.Error(), Fix: "fix what it names, then run status again"})
	}
	plan := provision.Plan(v, steps)
	vendor := map[string]provision.StepReport{}
	for _, sr := range plan.Steps {
		if strings.HasPrefix(sr.ID, "vendor.") {
			vendor[strings.TrimPrefix(sr.ID, "vendor.")] = sr
		}
		st.Warnings = append(st.Warnings, sr.Warnings...)
		switch sr.Status {
		case provision.StatusTodo, provision.StatusConflict:
		case provision.StatusFailed:
			if anyReported(reported, sr.Paths) {
				continue // the receipt check named the cause (a missing file)
			}
			f := sr.Finding()
			f.Detail, f.Fix = sr.ID+" could not be checked: "+sr.Detail, "fix what it names, then run status again"
			rep.AddFailure(f)
			continue
		default:
			continue
		}
		if anyReported(reported, sr.Paths) {
			continue
		}
		for _, p := range sr.Paths {
			reported[p] = true
		}
		f := sr.Finding()
		if f.Fix == "" {
			f.Fix = "run `sudo cco-install`"
		}
		if sr.Status == provision.StatusTodo && !strings.HasPrefix(sr.ID, "vendor.") {
			f.Detail = "not as installed: cco-install would " + f.Detail
		}
		rep.AddFinding(f)
	}
	// The vendor steps of the agents that agents does not name do not run:
	// their Node is checked here.
	for _, f := range vendorfetch.UnsafeInterpreters(v, unconfigured(cfg.Agents, rc)) {
		if !reported[f.Path] {
			reported[f.Path] = true
			rep.AddFinding(f)
		}
	}
	// The guard's own wiring check adds what no step looks at: a vendor
	// binary ahead of the shadow on a user's PATH, a loosened script.
	for _, f := range wiring.Drift(root, rc, statusUsers(v.Root, cfg, rc)) {
		if !reported[f.Path] {
			reported[f.Path] = true
			rep.AddFinding(f)
		}
	}
	st.Agents = agentStatus(root, rc, rep, vendor)
	st.Egress, st.EgressUpstream = egressMode(root, rep, reported, os.Environ())
	st.Warnings = append(st.Warnings, allowlistWarnings(root, st.Agents)...)
	if st.JailVerified, err = jailVerified(root, rc); err != nil {
		st.Warnings = append(st.Warnings, err.Error())
	}
	for _, a := range st.Agents {
		// A jail-only agent has no guard to be active: not drift.
		if !a.GuardActive && a.Guard != string(managed.JailOnly) && installed && !reported[a.GuardPath] {
			rep.AddFinding(provision.Finding{ID: "guard." + a.Agent, Path: a.GuardPath, Detail: a.Agent + ": the guard is not active: " + a.GuardDetail, Fix: a.GuardFix})
		}
	}
	if o.json {
		o.wrote = true
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return rep.ExitCode(), enc.Encode(st)
	}
	for _, a := range st.Agents {
		// The header says what the findings below say, in a word.
		v := a.Version
		switch {
		case a.Version == "":
			v = "not installed"
		case !a.Installed:
			v += " (damaged: see below)"
		case !a.asConfigured:
			v += " (not as configured: see below)"
		case a.Available != nil:
			v += " (" + *a.Available + " available)"
		}
		safetext.Linef(stdout, "%-8s %s: %s; shadow %s; guard %s", "agent", a.Agent, v, map[bool]string{true: "in place", false: "NOT in place"}[a.Shadow], a.Guard)
	}
	egressLine := "egress: " + st.Egress
	if st.Egress == "off" {
		egressLine += " (no network at all for the agents: set by the operator in " + sandbox.ConfigPath + ")"
	} else if st.EgressUpstream != "" {
		egressLine += "; upstream: " + st.EgressUpstream
	}
	safetext.Linef(stdout, "%s", egressLine)
	safetext.Linef(stdout, "jail verified: %s", verifiedLine(st.JailVerified))
	if st.LastUpgrade != "" {
		safetext.Linef(stdout, "%-8s %s", "note", st.LastUpgrade)
	}
	for _, n := range st.Notes {
		safetext.Linef(stdout, "%-8s %s", "skipped", n)
	}
	for _, w := range st.Warnings {
		safetext.Linef(stdout, "%-8s %s", "warning", w)
	}
	rep.WriteText(stdout)
	return rep.ExitCode(), nil
}

func anyReported(reported map[string]bool, paths []string) bool {
	for _, p := range paths {
		if reported[p] {
			return true
		}
	}
	return false
}

// unreadableHomes names the homes a run without root (status, a dry run)
// cannot look into: what it skipped because only root may read there, and
// the command (as root) that checks them. It says so once per home, and
// nothing about each file in it.
func unreadableHomes(root provision.Reader, users []*provision.User, rootCmd string) []string {
	var out []string
	for _, u := range users {
		h, err := root.OpenHome(u)
		if err != nil {
			continue
		}
		_, err = h.Lstat(".local")
		h.Close()
		if errors.Is(err, fs.ErrPermission) {
			out = append(out, fmt.Sprintf("%s's home (%s): only root can read it; run `%s` to check it", u.Name, u.Home, rootCmd))
		}
	}
	return out
}

// statusDoc is the status JSON: the receipt check plus one line per agent.
type statusDoc struct {
	*provision.StatusReport
	Agents []agentLine `json:"agents"`
	// Notes say what was skipped because it needs root.
	Notes []string `json:"notes"`
	// Warnings are the steps' own (a newer release, a weak check).
	Warnings []string `json:"warnings"`
	// Egress is the jail's network policy from sandbox.toml: public,
	// allowlist or off ("off" is an operator's choice: reported, not drift).
	Egress string `json:"egress"`
	// EgressUpstream is the upstream proxy in effect (egress_upstream,
	// resolved with this command's environment), without credentials.
	EgressUpstream string `json:"egress_upstream,omitempty"`
	// LastUpgrade notes an upgrade that a signal stopped (no drift).
	LastUpgrade string `json:"last_upgrade,omitempty"`
	// JailVerified is the last `cco-install verify` kept here and what
	// changed since; null when the jail was never verified.
	JailVerified *verify.Status `json:"jail_verified"`
}

// egressMode reads the jail's network policy; a sandbox.toml that does not
// parse is drift (every launch refuses it), reported once: the plan's
// sandbox.config step finds it too when it leaves the file as it is.
// The upstream proxy in effect is egress_upstream resolved with environ
// (for "env", this command's proxy variables: run it as the user whose
// sessions it is about), or why it cannot be.
func egressMode(root *provision.Root, rep *provision.StatusReport, reported map[string]bool, environ []string) (mode, upstream string) {
	c := &sandbox.Config{}
	if b, err := root.ReadFile(sandbox.ConfigPath); err == nil {
		if c, err = sandbox.ParseConfig(b, sandbox.ConfigPath); err != nil {
			if !reported[sandbox.ConfigPath] {
				rep.AddFinding(provision.Finding{ID: "sandbox.config", Path: sandbox.ConfigPath, Detail: err.Error(), Fix: sandboxConfigFix})
			}
			return "unknown", ""
		}
	}
	mode = c.Egress
	if mode == "" {
		mode = "public"
	}
	if mode == "off" {
		return mode, ""
	}
	u, err := policy.ResolveUpstream(c.EgressUpstream, environ)
	if err != nil {
		return mode, "not usable: " + err.Error()
	}
	return mode, u.Describe()
}

type agentLine struct {
	Agent       string `json:"agent"`
	Version     string `json:"version"`
	Shadow      bool   `json:"shadow"`
	Guard       string `json:"guard"`
	GuardActive bool   `json:"guard_active"`
	GuardPath   string `json:"guard_path,omitempty"`
	// Installed: the agent's release is in place and intact.
	Installed bool `json:"installed"`
	// Available is the newer release on the agent's channel, when the
	// bounded check could tell; else null.
	Available   *string `json:"available"`
	GuardDetail string  `json:"-"`
	GuardFix    string  `json:"-"`
	// asConfigured: the vendor step found nothing to do (or the agent is
	// not configured here).
	asConfigured bool
}

func agentStatus(root *provision.Root, rc *provision.Receipt, rep *provision.StatusReport, vendor map[string]provision.StepReport) []agentLine {
	ok := map[string]bool{}
	for _, p := range rep.Paths {
		ok[p.Path] = p.Status == provision.PathOK
	}
	var out []agentLine
	for _, w := range managed.Wired(root, rc, knownAgents) {
		l := agentLine{Agent: w.Agent, Guard: string(w.State), GuardActive: w.Active, GuardPath: w.Path, GuardDetail: w.Detail, GuardFix: w.Fix}
		l.Shadow = ok[BinDir+"/"+w.Agent]
		var st struct {
			Version string `json:"version"`
		}
		if raw, found := rc.Extra["vendor."+w.Agent]; found && json.Unmarshal(raw, &st) == nil {
			l.Version = st.Version
		}
		if sr, ok := vendor[w.Agent]; ok {
			// Installed: in place and intact, as configured or not (the
			// vendor step says which; a damaged release is not).
			l.asConfigured = sr.Status == provision.StatusOK
			l.Installed = l.asConfigured || sr.Installed != ""
			if sr.Available != "" {
				a := sr.Available
				l.Available = &a
			}
		} else {
			// Not configured here: installed when the receipt says so.
			l.Installed, l.asConfigured = l.Version != "", true
		}
		out = append(out, l)
	}
	return out
}

// statusUsers are the accounts whose homes are checked: root, the invoking
// user, the `users` key and every user whose home the receipt took a vendor
// install out of.
func statusUsers(root provision.FileReader, cfg *Config, rc *provision.Receipt) []*provision.User {
	names := append([]string{"root", os.Getenv("SUDO_USER")}, cfg.Users...)
	names = append(names, receiptUsers(rc)...)
	var out []*provision.User
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		if u, err := provision.LookupUser(root, n); err == nil {
			out = append(out, u)
		}
	}
	return out
}

// bundle fetches the resolved releases into one offline archive.
func bundle(ctx context.Context, root *provision.Root, cfg *Config, o *options, stderr io.Writer) (int, error) {
	if o.out == "" {
		return provision.ExitUsage, usageError{"bundle needs --out FILE.tar.xz"}
	}
	run, err := provision.NewRun(ctx, root)
	if err != nil {
		return provision.ExitFailed, err
	}
	run.Log = stderr
	v, err := vendorConfig(cfg, run.ReadOnly(), o)
	if err != nil {
		return provision.ExitFailed, err
	}
	if err := vendorfetch.WriteBundle(ctx, v, o.out); err != nil {
		return provision.ExitFailed, err
	}
	safetext.Linef(stderr, "wrote %s", o.out)
	return 0, nil
}
