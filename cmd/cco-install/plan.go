package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/guard/wiring"
	"github.com/cco-dev/cco/internal/safetext"
	"github.com/cco-dev/cco/login"
	"github.com/cco-dev/cco/managed"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/takeover"
	"github.com/cco-dev/cco/userns"
	"github.com/cco-dev/cco/vendorfetch"
)

// knownAgents are the names the shadow is installed under, whatever `agents`
// says: an unbacked name fails loudly at launch, while an unshadowed vendor
// binary would run outside the jail. They are the agent table's.
var knownAgents = agent.Names()

// Installed paths of cco's own files.
const (
	BinDir          = "/usr/local/bin"
	HelperPath      = "/usr/libexec/cco/sandbox-helper"
	EgressProxyPath = sandbox.ProxyPath
	// PackagedShadow and PackagedEgressProxy are where the deb and rpm put
	// the two binaries cco-install copies into place.
	PackagedShadow      = "/usr/lib/cco/shadow"
	PackagedEgressProxy = "/usr/lib/cco/egress-proxy"
)

// binary is one of cco's programs that cco-install copies into place.
type binary struct {
	what     string // for messages: "shadow"
	key      string // the configuration key that names it: "shadow_path"
	name     string // its file name beside cco-install: "shadow"
	packaged string // where the package puts it
}

var (
	shadowBinary      = binary{"shadow", "shadow_path", "shadow", PackagedShadow}
	egressProxyBinary = binary{"egress proxy", "egress_proxy_path", "egress-proxy", PackagedEgressProxy}
)

// source finds the binary to install and logs which it found: its key,
// else b.name beside cco-install's own executable, else where the package
// puts it. These are host paths: the installer's own files, not the target's.
func (b binary) source(run *provision.View, cfg *Config) (string, error) {
	p, why, err := b.find(cfg)
	if err != nil {
		return "", err
	}
	run.Logf("%s binary: %s (%s)", b.what, p, why)
	return p, nil
}

func (b binary) find(cfg *Config) (path, why string, err error) {
	if p := cfg.String(b.key); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%s (from %s): %w", b.key, cfg.Source(b.key), err)
		}
		return p, b.key + ", from " + cfg.Source(b.key), nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), b.name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, "beside cco-install", nil
		}
	}
	if _, err := os.Stat(b.packaged); err == nil {
		return b.packaged, "the package's copy", nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	return "", "", fmt.Errorf("no %s binary: not set by %s, no '%s' beside cco-install, and no %s; build it (go build -o bin/ ./cmd/...) or set %s", b.what, b.key, b.name, b.packaged, b.key)
}

// buildPlan is the ordered list of steps for this machine: the take-over
// (which frees the shadow's names), then the shadow and the jail's own files,
// then the guard and the policy, and the vendors' downloads last, so that an
// interrupted or offline run has already put every agent's name behind the
// shadow.
func buildPlan(run *provision.View, cfg *Config, o *options) ([]provision.Step, error) {
	src, err := shadowBinary.source(run, cfg)
	if err != nil && run.Status {
		// A health check on a host without the package's copy: the
		// installed bytes, checked against the receipt, are the reference.
		src, err = run.Root.HostPath(BinDir+"/"+knownAgents[0]), nil
	}
	if err != nil {
		return nil, err
	}
	proxySrc, err := egressProxyBinary.source(run, cfg)
	if err != nil && run.Status {
		proxySrc, err = run.Root.HostPath(EgressProxyPath), nil
	}
	if err != nil {
		return nil, err
	}
	image := o.image || cfg.String("image") == "yes" || cfg.String("image") == "auto" && inContainer(run.Root)
	if image {
		provision.SetNoChown(true)
		run.Logf("image build: owners are left to the builder, and the shadow checks user namespaces at launch")
	}
	if !provision.IsRoot() {
		switch {
		case run.DryRun && run.Root.IsHost():
			// The real run is root's: preview its owners.
			provision.SetPlanOwner(0, 0)
		case run.Status:
			// Whoever installed it owns it; status checks the bytes and modes.
			provision.SetPlanOwner(-1, -1)
		}
	}
	uid, gid := provision.SystemUID(), provision.SystemGID()
	users := append(append([]string(nil), cfg.Users...), receiptUsers(run.Receipt)...)
	if u := os.Getenv("SUDO_USER"); u != "" {
		users = append([]string{u}, users...)
	}
	steps := takeover.Steps(run, takeover.Config{Users: users})
	for _, a := range knownAgents {
		steps = append(steps, &provision.File{
			StepID:     "shadow." + a,
			StepName:   "install the shadow as " + BinDir + "/" + a,
			Path:       BinDir + "/" + a,
			Mode:       0o755,
			UID:        uid,
			GID:        gid,
			SourcePath: src,
			Fix:        fmt.Sprintf("move it out of the way (for example an npm global install: npm uninstall -g), then run cco-install again; %s must be the shadow, or %s runs outside the jail", BinDir+"/"+a, a),
		})
	}
	steps = append(steps,
		&provision.File{
			StepID:     "sandbox.helper",
			StepName:   "install the in-sandbox helper",
			Path:       HelperPath,
			Mode:       0o755,
			UID:        uid,
			GID:        gid,
			SourcePath: src,
		},
		&provision.File{
			StepID:     "sandbox.egress_proxy",
			StepName:   "install the egress proxy",
			Path:       EgressProxyPath,
			Mode:       0o755,
			UID:        uid,
			GID:        gid,
			SourcePath: proxySrc,
		},
		&provision.File{
			StepID:       "sandbox.config",
			StepName:     "install the default " + sandbox.ConfigPath,
			Path:         sandbox.ConfigPath,
			Mode:         0o644,
			UID:          uid,
			GID:          gid,
			Content:      []byte(sandbox.DefaultConfigTOML),
			KeepExisting: true,
			Validate:     checkSandboxConfig,
			ValidateFix:  sandboxConfigFix,
		},
	)
	// The guard and the policy that wires it cover every known agent, like
	// the shadow: an agent installed some other way must run the guard too.
	steps = append(steps, wiring.Steps()...)
	steps = append(steps, managed.Steps(managed.Config{
		ClaudeManagedFile: claudeManagedFile(cfg),
		ForeignPolicy:     foreignPolicies(cfg),
		Agents:            knownAgents,
	})...)
	steps = append(steps, takeover.RCSteps(run, users, o.fixRC)...)
	usernsSteps, warnings := userns.Steps(run, userns.Options{NoAppArmor: o.noAppArmor, Image: image, SameKernel: run.Root.IsHost(), Host: userns.RealHost})
	for _, w := range warnings {
		run.Logf("warning: %s", w)
	}
	steps = append(steps, usernsSteps...)
	if d := cfg.String("shared_login_dir"); d != "" {
		steps = append(steps, &login.Step{Dir: d, Users: cfg.Users})
	}
	if steps, err = appendAutoUpgrade(steps, run, cfg); err != nil {
		return nil, err
	}
	vcfg, err := vendorConfig(cfg, run, o)
	if err != nil {
		return nil, err
	}
	if len(o.rollback) > 0 {
		agents, err := agentList("--rollback", o.rollback, cfg.Agents)
		if err != nil {
			return nil, err
		}
		steps = append(steps, vendorfetch.RollbackSteps(vcfg, agents)...)
	} else {
		steps = append(steps, vendorfetch.Steps(vcfg)...)
	}
	return steps, nil
}

// sandboxConfigFix is the fix of a sandbox.toml that every launch refuses,
// in a run's report and in status alike.
const sandboxConfigFix = "fix the file: every launch refuses it"

// checkSandboxConfig is the launch's own reading of sandbox.toml.
func checkSandboxConfig(b []byte) error {
	_, err := sandbox.ParseConfig(b, sandbox.ConfigPath)
	return err
}

// inContainer detects an image build by the target's container markers
// only: a missing TTY is not one (Ansible and ssh runs have none), and a
// root staged from inside a container is not an image because the host is.
func inContainer(root provision.FileReader) bool {
	if root.IsHost() && os.Getenv("container") != "" {
		return true
	}
	for _, p := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := root.Lstat(p); err == nil {
			return true
		}
	}
	return false
}

// httpClient is the vendors' HTTP client: nil, the default transport (it
// honours HTTPS_PROXY and NO_PROXY). The test binary injects a dialer.
var httpClient *http.Client

// vendorConfig maps the configuration keys onto vendorfetch's settings.
func vendorConfig(cfg *Config, run *provision.View, o *options) (vendorfetch.Config, error) {
	v := vendorfetch.DefaultConfig()
	v.Agents = cfg.Agents
	v.UnpackLimit, v.Retries, v.Backoff, v.Timeout = cfg.UnpackLimit, cfg.Retries, cfg.Backoff, cfg.Timeout
	v.RetryBudget, v.HTTPClient = cfg.RetryBudget, httpClient
	v.Bundle, v.Progress, v.Log = cfg.Bundle, cfg.Progress, run.Log
	v.Platform = cfg.String("platform")
	v.Upgrade = map[string]bool{}
	up, err := agentList("--upgrade", o.upgrade, upgradable(cfg.Agents, run.Receipt))
	if err != nil {
		return v, err
	}
	for _, a := range up {
		v.Upgrade[a] = true
		// --upgrade NAME installs a known agent that `agents` does not
		// name yet: the command the shadow names for it works.
		if !slices.Contains(v.Agents, a) {
			v.Agents = append(slices.Clone(v.Agents), a)
		}
	}
	v.AllowDowngrade = o.allowDowngrade
	if o.adopt {
		v.AdoptExisting, v.Users = true, statusUsers(run.Root, cfg, run.Receipt)
	}
	v.Explicit = map[string]bool{}
	vendorAgentConfig(cfg, &v)
	if err := v.Validate(); err != nil {
		return v, err
	}
	return v, nil
}

// foreignPolicies maps every <agent>.foreign_policy key there is onto
// managed's per-agent setting.
func foreignPolicies(cfg *Config) map[string]string {
	out := map[string]string{}
	for _, a := range knownAgents {
		if k := a + ".foreign_policy"; knownKey(k) {
			out[a] = cfg.String(k)
		}
	}
	return out
}

// upgradable is what `--upgrade all` upgrades: the agents key's agents
// and every agent the receipt records as installed (one that --upgrade
// NAME added), so that the daily timer keeps each installed agent current.
func upgradable(configured []string, rc *provision.Receipt) []string {
	return append(slices.Clone(configured), unconfigured(configured, rc)...)
}

// unconfigured are the agents the receipt records as installed that the
// agents key does not name (--upgrade NAME installed them).
func unconfigured(configured []string, rc *provision.Receipt) []string {
	var out []string
	for _, a := range knownAgents {
		if _, ok := rc.Extra["vendor."+a]; ok && !slices.Contains(configured, a) {
			out = append(out, a)
		}
	}
	return out
}

// agentList reads an --upgrade/--rollback value: an agent's name, or all,
// which is the agents given (the agents key, and for --upgrade the agents
// installed).
func agentList(flag string, vals, all []string) ([]string, error) {
	var out []string
	for _, a := range vals {
		switch {
		case a == "all":
			out = append(out, all...)
		case agent.Known(a):
			out = append(out, a)
		default:
			return nil, usageError{fmt.Sprintf("%s %s: want %s", flag, safetext.Escape(a), agent.List(append(agent.Names(), "all"), "or"))}
		}
	}
	return out, nil
}

// receiptUsers are the accounts whose homes the receipt took a vendor
// install out of: their homes are checked whatever `users` says now, so a
// vendor install that comes back there is found.
func receiptUsers(rc *provision.Receipt) []string {
	var out []string
	for _, r := range rc.Relocations {
		if r.User != "" && !contains(out, r.User) {
			out = append(out, r.User)
		}
	}
	return out
}
