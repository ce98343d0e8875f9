package supervise

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// Exit codes of refusals, as a shell reports them.
const (
	ExitCannotRun = 126 // the jail cannot be built
	ExitNotFound  = 127 // the vendor binary is missing
)

// ExitStatus is the agent's status as bwrap reports it (ran: the status
// stream had the command's exit); a jail that failed before the agent
// started is diagnosed, the reason returned with ExitCannotRun.
func ExitStatus(ws syscall.WaitStatus, ran bool, bwrap string) (int, string) {
	if ws.Signaled() {
		return 128 + int(ws.Signal()), ""
	}
	code := ws.ExitStatus()
	if !ran && code != 0 {
		return ExitCannotRun, Diagnose(bwrap)
	}
	return code, ""
}

// Diagnose tells why bwrap could not build a jail. It runs only after a
// failure, so the fast path never pays for it.
func Diagnose(bwrap string) string {
	var out bytes.Buffer
	c := exec.Command(bwrap, "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--", "/bin/true")
	c.Stderr = &out
	perr := c.Run()
	msg := strings.TrimSpace(out.String())
	container := perr != nil && InContainer(os.Getenv)
	if perr != nil && (strings.Contains(msg, "uid map") || strings.Contains(msg, "No permissions to create") ||
		strings.Contains(msg, "new namespace") || strings.Contains(msg, "Permission denied")) {
		if container {
			return "user namespaces are blocked here. " + ContainerFix(msg)
		}
		return "user namespaces are blocked here (" + msg + "); on Ubuntu 24.04 AppArmor restricts them: " +
			"fix: sudo cco-install (it installs an AppArmor profile for " + bwrap + " that allows userns), or by hand: " +
			"write /etc/apparmor.d/bwrap with `abi <abi/4.0>, include <tunables/global> profile bwrap " + bwrap +
			" flags=(unconfined) { userns, }` and run sudo apparmor_parser -r /etc/apparmor.d/bwrap"
	}
	if container {
		return ContainerFix(msg)
	}
	return "bwrap failed before the agent started (its message is above); fix that, or report it with the message"
}

// InContainer reports whether this runs in a container: Docker's and
// Podman's marker files, or the container variable systemd-nspawn and
// Podman set.
func InContainer(getenv func(string) string) bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Lstat(f); err == nil {
			return true
		}
	}
	return getenv("container") != ""
}

// ContainerFix is the refusal inside a container whose engine's defaults
// refuse what bwrap needs (see examples/Dockerfile).
func ContainerFix(msg string) string {
	return "bwrap cannot build the jail inside this container (" + msg + "): the container engine's defaults refuse " +
		"what it needs: Docker's default seccomp profile blocks unshare(CLONE_NEWUSER), mount and pivot_root, its " +
		"docker-default AppArmor profile blocks mount, and its masked /proc makes the kernel refuse the jail's own /proc. " +
		"fix: start the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined " +
		"--security-opt systempaths=unconfined (devcontainer.json: \"runArgs\": [\"--security-opt\", \"seccomp=unconfined\", " +
		"\"--security-opt\", \"apparmor=unconfined\", \"--security-opt\", \"systempaths=unconfined\"]), never --privileged; " +
		"on an Ubuntu 24.04 host, AppArmor restricts user namespaces on the host itself: there, sudo cco-install " +
		"(it installs an AppArmor profile for bwrap that allows userns), or sudo apparmor_parser -r /etc/apparmor.d/bwrap. " +
		"See examples/Dockerfile."
}
