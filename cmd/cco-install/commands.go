package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/cco-dev/cco/guard/wiring"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/vendorfetch"
)

// printConfig shows every key's effective value and where it came from.
func printConfig(cfg *Config, o *options, stdout io.Writer) error {
	lines := cfg.Lines()
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"schema": provision.ReportSchema, "file": cfg.path, "keys": lines})
	}
	for _, l := range lines {
		b, _ := json.Marshal(l.Value)
		fmt.Fprintf(stdout, "%s = %s  # %s\n", l.Key, b, l.Source)
	}
	return nil
}

// status compares the installation with its receipt.
func status(ctx context.Context, root *provision.Root, cfg *Config, o *options, stdout io.Writer) (int, error) {
	rc, _, err := provision.LoadReceipt(root)
	if err != nil {
		return provision.ExitFailed, err
	}
	rep := provision.CheckReceipt(root, rc, o.verify)
	if len(rc.Paths) == 0 {
		rep.AddFinding(provision.Finding{ID: "receipt", Path: provision.ReceiptPath, Detail: "cco is not installed here (no receipt)", Fix: "sudo cco-install"})
	}
	users := statusUsers(root, cfg)
	reported := map[string]bool{}
	for _, p := range rep.Paths {
		if p.Status != provision.PathOK {
			reported[p.Path] = true
		}
	}
	for _, f := range wiring.Drift(root, rc, users) {
		if !reported[f.Path] {
			rep.AddFinding(provision.Finding{ID: "guard", Path: f.Path, Detail: f.Message, Fix: f.Fix})
		}
	}
	st := &statusDoc{StatusReport: rep, Agents: agentStatus(root, rc, rep), Egress: egressMode(root, rep)}
	for _, a := range st.Agents {
		if !a.GuardActive && len(rc.Paths) > 0 {
			rep.AddFinding(provision.Finding{ID: "guard." + a.Agent, Path: a.GuardPath, Detail: a.Agent + ": the guard is not active: " + a.GuardDetail, Fix: a.GuardFix})
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return rep.ExitCode(), enc.Encode(st)
	}
	for _, a := range st.Agents {
		v := a.Version
		if v == "" {
			v = "not installed"
		}
		fmt.Fprintf(stdout, "%-8s %s: %s; shadow %s; guard %s\n", "agent", a.Agent, v, map[bool]string{true: "in place", false: "NOT in place"}[a.Shadow], a.Guard)
	}
	egressLine := "egress: " + st.Egress
	if st.Egress == "off" {
		egressLine += " (no network at all for the agents: set by the operator in " + sandbox.ConfigPath + ")"
	}
	fmt.Fprintln(stdout, egressLine)
	rep.WriteText(stdout)
	return rep.ExitCode(), nil
}

// statusDoc is the status JSON: the receipt check plus one line per agent.
type statusDoc struct {
	*provision.StatusReport
	Agents []agentLine `json:"agents"`
	// Egress is the jail's network policy from sandbox.toml: public,
	// allowlist or off ("off" is an operator's choice: reported, not drift).
	Egress string `json:"egress"`
}

// egressMode reads the jail's network policy; a sandbox.toml that does not
// parse is drift (every launch refuses it).
func egressMode(root *provision.Root, rep *provision.StatusReport) string {
	b, err := root.ReadFile(sandbox.ConfigPath)
	if err != nil {
		return "public"
	}
	c, err := sandbox.ParseConfig(b, sandbox.ConfigPath)
	if err != nil {
		rep.AddFinding(provision.Finding{ID: "sandbox.config", Path: sandbox.ConfigPath, Detail: err.Error(), Fix: "fix the file: every launch refuses it"})
		return "unknown"
	}
	if c.Egress == "" {
		return "public"
	}
	return c.Egress
}

type agentLine struct {
	Agent       string `json:"agent"`
	Version     string `json:"version"`
	Shadow      bool   `json:"shadow"`
	Guard       string `json:"guard"`
	GuardActive bool   `json:"guard_active"`
	GuardPath   string `json:"guard_path,omitempty"`
	GuardDetail string `json:"-"`
	GuardFix    string `json:"-"`
}

func agentStatus(root *provision.Root, rc *provision.Receipt, rep *provision.StatusReport) []agentLine {
	ok := map[string]bool{}
	for _, p := range rep.Paths {
		ok[p.Path] = p.Status == provision.PathOK
	}
	var out []agentLine
	for _, w := range wiring.Wired(root, rc, knownAgents) {
		l := agentLine{Agent: w.Agent, Guard: string(w.State), GuardActive: w.Active, GuardPath: w.Path, GuardDetail: w.Detail, GuardFix: w.Fix}
		l.Shadow = ok[BinDir+"/"+w.Agent]
		var st struct {
			Version string `json:"version"`
		}
		if raw, found := rc.Extra["vendor."+w.Agent]; found && json.Unmarshal(raw, &st) == nil {
			l.Version = st.Version
		}
		out = append(out, l)
	}
	return out
}

// statusUsers are the accounts whose PATH status checks: root, the invoking
// user and the `users` key.
func statusUsers(root *provision.Root, cfg *Config) []*provision.User {
	names := append([]string{"root", os.Getenv("SUDO_USER")}, cfg.Users...)
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
	v, err := vendorConfig(cfg, run, o)
	if err != nil {
		return provision.ExitFailed, err
	}
	if err := vendorfetch.WriteBundle(ctx, v, o.out); err != nil {
		return provision.ExitFailed, err
	}
	fmt.Fprintf(stderr, "wrote %s\n", o.out)
	return 0, nil
}
