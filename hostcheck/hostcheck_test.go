package hostcheck

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

const procLine = "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw%s\n"

// fake is a host whose files are a map; everything else is healthy.
func fake(files map[string]string) Host {
	return Host{
		ReadFile: func(p string) ([]byte, error) {
			if c, ok := files[p]; ok {
				return []byte(c), nil
			}
			return nil, fs.ErrNotExist
		},
		Exists:      func(p string) bool { _, ok := files[p]; return ok },
		Userns:      func() error { return nil },
		MountAPI:    func() bool { return true },
		LandlockABI: func() int { return 4 },
		Container:   func() bool { return false },
	}
}

// TestHealthyHostHasNoFindings: the baseline the simulations differ from.
func TestHealthyHostHasNoFindings(t *testing.T) {
	h := fake(map[string]string{
		"/proc/sys/user/max_user_namespaces": "15000\n",
		"/proc/self/mountinfo":               strings.Replace(procLine, "%s", "", 1),
	})
	if got := Check(h); len(got) != 0 {
		t.Fatalf("findings on a healthy host: %v", got)
	}
}

// TestEachFinding simulates each cause and checks its id, whether it
// blocks, and that cause and fix name what they must.
func TestEachFinding(t *testing.T) {
	refused := errors.New("bwrap: setting up uid map: Permission denied")
	cases := []struct {
		name     string
		files    map[string]string
		tweak    func(*Host)
		id       string
		blocking bool
		cause    string
		fix      string
	}{
		{"max_user_namespaces 0", map[string]string{"/proc/sys/user/max_user_namespaces": "0\n"}, nil,
			"preflight.max_user_namespaces", true, "user.max_user_namespaces is 0", "user.max_user_namespaces=15000"},
		{"unprivileged_userns_clone 0", map[string]string{"/proc/sys/kernel/unprivileged_userns_clone": "0\n"}, nil,
			"preflight.unprivileged_userns_clone", true, "unprivileged_userns_clone is 0", "kernel.unprivileged_userns_clone=1"},
		{"AppArmor restriction, no profile", map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n"}, nil,
			"preflight.apparmor_userns", false, "not installed", "sudo cco-install"},
		{"AppArmor restriction, profile not loaded", map[string]string{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1\n", AppArmorProfile: "x",
			"/sys/kernel/security/apparmor/profiles": "lsb_release (enforce)\n"}, nil,
			"preflight.apparmor_userns", false, "not loaded", "apparmor_parser -r " + AppArmorProfile},
		{"SELinux refuses", map[string]string{"/sys/fs/selinux/enforce": "1"}, func(h *Host) { h.Userns = func() error { return refused } },
			"preflight.selinux", true, "SELinux is enforcing", "audit2allow"},
		{"container without userns", nil, func(h *Host) {
			h.Container = func() bool { return true }
			h.Userns = func() error { return refused }
		}, "preflight.container", true, "container", "--security-opt"},
		{"proc subset", map[string]string{"/proc/self/mountinfo": strings.Replace(procLine, "%s", ",subset=pid", 1)}, nil,
			"preflight.proc", true, "subset=pid", "remount"},
		{"proc hidepid, probe fails", map[string]string{"/proc/self/mountinfo": strings.Replace(procLine, "%s", ",hidepid=invisible", 1)},
			func(h *Host) { h.Userns = func() error { return refused } }, "preflight.proc", true, "hidepid=invisible", "hidepid=0"},
		{"no mount API", nil, func(h *Host) { h.MountAPI = func() bool { return false } },
			"preflight.mount_api", false, "mount_setattr", "5.12"},
		{"no Landlock", nil, func(h *Host) { h.LandlockABI = func() int { return 0 } },
			"preflight.landlock", false, "Landlock", "CONFIG_SECURITY_LANDLOCK"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := fake(tc.files)
			if tc.tweak != nil {
				tc.tweak(&h)
			}
			got := Check(h)
			if len(got) != 1 {
				t.Fatalf("want one finding %s, got %v", tc.id, got)
			}
			f := got[0]
			if f.ID != tc.id || f.Blocking != tc.blocking || !strings.Contains(f.Cause, tc.cause) || !strings.Contains(f.Fix, tc.fix) {
				t.Errorf("got %+v; want id %s blocking %v, cause with %q, fix with %q", f, tc.id, tc.blocking, tc.cause, tc.fix)
			}
			if strings.Contains(f.Cause, "bwrap: ") && !strings.Contains(f.Cause, "(") {
				t.Errorf("a raw bwrap message as the cause: %q", f.Cause)
			}
		})
	}
}

// TestHidepidAloneIsNoFinding: the jail's own /proc is not reached by the
// host's hidepid; only a failing probe beside it is reported.
func TestHidepidAloneIsNoFinding(t *testing.T) {
	h := fake(map[string]string{"/proc/self/mountinfo": strings.Replace(procLine, "%s", ",hidepid=2", 1)})
	if got := Check(h); len(got) != 0 {
		t.Fatalf("hidepid with a working jail: %v", got)
	}
}

// TestThisMachine runs the real reads: the machine the tests run on has the
// mount API and Landlock, and user namespaces.
func TestThisMachine(t *testing.T) {
	if !MountAPI() {
		t.Error("MountAPI() is false on this kernel")
	}
	if LandlockABI() < 1 {
		t.Error("LandlockABI() is 0 on this kernel")
	}
	for _, f := range Check(Real(nil, func() bool { return false })) {
		t.Errorf("finding on the test machine: %v", f)
	}
}
