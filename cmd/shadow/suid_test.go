package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cco-dev/cco/internal/testenv"
)

// TestJailNoSetuidFiles is item 4 of the jail's rule: no call in the jail
// makes a setuid or setgid file, for root and for a user, in both
// profiles. The fake agent tries every call (suid.go); the verdict is the
// files on the host. A run of the same probe outside any jail proves that
// the probe does make such files where nothing stops it.
func TestJailNoSetuidFiles(t *testing.T) {
	testenv.RequireRoot(t)
	root := systemRoot(t)
	for _, u := range []runAs{asRoot, asNobody} {
		t.Run("unjailed/"+u.name, func(t *testing.T) {
			w := newWorld(t, u)
			c := exec.Command(filepath.Join(root, "bin/fakeagent"), "probe", params(map[string]any{"mode": "suid", "tag": "suid"}))
			c.Dir = w.ws2
			if u.uid != 0 {
				c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
			}
			r := runCmd(t, c)
			// Setuid files made on purpose go as soon as they are counted.
			defer os.RemoveAll(filepath.Join(w.ws2, "suid"))
			if r.code != 0 || r.report == nil {
				t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			made := 0
			for _, p := range suidPaths(t, r.report) {
				if fi, err := os.Lstat(p); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					made++
				}
			}
			// Every call that creates or chmods a file, with either bit
			// (mkdir strips both itself): at least the *at forms on every
			// arch, fchmod and openat's O_TMPFILE included.
			if made < 12 {
				t.Errorf("outside a jail the probe made only %d setuid/setgid files: it does not test what it claims\n%s", made, r.stdout)
			}
			for _, k := range []string{"fchmodat_suid", "openat_sgid", "openat_tmpfile_suid", "mknodat_sgid"} {
				if r.report[k] != "ok" {
					t.Errorf("outside a jail %s = %q, want ok", k, r.report[k])
				}
			}
		})
		for _, name := range []string{"claude", "codex"} {
			t.Run(name+"/"+u.name, func(t *testing.T) {
				w := newWorld(t, u)
				r := runCmd(t, w.cmd(root, name, w.ws, "probe", params(map[string]any{"mode": "suid", "tag": "suid"})))
				if r.code != 0 || r.report == nil {
					t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
				}
				jailedNoSetuid(t, w, r.report)
			})
		}
	}
}

func suidPaths(t *testing.T, rep map[string]string) []string {
	t.Helper()
	ps := strings.Split(rep["suid_paths"], "\x1f")
	if len(ps) < 20 {
		t.Fatalf("the probe reported %d paths: %q", len(ps), rep["suid_paths"])
	}
	return ps
}

func jailedNoSetuid(t *testing.T, w *world, rep map[string]string) {
	t.Helper()
	// On the host: no file the probe named has either bit.
	for _, p := range suidPaths(t, rep) {
		if !strings.HasPrefix(p, w.ws+"/suid/") {
			t.Fatalf("probe path %s is not in the workspace", p)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			continue // not made at all
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s is %v on the host", p, fi.Mode())
		}
	}
	if n, err := unix.Lgetxattr(w.ws+"/suid/setcap", "security.capability", make([]byte, 64)); err == nil {
		t.Errorf("the jail gave %s file capabilities (%d bytes)", w.ws+"/suid/setcap", n)
	}
	// In the jail: each call failed with the filter's answer, and the
	// same call without the bits worked.
	seen := 0
	for k, v := range rep {
		call, bit, ok := strings.Cut(k, "_s")
		if !ok || (bit != "uid" && bit != "gid") {
			continue
		}
		seen++
		want := "EPERM"
		if call == "openat2" {
			want = "ENOSYS"
		}
		if v != want {
			t.Errorf("%s = %q, want %s", k, v, want)
		}
	}
	if seen < 16 {
		t.Errorf("only %d refused calls reported", seen)
	}
	for k, v := range rep {
		if call, ok := strings.CutSuffix(k, "_plain"); ok {
			want := "ok"
			if call == "openat2" {
				want = "ENOSYS" // refused whatever the mode, so libc uses openat
			}
			if v != want {
				t.Errorf("%s = %q, want %s", k, v, want)
			}
		}
	}
	if fi, err := os.Stat(w.ws + "/suid/fchmodat-plain"); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("fchmodat 0750 did not reach the host: %v %v", fi, err)
	}
	for k, want := range map[string]string{"openat_garbage_mode": "ok", "io_uring_setup": "ENOSYS"} {
		if rep[k] != want {
			t.Errorf("%s = %q, want %s", k, rep[k], want)
		}
	}
	if !denied(rep["setcap"]) {
		t.Errorf("setcap = %q, want refused", rep["setcap"])
	}
}
