package vmtests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
)

// A fresh machine: dpkg -i, cco-install, a second run that changes nothing,
// the agents from a workspace as a normal user, dpkg -r leaving the system
// as it was (the preremove script undoes the installation).
func TestInstallProvisionRemove(t *testing.T) {
	b := packages(t)[newVersion]
	m := boot(t)
	dev, err := m.AddUser(ctxT(t), "dev")
	if err != nil {
		t.Fatal(err)
	}
	before := system(t, m)
	if err := m.Put(b.Deb, "/tmp/cco.deb", 0o644); err != nil {
		t.Fatal(err)
	}

	r := must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco.deb")
	if !strings.Contains(r.Stdout+r.Stderr, "run: sudo cco-install") {
		t.Errorf("postinst did not print the next command:\n%s%s", r.Stdout, r.Stderr)
	}
	if got := must(t, m, Root, "/", nil, "cco-install", "version").Stdout; got != "cco-install "+newVersion+"\n" {
		t.Errorf("cco-install version: %q", got)
	}
	assertNotProvisioned(t, m) // installing the package provisions nothing

	first := ccoInstall(t, m)
	if first.Changed == 0 {
		t.Fatalf("first run changed nothing: %+v", first)
	}
	assertProvisioned(t, m, b)
	second := ccoInstall(t, m)
	if second.Changed != 0 {
		t.Errorf("second run changed %d steps: %+v", second.Changed, second.Steps)
	}
	must(t, m, Root, "/", offline, "cco-install", "status", "--verify")

	t.Run("agents as a user", func(t *testing.T) {
		skipIfStandIn(t)
		putFakeVendors(t, m)
		must(t, m, dev, dev.Home, nil, "mkdir", "-p", "work")
		for _, name := range []string{"claude", "codex"} {
			r := m.Exec(ctxT(t), dev, dev.Home+"/work", nil, name, "--hello")
			if r.Code != 0 {
				t.Errorf("%s as %s: exit %d\n%s%s", name, dev.Name, r.Code, r.Stdout, r.Stderr)
				continue
			}
			for _, want := range []string{"vendor " + name, "--hello", "NoNewPrivs:\t1", "CapEff:\t0000000000000000", `"agent":"` + name + `"`, `"workspace":"` + dev.Home + `/work"`} {
				if !strings.Contains(r.Stdout, want) {
					t.Errorf("%s did not report %q from inside its jail:\n%s\nstderr:\n%s", name, want, r.Stdout, r.Stderr)
				}
			}
		}
	})

	t.Run("verify", func(t *testing.T) {
		skipIfStandIn(t)
		putFakeVendors(t, m)
		verifyHolds(t, m, Root, "/", "verify", "--json")
		verifyHolds(t, m, Root, "/", "verify", "--json", "--user", dev.Name)
		verifyHolds(t, m, dev, dev.Home, "verify", "--json", "--agent", "codex")
		st := decodeStatus(t, must(t, m, Root, "/", offline, "cco-install", "status", "--json").Stdout)
		if st.JailVerified == nil || !st.JailVerified.OK || len(st.JailVerified.Changed) != 0 {
			t.Errorf("status after verify: jail_verified %+v", st.JailVerified)
		}

	})

	must(t, m, Root, "/", nil, "dpkg", "-r", "cco")
	assertNotProvisioned(t, m)
	for _, p := range []string{"/usr/bin/cco-install", "/usr/lib/cco/shadow", "/usr/lib/cco/egress-proxy"} {
		if read(t, m, p) != nil {
			t.Errorf("%s is still there after dpkg -r", p)
		}
	}
	assertClean(t, m, before)
}

// cco-install --uninstall on its own leaves the system clean; dpkg -r after
// it has nothing left to undo and still succeeds.
func TestUninstallThenRemove(t *testing.T) {
	b := packages(t)[newVersion]
	m := boot(t)
	before := system(t, m)
	if err := m.Put(b.Deb, "/tmp/cco.deb", 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco.deb")
	ccoInstall(t, m)
	assertProvisioned(t, m, b)
	ccoInstall(t, m, "--uninstall", "--yes")
	assertNotProvisioned(t, m)
	must(t, m, Root, "/", nil, "dpkg", "-r", "cco")
	assertClean(t, m, before)
}

// An upgrade from the previous build refreshes the installed shadow from
// the new package, offline, and leaves nothing for a next run to do.
func TestUpgradeRefreshesShadow(t *testing.T) {
	bs := packages(t)
	old, cur := bs[oldVersion], bs[newVersion]
	if string(old.Shadow) == string(cur.Shadow) {
		t.Fatal("the two builds have the same shadow: the upgrade would prove nothing")
	}
	m := boot(t)
	before := system(t, m)
	for v, b := range bs {
		if err := m.Put(b.Deb, "/tmp/cco-"+v+".deb", 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco-"+oldVersion+".deb")
	ccoInstall(t, m)
	assertProvisioned(t, m, old)

	r := must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco-"+newVersion+".deb")
	if !strings.Contains(r.Stdout+r.Stderr, "refreshing the installed shadow") {
		t.Errorf("postinst did not refresh:\n%s%s", r.Stdout, r.Stderr)
	}
	if got := must(t, m, Root, "/", nil, "dpkg-query", "-W", "-f", "${Version}", "cco").Stdout; got != newVersion {
		t.Errorf("installed version %q", got)
	}
	assertProvisioned(t, m, cur)
	if rep := ccoInstall(t, m); rep.Changed != 0 {
		t.Errorf("after the upgrade a run still changed %d steps: %+v", rep.Changed, rep.Steps)
	}
	must(t, m, Root, "/", nil, "dpkg", "-r", "cco")
	assertNotProvisioned(t, m)
	assertClean(t, m, before)
}

// A tampered shadow (a script that runs the vendor binary directly) fails
// verify on the probe, the secrets and the guard, with the fix that puts it
// back; applied as printed, verify holds again, and status tells a verdict
// taken before a sandbox.toml edit from one taken after.
func TestVerifyTamperedShadow(t *testing.T) {
	skipIfStandIn(t)
	b := packages(t)[newVersion]
	m := boot(t)
	if err := m.Put(b.Deb, "/tmp/cco.deb", 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco.deb")
	ccoInstall(t, m)
	putFakeVendors(t, m)
	verifyHolds(t, m, Root, "/", "verify", "--json")
	// A shadow that runs the vendor binary directly fails on the
	// secrets and the guard, and names the reinstall.
	claude, _ := agent.Lookup("claude")
	src := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(src, []byte("#!/bin/sh\nexec "+claude.Binary+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A new file, not a write through the installed one: the shadow's
	// names may share its inode.
	os.Remove(filepath.Join(m.Root, "usr/local/bin/claude"))
	if err := m.Put(src, "/usr/local/bin/claude", 0o755); err != nil {
		t.Fatal(err)
	}
	r := m.Exec(ctxT(t), Root, "/", offline, "cco-install", "verify", "--json", "--agent", "claude")
	var doc verifyDoc
	if err := decode(r.Stdout, &doc); err != nil || r.Code != 3 || doc.OK {
		t.Fatalf("verify with a tampered shadow: exit %d, %v\n%s%s", r.Code, err, r.Stdout, r.Stderr)
	}
	for _, id := range []string{"claude:probe", "claude:secrets.ssh", "claude:guard.inside"} {
		if !strings.Contains(strings.Join(doc.Failed, " "), id) {
			t.Errorf("%s did not fail against a tampered shadow: %v", id, doc.Failed)
		}
	}
	if !strings.Contains(r.Stdout, "sudo cco-install --force") {
		t.Errorf("no fix that replaces the edited shadow named:\n%s", r.Stdout)
	}
	st := decodeStatus(t, m.Exec(ctxT(t), Root, "/", offline, "cco-install", "status", "--json").Stdout)
	if st.JailVerified == nil || st.JailVerified.OK || !strings.Contains(strings.Join(st.JailVerified.Failed, " "), "claude:probe") {
		t.Errorf("status after the failed verify: jail_verified %+v", st.JailVerified)
	}
	// The fix as printed, then verify again: it holds, and status
	// says the kept verdict is of this shadow.
	ccoInstall(t, m, "--force")
	verifyHolds(t, m, Root, "/", "verify", "--json")
	if err := os.WriteFile(filepath.Join(m.Root, "/etc/cco/sandbox.toml"), append(read(t, m, "/etc/cco/sandbox.toml"), "\n# edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	st = decodeStatus(t, m.Exec(ctxT(t), Root, "/", offline, "cco-install", "status", "--json").Stdout)
	if st.JailVerified == nil || !st.JailVerified.OK || strings.Join(st.JailVerified.Changed, " ") != "sandbox.toml" {
		t.Errorf("status after editing sandbox.toml: jail_verified %+v, want changed [sandbox.toml]", st.JailVerified)
	}
}

// verifyDoc is the part of cco-install verify --json the scenarios read.
type verifyDoc struct {
	OK     bool     `json:"ok"`
	Engine string   `json:"engine"`
	Failed []string `json:"failed"`
	Checks []struct {
		Agent, ID, Detail string
		OK                bool
	} `json:"checks"`
}

type statusJailDoc struct {
	JailVerified *struct {
		OK      bool     `json:"ok"`
		Failed  []string `json:"failed"`
		Changed []string `json:"changed"`
	} `json:"jail_verified"`
}

func decodeStatus(t *testing.T, out string) statusJailDoc {
	t.Helper()
	var st statusJailDoc
	if err := decode(out, &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

// verifyHolds runs cco-install verify as u and wants every check to hold.
func verifyHolds(t *testing.T, m *Machine, u User, dir string, args ...string) {
	t.Helper()
	r := m.Exec(ctxT(t), u, dir, offline, append([]string{"cco-install"}, args...)...)
	var doc verifyDoc
	if err := decode(r.Stdout, &doc); err != nil || r.Code != 0 || !doc.OK || len(doc.Checks) == 0 {
		t.Fatalf("cco-install %v as %s: exit %d, %v\n%s\nstderr:\n%s", args, u.Name, r.Code, err, r.Stdout, r.Stderr)
	}
}
