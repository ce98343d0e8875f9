package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cco-dev/cco/login"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/takeover"
	"github.com/cco-dev/cco/userns"
)

// knownAgents are the names the shadow is installed under, whatever `agents`
// says: an unbacked name fails loudly at launch, while an unshadowed vendor
// binary would run outside the jail.
var knownAgents = []string{"claude", "codex"}

// Installed paths of cco's own files.
const (
	BinDir     = "/usr/local/bin"
	HelperPath = "/usr/libexec/cco/sandbox-helper"
	// PackagedShadow is where the deb and rpm put the shadow binary.
	PackagedShadow = "/usr/lib/cco/shadow"
)

// shadowSource finds the shadow binary to install: the shadow_path key, else
// "shadow" beside cco-install's own executable, else where the package puts
// it. These are host paths: the installer's own files, not the target's.
func shadowSource(cfg *Config) (path, why string, err error) {
	if cfg.ShadowPath != "" {
		if _, err := os.Stat(cfg.ShadowPath); err != nil {
			return "", "", fmt.Errorf("shadow_path (from %s): %w", cfg.Source("shadow_path"), err)
		}
		return cfg.ShadowPath, "shadow_path, from " + cfg.Source("shadow_path"), nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "shadow")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, "beside cco-install", nil
		}
	}
	if _, err := os.Stat(PackagedShadow); err == nil {
		return PackagedShadow, "the package's copy", nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	return "", "", fmt.Errorf("no shadow binary: not set by shadow_path, no 'shadow' beside cco-install, and no %s; build it (go build -o bin/ ./cmd/...) or set shadow_path", PackagedShadow)
}

// buildPlan is the ordered list of steps for this machine. The shadow goes
// first: at no point may a vendor binary be reachable on PATH unwrapped.
func buildPlan(run *provision.Run, cfg *Config, o *options) ([]provision.Step, error) {
	src, why, err := shadowSource(cfg)
	if err != nil {
		return nil, err
	}
	run.Logf("shadow binary: %s (%s)", src, why)
	image := o.image || cfg.String("image") == "yes" || cfg.String("image") == "auto" && inContainer()
	if image {
		provision.SetNoChown(true)
		run.Logf("image build: owners are left to the builder, and the shadow checks user namespaces at launch")
	}
	uid, gid := provision.SystemUID(), provision.SystemGID()
	users := cfg.Users
	if u := os.Getenv("SUDO_USER"); u != "" {
		users = append([]string{u}, users...)
	}
	steps := takeover.Steps(run, takeover.Config{Users: users})
	steps = append(steps, takeover.RCSteps(run, users, o.fixRC)...)
	usernsSteps, warnings := userns.Steps(run, userns.Options{NoAppArmor: o.noAppArmor, Image: image, SameKernel: run.Root.IsHost(), Host: userns.RealHost})
	for _, w := range warnings {
		run.Logf("warning: %s", w)
	}
	steps = append(steps, usernsSteps...)
	if d := cfg.String("shared_login_dir"); d != "" {
		steps = append(steps, &login.Step{Dir: d, Users: cfg.Users})
	}
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
			StepID:       "sandbox.config",
			StepName:     "install the default " + sandbox.ConfigPath,
			Path:         sandbox.ConfigPath,
			Mode:         0o644,
			UID:          uid,
			GID:          gid,
			Content:      []byte(sandbox.DefaultConfigTOML),
			KeepExisting: true,
		},
	)
	return steps, nil
}

// inContainer detects an image build by container markers only: a missing
// TTY is not one (Ansible and ssh runs have none).
func inContainer() bool {
	if os.Getenv("container") != "" {
		return true
	}
	for _, p := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Lstat(p); err == nil {
			return true
		}
	}
	return false
}
