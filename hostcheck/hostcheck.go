// Package hostcheck is the preflight of the jail on this machine: the kernel
// settings, security modules, container runtimes and /proc mounts where agent
// sandboxes break in the field, each named with its cause and a fix that
// works as written. cco-install runs it before anything is installed and in
// status; `cco-install verify` then proves the jail itself.
package hostcheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Finding is one cause. A Blocking one means no jail can be built here: a
// run refuses before it writes anything. The others are said (a weaker
// layer, a fallback), not refused.
type Finding struct {
	ID       string
	Cause    string
	Fix      string
	Blocking bool
}

// Host is what the checks read; tests replace each part.
type Host struct {
	// ReadFile reads a host file (/proc/sys/..., /sys/...).
	ReadFile func(string) ([]byte, error)
	// Exists reports whether a host path exists.
	Exists func(string) bool
	// Userns runs an unprivileged user-namespace probe (bwrap as nobody);
	// nil when they work. It is only called when another finding needs its
	// answer.
	Userns func() error
	// MountAPI reports whether the kernel has mount_setattr (Linux 5.12).
	MountAPI func() bool
	// LandlockABI is the kernel's Landlock ABI version, 0 without Landlock.
	LandlockABI func() int
	// Container reports whether this runs in a container.
	Container func() bool
}

// Real asks this machine.
func Real(userns func() error, container func() bool) Host {
	return Host{
		ReadFile: os.ReadFile,
		Exists: func(p string) bool {
			_, err := os.Lstat(p)
			return err == nil
		},
		Userns:      userns,
		MountAPI:    MountAPI,
		LandlockABI: LandlockABI,
		Container:   container,
	}
}

// MountAPI reports whether the kernel has mount_setattr: called with a bad
// descriptor it fails with EBADF where it exists and ENOSYS where not.
func MountAPI() bool {
	err := unix.MountSetattr(-1, "", 0, &unix.MountAttr{})
	return !errors.Is(err, unix.ENOSYS)
}

// LandlockABI is the kernel's Landlock ABI version (0: none, or disabled at
// boot).
func LandlockABI() int {
	const createRulesetVersion = 1 // LANDLOCK_CREATE_RULESET_VERSION
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// AppArmorProfile is cco's profile that grants bwrap user namespaces where
// AppArmor restricts them (package userns installs it).
const AppArmorProfile = "/etc/apparmor.d/cco-bwrap"

func (h Host) sysctl(path string) (string, bool) {
	b, err := h.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// Check runs every check and returns the findings, blocking ones first.
func Check(h Host) []Finding {
	var out []Finding
	var probed bool
	var probeErr error
	userns := func() error {
		if !probed && h.Userns != nil {
			probed, probeErr = true, h.Userns()
		}
		return probeErr
	}
	if v, ok := h.sysctl("/proc/sys/user/max_user_namespaces"); ok && v == "0" {
		out = append(out, Finding{ID: "preflight.max_user_namespaces", Blocking: true,
			Cause: "user.max_user_namespaces is 0: no process may create a user namespace, so no jail can be built",
			Fix:   "echo user.max_user_namespaces=15000 | sudo tee /etc/sysctl.d/90-cco-userns.conf && sudo sysctl --system"})
	}
	if v, ok := h.sysctl("/proc/sys/kernel/unprivileged_userns_clone"); ok && v == "0" {
		out = append(out, Finding{ID: "preflight.unprivileged_userns_clone", Blocking: true,
			Cause: "kernel.unprivileged_userns_clone is 0: users cannot create the user namespaces the jail is built in",
			Fix:   "echo kernel.unprivileged_userns_clone=1 | sudo tee /etc/sysctl.d/90-cco-userns.conf && sudo sysctl --system"})
	}
	if v, ok := h.sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); ok && v == "1" {
		loaded, _ := h.ReadFile("/sys/kernel/security/apparmor/profiles")
		switch {
		case !h.Exists(AppArmorProfile):
			out = append(out, Finding{ID: "preflight.apparmor_userns",
				Cause: "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1) and cco's profile " + AppArmorProfile + " is not installed: bwrap fails with \"setting up uid map: Permission denied\"",
				Fix:   "sudo cco-install (it installs and loads " + AppArmorProfile + ")"})
		case !bytes.Contains(loaded, []byte("cco-bwrap")):
			out = append(out, Finding{ID: "preflight.apparmor_userns",
				Cause: "AppArmor restricts unprivileged user namespaces and cco's profile " + AppArmorProfile + " is installed but not loaded",
				Fix:   "sudo apparmor_parser -r " + AppArmorProfile})
		}
	}
	if v, ok := h.sysctl("/sys/fs/selinux/enforce"); ok && v == "1" {
		if err := userns(); err != nil {
			out = append(out, Finding{ID: "preflight.selinux", Blocking: true,
				Cause: "SELinux is enforcing and its policy refuses the jail's user namespaces (" + firstLine(err.Error()) + ")",
				Fix:   "find bwrap's denials with `sudo ausearch -m avc -ts recent | grep bwrap` and allow them with a local module (`sudo ausearch -m avc -ts recent | audit2allow -M cco-bwrap && sudo semodule -i cco-bwrap.pp`), or run the agents' users as unconfined_u"})
		}
	}
	if h.Container != nil && h.Container() {
		if err := userns(); err != nil {
			out = append(out, Finding{ID: "preflight.container", Blocking: true,
				Cause: "this runs in a container that does not allow user namespaces (" + firstLine(err.Error()) + ")",
				Fix:   "start the container with user namespaces allowed: docker run --security-opt seccomp=unconfined --security-opt apparmor=unconfined (or --privileged), podman run --security-opt label=disable; or install cco on the host instead"})
		}
	}
	if opts, ok := procOptions(h); ok {
		if v := opt(opts, "subset"); v != "" {
			out = append(out, Finding{ID: "preflight.proc", Blocking: true,
				Cause: "/proc is mounted with subset=" + v + ": the kernel then refuses the jail its own /proc (a procfs is mountable in a user namespace only where the host's is fully visible)",
				Fix:   "remount /proc without subset: sudo mount -o remount,subset= /proc, and drop subset= from its /etc/fstab line (or the container runtime's /proc mount)"})
		}
		if v := opt(opts, "hidepid"); v != "" && v != "0" && v != "off" {
			// The jail mounts a /proc of its own, which hidepid does not
			// reach; it is named only where the probe fails beside it.
			if err := userns(); err != nil {
				out = append(out, Finding{ID: "preflight.proc", Blocking: true,
					Cause: "the jail cannot be built (" + firstLine(err.Error()) + ") and /proc is mounted with hidepid=" + v + ", which container runtimes set together with a /proc the kernel does not count as fully visible",
					Fix:   "remount /proc with hidepid=0 (sudo mount -o remount,hidepid=0 /proc) or give the container a plain /proc mount, then run `sudo cco-install status` again"})
			}
		}
	}
	if h.MountAPI != nil && !h.MountAPI() {
		out = append(out, Finding{ID: "preflight.mount_api",
			Cause: "the kernel has no mount_setattr (the new mount API, Linux 5.12): the jail is built by bubblewrap, the fallback engine",
			Fix:   "boot a kernel of 5.12 or later for cco's own engine"})
	}
	if h.LandlockABI != nil && h.LandlockABI() == 0 {
		out = append(out, Finding{ID: "preflight.landlock",
			Cause: "the kernel has no Landlock (or it is off at boot): the jail runs without its second layer",
			Fix:   "boot a kernel with CONFIG_SECURITY_LANDLOCK=y and landlock in its lsm= list (cat /sys/kernel/security/lsm shows the active ones)"})
	}
	// Blocking first: they are what a run refuses on.
	var blocking, rest []Finding
	for _, f := range out {
		if f.Blocking {
			blocking = append(blocking, f)
		} else {
			rest = append(rest, f)
		}
	}
	return append(blocking, rest...)
}

// procOptions are the super options of the mount at /proc, from
// /proc/self/mountinfo.
func procOptions(h Host) ([]string, bool) {
	b, err := h.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, false
	}
	var opts []string
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// id parent maj:min root mountpoint options [optional...] - fstype source superoptions
		if len(f) < 10 || f[4] != "/proc" {
			continue
		}
		for i, x := range f {
			if x == "-" && i+3 < len(f) && f[i+1] == "proc" {
				opts, found = strings.Split(f[i+3], ","), true // the last /proc mount is on top
			}
		}
	}
	return opts, found
}

func opt(opts []string, key string) string {
	for _, o := range opts {
		if k, v, ok := strings.Cut(o, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// String is the finding in one line with its fix.
func (f Finding) String() string { return fmt.Sprintf("%s: %s (fix: %s)", f.ID, f.Cause, f.Fix) }
