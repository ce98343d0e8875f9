package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/guard"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/verify"
)

// installedAgents are the agents with a vendor release here: the ones the
// receipt records (with their versions), and any whose vendor binary is in
// place without a record (a release put there by hand: version "").
func installedAgents(root *provision.Root, rc *provision.Receipt) map[string]string {
	out := map[string]string{}
	for _, name := range knownAgents {
		var st struct {
			Version string `json:"version"`
		}
		if raw, ok := rc.Extra["vendor."+name]; ok && json.Unmarshal(raw, &st) == nil && st.Version != "" {
			out[name] = st.Version
			continue
		}
		if p, ok := agent.Lookup(name); ok && p.Missing(strings.TrimSuffix(root.HostPath("/"), "/")) == nil {
			out[name] = ""
		}
	}
	return out
}

// fingerprint is what a verdict is taken on, as the host is now.
func fingerprint(root *provision.Root, rc *provision.Receipt) verify.Fingerprint {
	agents := installedAgents(root, rc)
	h := sha256.New()
	for _, name := range knownAgents {
		fmt.Fprintf(h, "%s=%s\n", name, verify.HashFile(root.HostPath(BinDir+"/"+name)))
	}
	fmt.Fprintf(h, "helper=%s\n", verify.HashFile(root.HostPath(HelperPath)))
	return verify.Fingerprint{Shadow: hex.EncodeToString(h.Sum(nil)), Agents: agents,
		Kernel: kernelRelease(), Sandbox: verify.HashFile(root.HostPath(sandbox.ConfigPath))}
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// verifyUser is whom the battery runs as: the invoking user, or for root
// the account --user names.
func verifyUser(root *provision.Root, name string) (verify.User, error) {
	if name != "" {
		if !provision.IsRoot() {
			return verify.User{}, usageError{"--user runs the battery as another account, which needs root: run `sudo cco-install verify --user " + safetext.Escape(name) + "`"}
		}
		u, err := provision.LookupUser(root.ReadOnly(), name)
		if err != nil {
			return verify.User{}, runError{provision.ExitFailed, fmt.Errorf("--user %s: %w (fix: name an account in /etc/passwd)", name, err)}
		}
		return verify.User{Name: u.Name, UID: u.UID, GID: u.GID, Home: u.Home}, nil
	}
	uid := os.Getuid()
	users, err := provision.Users(root.ReadOnly())
	if err != nil {
		return verify.User{}, runError{provision.ExitFailed, err}
	}
	for _, u := range users {
		if u.UID == uid {
			return verify.User{Name: u.Name, UID: u.UID, GID: u.GID, Home: u.Home}, nil
		}
	}
	return verify.User{}, runError{provision.ExitFailed, fmt.Errorf("uid %d is not in /etc/passwd: the battery needs the account's home (fix: run it as a user with an entry there)", uid)}
}

// verifyJail runs the battery for each installed agent (or o.agent) and
// reports it; it records the verdict when root runs it.
func verifyJail(ctx context.Context, root *provision.Root, o *options, stdout, stderr io.Writer) (int, error) {
	rc, _, err := provision.LoadReceipt(root)
	if err != nil {
		return provision.ExitFailed, err
	}
	installed := installedAgents(root, rc)
	var names []string
	if o.agent != "" {
		if _, ok := agent.Lookup(o.agent); !ok {
			return provision.ExitUsage, usageError{fmt.Sprintf("--agent %q is not an agent: want %s", safetext.Escape(o.agent), agent.List(agent.Names(), "or"))}
		}
		if _, ok := installed[o.agent]; !ok {
			return provision.ExitFailed, fmt.Errorf("%s is not installed here, so there is no jail of its to verify (fix: sudo cco-install --upgrade %s)", o.agent, o.agent)
		}
		names = []string{o.agent}
	} else {
		for _, n := range knownAgents {
			if _, ok := installed[n]; ok {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return provision.ExitFailed, errors.New("no agent is installed here, so there is no jail to verify (fix: sudo cco-install)")
	}
	u, err := verifyUser(root, o.user)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return provision.ExitUsage, err
		}
		return provision.ExitFailed, err
	}
	res, err := runBatteries(ctx, root, rc, names, u, installed)
	if err != nil {
		return provision.ExitFailed, err
	}
	if provision.IsRoot() {
		keep(root, &verify.Record{Result: *res, Fingerprint: fingerprint(root, rc)}, stderr)
	} else {
		safetext.Linef(stderr, "cco-install: not recorded: only root's verify is kept in %s (run `sudo cco-install verify`)", verify.RecordPath)
	}
	code := provision.ExitOK
	if !res.OK {
		code = provision.ExitConflict
	}
	if o.json {
		o.wrote = true
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return code, enc.Encode(res)
	}
	writeVerdict(stdout, res)
	return code, nil
}

// runBatteries runs one battery per agent as u and sums them up.
func runBatteries(ctx context.Context, root *provision.Root, rc *provision.Receipt, names []string, u verify.User, installed map[string]string) (*verify.Result, error) {
	passwd, _ := root.ReadFile("/etc/passwd")
	others := verify.OtherHomes(passwd, u)
	res := &verify.Result{Time: time.Now().UTC().Truncate(time.Second), Versions: map[string]string{"cco": provision.Version}}
	var bs []*verify.Battery
	for _, name := range names {
		p, _ := agent.Lookup(name)
		t := verify.Target{Agent: p, User: u, Shadow: root.HostPath(BinDir + "/" + name), OtherHomes: others, Reinstall: "sudo cco-install"}
		if e, ok := rc.Paths[BinDir+"/"+name]; ok && e.SHA256 != "" && verify.HashFile(t.Shadow) != e.SHA256 {
			// An edited owned file is replaced only with --force.
			t.Reinstall = "sudo cco-install --force"
		}
		if p.Policy != "" {
			t.GateScript = root.HostPath(guard.PromptGateScript)
		}
		b, err := verify.Run(ctx, t)
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
		res.Versions[name] = installed[name]
	}
	verify.Finish(res, bs)
	if res.Kernel == "" {
		res.Kernel = kernelRelease()
	}
	if res.Engine == "" {
		res.Engine = "unknown"
	}
	return res, nil
}

func writeVerdict(w io.Writer, res *verify.Result) {
	for _, c := range res.Checks {
		mark := "ok"
		if !c.OK {
			mark = "FAILED"
		}
		safetext.Linef(w, "%-7s %s %s: %s", mark, c.Agent, c.ID, c.Detail)
		if !c.OK && c.Fix != "" {
			safetext.Linef(w, "        fix: %s", c.Fix)
		}
	}
	layers := strings.Join(res.Layers, ", ")
	if layers == "" {
		layers = "none"
	}
	if res.OK {
		safetext.Linef(w, "jail verified: %d checks hold (engine %s; layers %s; kernel %s)", len(res.Checks), res.Engine, layers, res.Kernel)
		return
	}
	safetext.Linef(w, "jail NOT verified: %d of %d checks failed: %s (engine %s; layers %s; kernel %s)", len(res.Failed), len(res.Checks), strings.Join(res.Failed, ", "), res.Engine, layers, res.Kernel)
}

// jailVerified is status's summary of the kept verdict; nil when the jail
// was never verified here.
func jailVerified(root *provision.Root, rc *provision.Receipt) (*verify.Status, error) {
	rec, err := verify.Load(root.HostPath(verify.RecordPath))
	if err != nil || rec == nil {
		return nil, err
	}
	return verify.StatusOf(rec, fingerprint(root, rc)), nil
}

// verifiedLine is status's text line for the kept verdict.
func verifiedLine(st *verify.Status) string {
	if st == nil {
		return "never (run `sudo cco-install verify`)"
	}
	s := st.Time.Format(time.RFC3339) + ": "
	if st.OK {
		s += "ok"
	} else {
		s += "FAILED (" + strings.Join(st.Failed, ", ") + ")"
	}
	if len(st.Changed) == 0 {
		return s + "; nothing changed since"
	}
	return s + "; changed since: " + strings.Join(st.Changed, ", ") + " (run `sudo cco-install verify` again)"
}

// verifyAfterApply runs the battery as root after a run that changed the
// shadow, an agent or sandbox.toml, and records it; it says so in one line.
func verifyAfterApply(ctx context.Context, root *provision.Root, changed []string, stderr io.Writer) {
	if len(changed) == 0 || !provision.IsRoot() || !root.IsHost() {
		return
	}
	rc, _, err := provision.LoadReceipt(root)
	if err != nil {
		return
	}
	installed := installedAgents(root, rc)
	var names []string
	for _, n := range knownAgents {
		if _, ok := installed[n]; ok {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return
	}
	u := verify.User{Name: "root", UID: 0, GID: 0, Home: rootHome(root)}
	res, err := runBatteries(ctx, root, rc, names, u, installed)
	if err != nil {
		safetext.Linef(stderr, "cco-install: the jail could not be verified after this run: %v (run `sudo cco-install verify`)", err)
		return
	}
	keep(root, &verify.Record{Result: *res, Fingerprint: fingerprint(root, rc)}, stderr)
	if res.OK {
		safetext.Linef(stderr, "cco-install: jail verified after this run (%s changed): %d checks hold", strings.Join(changed, ", "), len(res.Checks))
	} else {
		safetext.Linef(stderr, "cco-install: WARNING: jail NOT verified after this run: %s failed (run `sudo cco-install verify` for each check's fix)", strings.Join(res.Failed, ", "))
	}
}

// keep writes the verdict beside the receipt (through the root, which
// follows no link a user planted); --uninstall removes it.
func keep(root *provision.Root, rec *verify.Record, stderr io.Writer) {
	b, err := verify.Marshal(rec)
	if err == nil {
		err = root.WriteFile(verify.RecordPath, bytes.NewReader(b), 0o644, provision.SystemUID(), provision.SystemGID())
	}
	if err != nil {
		safetext.Linef(stderr, "cco-install: the verdict was not recorded at %s: %v", verify.RecordPath, err)
	}
}

func rootHome(root *provision.Root) string {
	users, err := provision.Users(root.ReadOnly())
	if err == nil {
		for _, u := range users {
			if u.UID == 0 && u.Home != "" {
				return u.Home
			}
		}
	}
	return "/root"
}

// changedForVerify names what a run's report changed that a verdict is
// taken on: "shadow", "agents", "sandbox.toml".
func changedForVerify(rep *provision.Report) []string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, s := range rep.Steps {
		if s.Status != provision.StatusChanged {
			continue
		}
		switch {
		case strings.HasPrefix(s.ID, "vendor."):
			add("agents")
		case strings.HasPrefix(s.ID, "shadow."), s.ID == "sandbox.helper", s.ID == "sandbox.egress_proxy":
			add("shadow")
		case s.ID == "sandbox.config":
			add("sandbox.toml")
		}
	}
	return out
}
