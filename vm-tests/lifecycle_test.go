package vmtests

import (
	"strings"
	"testing"
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
