package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/cco-dev/cco/hostcheck"
	"github.com/cco-dev/cco/internal/sysbin"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/sandbox"
	"github.com/cco-dev/cco/userns"
	"github.com/cco-dev/cco/vendorfetch"
)

// MinBwrap is the oldest bubblewrap the jail works with: it sizes its
// tmpfs mounts with --size, which bubblewrap 0.8.0 added.
var MinBwrap = [3]int{0, 8, 0}

// preflight checks what a run needs before its first step, so that a run
// that cannot succeed refuses before it writes anything. Status reports the
// same checks as findings.
func preflight(root provision.Reader, cfg *Config, image bool) []provision.Finding {
	var out []provision.Finding
	if root.IsHost() && !image {
		out = append(out, checkBwrap(root, bwrapVersion)...)
		for _, f := range hostFindings(root) {
			if f.Blocking {
				out = append(out, provision.Finding{ID: f.ID, Detail: f.Cause, Fix: f.Fix})
			}
		}
	}
	if b := cfg.Bundle; b != "" {
		if err := vendorfetch.CheckBundle(b); err != nil {
			out = append(out, provision.Finding{ID: "preflight.bundle", Path: b, Detail: err.Error(), Fix: "pass a bundle made by `cco-install bundle --out FILE.tar.xz` (a readable file)"})
		}
	}
	for _, name := range cfg.Users {
		if _, err := provision.LookupUser(root, name); err != nil {
			out = append(out, provision.Finding{ID: "preflight.users", Path: "/etc/passwd", Detail: fmt.Sprintf("users names %q: %v", name, err), Fix: "create the account, or remove it from `users` in " + ConfigPath})
		}
	}
	if d := cfg.String("shared_login_dir"); d != "" && !path.IsAbs(d) {
		out = append(out, provision.Finding{ID: "preflight.shared_login_dir", Detail: fmt.Sprintf("shared_login_dir %q is not an absolute path", d), Fix: "set it to an absolute directory such as /srv/cco-login"})
	}
	return out
}

// hostHost is the machine the host checks read: a test seam.
var hostHost = func(root provision.Reader) hostcheck.Host {
	var probe func() error
	if provision.IsRoot() {
		// The probe switches to nobody, which only root can.
		probe = userns.RealHost.Probe
	}
	return hostcheck.Real(probe, func() bool { return inContainer(root) })
}

// hostFindings are the kernel's, the security modules' and the container's
// causes that keep the jail from being built here, or weaken it
// (package hostcheck).
func hostFindings(root provision.Reader) []hostcheck.Finding {
	return hostcheck.Check(hostHost(root))
}

// bwrapVersion runs the host's bwrap for its version line.
var bwrapVersion = func(hostPath string) (string, error) {
	out, err := exec.Command(hostPath, "--version").Output()
	return string(out), err
}

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)(?:\.(\d+))?`)

// checkBwrap finds the bubblewrap the jail runs (/usr/bin/bwrap) and checks
// its version.
func checkBwrap(root provision.Reader, version func(string) (string, error)) []provision.Finding {
	fix := installFix(root)
	fi, err := root.Lstat(sandbox.BwrapPath)
	if err != nil {
		return []provision.Finding{{ID: "preflight.bwrap", Path: sandbox.BwrapPath, Detail: "bubblewrap is not installed (no " + sandbox.BwrapPath + "): no agent can start", Fix: fix}}
	}
	if fi.Mode()&0o111 == 0 {
		return []provision.Finding{{ID: "preflight.bwrap", Path: sandbox.BwrapPath, Detail: sandbox.BwrapPath + " is not executable", Fix: fix}}
	}
	out, err := version(root.HostPath(sandbox.BwrapPath))
	m := versionRE.FindStringSubmatch(out)
	if err != nil || m == nil {
		return []provision.Finding{{ID: "preflight.bwrap", Path: sandbox.BwrapPath, Detail: fmt.Sprintf("%s --version does not say its version (%v)", sandbox.BwrapPath, err), Fix: fix}}
	}
	var got [3]int
	for i := range got {
		got[i], _ = strconv.Atoi(m[i+1])
	}
	for i := range got {
		if got[i] != MinBwrap[i] {
			if got[i] < MinBwrap[i] {
				return []provision.Finding{{ID: "preflight.bwrap", Path: sandbox.BwrapPath, Detail: fmt.Sprintf("bubblewrap %s is older than the %d.%d.%d the jail needs", strings.TrimSpace(m[0]), MinBwrap[0], MinBwrap[1], MinBwrap[2]), Fix: "upgrade it: " + fix}}
			}
			break
		}
	}
	return nil
}

// installFix names the command that installs bubblewrap on this system.
func installFix(root provision.Reader) string {
	cmd := "apt-get install bubblewrap (Debian, Ubuntu) or dnf install bubblewrap (Fedora, RHEL)"
	switch {
	case exists(root, "/usr/bin/apt-get"):
		cmd = "apt-get install bubblewrap"
	case exists(root, "/usr/bin/dnf"):
		cmd = "dnf install bubblewrap"
	}
	return "run `sudo " + cmd + "`, or pass --install-deps"
}

func exists(root provision.Reader, p string) bool {
	_, err := root.Lstat(p)
	return err == nil
}

// installDeps installs bubblewrap with the system's package manager.
func installDeps(root provision.Reader, run func(name string, args ...string) error) error {
	if !root.IsHost() {
		return fmt.Errorf("--install-deps installs packages on this machine only: under --root the image build installs bubblewrap")
	}
	if exists(root, sandbox.BwrapPath) {
		return nil
	}
	switch {
	case exists(root, "/usr/bin/apt-get"):
		return run("apt-get", "install", "-y", "bubblewrap")
	case exists(root, "/usr/bin/dnf"):
		return run("dnf", "install", "-y", "bubblewrap")
	}
	return fmt.Errorf("--install-deps: neither apt-get nor dnf is here: install bubblewrap with the system's package manager")
}

func runCommand(stderr *os.File) func(string, ...string) error {
	return func(name string, args ...string) error {
		cmd, err := sysbin.Command(context.Background(), name, args...)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = stderr, &buf
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(buf.String()))
		}
		return nil
	}
}

// usernsProblem runs the shadow's own user-namespace probe (as nobody, the
// way an agent's user runs bwrap): where it fails, no agent can start.
func usernsProblem(root provision.Reader, image bool, probe func() error) []provision.Finding {
	if !root.IsHost() || image || !exists(root, sandbox.BwrapPath) {
		return nil
	}
	if err := probe(); err != nil {
		return []provision.Finding{{ID: "userns", Detail: "unprivileged users cannot create the user namespaces bubblewrap needs: " + err.Error(), Fix: "run `sudo cco-install` (it installs an AppArmor profile where AppArmor is the cause), or enable user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0)"}}
	}
	return nil
}
