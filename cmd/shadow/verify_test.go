package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/verify"
)

// gateFor writes a prompt gate that runs this root's helper, as the
// installed /usr/libexec/cco/guard/prompt-gate runs the installed one.
func gateFor(t *testing.T, root string) string {
	t.Helper()
	p := filepath.Join(testRoots, "gate-"+filepath.Base(root))
	script := "#!/bin/sh\nexec " + filepath.Join(root, "usr/libexec/cco/sandbox-helper") + " guard prompt-gate \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
	return p
}

// TestVerifyBattery runs cco-install verify's battery through the shadow, as
// root and as a user, for a guarded agent and a jail-only one: every check
// holds, and the host's sentinels, listeners and workspace are gone after.
func TestVerifyBattery(t *testing.T) {
	root := systemRoot(t)
	gate := gateFor(t, root)
	for _, u := range []runAs{asRoot, asNobody} {
		for _, name := range []string{"claude", "codex", "pi"} {
			t.Run(u.name+"/"+name, func(t *testing.T) {
				w := newWorld(t, u)
				p, _ := agent.Lookup(name)
				tg := verify.Target{Agent: p, User: verify.User{Name: u.name, UID: u.uid, GID: u.gid, Home: w.home},
					Shadow: filepath.Join(root, "usr/local/bin", name)}
				if p.Policy != "" {
					tg.GateScript = gate
				}
				if name == "pi" {
					// A home without the directories the sentinels go in:
					// the battery makes them and takes them away again.
					os.RemoveAll(filepath.Join(w.home, ".ssh"))
					os.RemoveAll(filepath.Join(w.home, ".aws"))
				}
				b, err := verify.Run(context.Background(), tg)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]bool{}
				for _, c := range b.Checks {
					seen[c.ID] = true
					if !c.OK {
						t.Errorf("%s failed: %s (fix: %s)", c.ID, c.Detail, c.Fix)
					}
				}
				want := []string{"probe", "secrets.ssh", "secrets.aws", "secrets.other_agent", "write.workspace", "write.outside",
					"capabilities", "no_new_privs", "seccomp", "tiocsti", "tioclinux", "userns", "socket.path", "socket.abstract", "egress.refused"}
				if p.Policy != "" {
					want = append(want, "guard.inside", "guard.outside")
				}
				for _, id := range want {
					if !seen[id] {
						t.Errorf("no %s check in %+v", id, b.Checks)
					}
				}
				if b.Engine == "" || b.Kernel == "" {
					t.Errorf("engine %q, kernel %q: want both", b.Engine, b.Kernel)
				}
				if after := listing(t, w.home); strings.Contains(after, "cco-verify") {
					t.Errorf("the battery left its files in the home: %s", after)
				}
				if name == "pi" {
					for _, d := range []string{".ssh", ".aws"} {
						if _, err := os.Lstat(filepath.Join(w.home, d)); err == nil {
							t.Errorf("the battery left ~/%s it made", d)
						}
					}
				}
			})
		}
	}
}

// TestVerifyTamperedShadow: a shadow replaced by a script that runs the
// vendor binary directly fails verify on the probe, the secrets and the
// guard, each with the reinstall fix.
func TestVerifyTamperedShadow(t *testing.T) {
	root := systemRoot(t)
	gate := gateFor(t, root)
	w := newWorld(t, asRoot)
	p, _ := agent.Lookup("claude")
	fake := filepath.Join(testRoots, "tampered-claude-"+filepath.Base(w.base))
	// It runs the "vendor binary" unwrapped, on the host: a stand-in that
	// only prints, not the fake agent, whose probe writes /etc.
	vendor := filepath.Join(testRoots, "tampered-vendor-"+filepath.Base(w.base))
	if err := os.WriteFile(vendor, []byte("#!/bin/sh\necho \"vendor: $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(vendor) })
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexec "+vendor+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(fake) })
	b, err := verify.Run(context.Background(), verify.Target{Agent: p, User: verify.User{Name: "root", Home: w.home}, Shadow: fake, GateScript: gate})
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]string{}
	for _, c := range b.Checks {
		if !c.OK {
			failed[c.ID] = c.Fix
		}
	}
	for _, id := range []string{"probe", "secrets.ssh", "secrets.aws", "guard.inside"} {
		fix, ok := failed[id]
		if !ok {
			t.Errorf("%s held against a tampered shadow: %+v", id, b.Checks)
		} else if !strings.Contains(fix, "sudo cco-install") {
			t.Errorf("%s's fix %q names no reinstall", id, fix)
		}
	}
	if _, ok := failed["guard.outside"]; ok {
		t.Errorf("the guard outside the jail should still block: %+v", b.Checks)
	}
}

// listing is the home's tree, names only, for before-and-after.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var names []string
	filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			names = append(names, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	return strings.Join(names, " ")
}
