package vmtests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pkgrepo "github.com/cco-dev/cco/packaging/repo"
	"github.com/cco-dev/cco/packaging/signing"
)

// aptSource is the machine's only apt source: the repository under /srv/apt
// (file://), trusted for exactly the key at /usr/share/keyrings.
const aptSource = "deb [signed-by=/usr/share/keyrings/cco-archive-keyring.gpg] file:/srv/apt stable main\n"

// blockingVendor stands in for a vendor in a session that outlives the
// package upgrade: it says it started, then waits for the test's word.
const blockingVendor = `#!/bin/sh
echo started > started
while [ ! -e release ]; do sleep 0.1; done
echo "vendor $(basename "$0") survived: $(cat /run/cco/jail 2>&1)"
`

// The fleet's way in: a signed apt repository (built as mkpkg --apt-repo
// builds it), added with signed-by= its key. apt-get install cco, then the
// provisioning; a newer package in the repository, then apt-get upgrade:
// the postinst refreshes the shadow copies while a session runs, and the
// session goes on to its end. auto_upgrade turns the timer on and off.
// The same repository re-signed with another key is refused.
func TestAptRepositoryInstallUpgrade(t *testing.T) {
	bs := packages(t)
	old, cur := bs[oldVersion], bs[newVersion]
	key, err := signing.Generate("cco vm-tests repository key", "repo@cco-dev.invalid")
	if err != nil {
		t.Fatal(err)
	}
	m := boot(t)
	dir := filepath.Join(m.Root, "/srv/apt")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := pkgrepo.Apt(ctx, dir, []string{old.Deb}, key, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(filepath.Join(dir, pkgrepo.Keyring), "/usr/share/keyrings/cco-archive-keyring.gpg", 0o644); err != nil {
		t.Fatal(err)
	}
	// The machine has no network: Debian's own sources would only fail.
	os.Remove(filepath.Join(m.Root, "/etc/apt/sources.list"))
	os.Remove(filepath.Join(m.Root, "/etc/apt/sources.list.d/debian.sources"))
	if err := os.WriteFile(filepath.Join(m.Root, "/etc/apt/sources.list.d/cco.list"), []byte(aptSource), 0o644); err != nil {
		t.Fatal(err)
	}
	apt := []string{"DEBIAN_FRONTEND=noninteractive"}
	must(t, m, Root, "/", apt, "apt-get", "update")
	must(t, m, Root, "/", apt, "apt-get", "install", "-y", "cco")
	if got := must(t, m, Root, "/", nil, "dpkg-query", "-W", "-f", "${Version}", "cco").Stdout; got != oldVersion {
		t.Fatalf("apt-get install cco installed %q, want %s", got, oldVersion)
	}
	ccoInstall(t, m)
	assertProvisioned(t, m, old)

	// A live session across the upgrade (where the shadow compiled).
	var session chan Result
	if len(standIns) == 0 {
		dev, err := m.AddUser(ctxT(t), "dev")
		if err != nil {
			t.Fatal(err)
		}
		putVendors(t, m, blockingVendor)
		must(t, m, dev, dev.Home, nil, "mkdir", "-p", "work")
		session = make(chan Result, 1)
		go func() { session <- m.Exec(ctx, dev, dev.Home+"/work", nil, "codex", "--session") }()
		for i := 0; read(t, m, "/home/dev/work/started") == nil; i++ {
			if i == 300 {
				t.Fatal("the session did not start in 30s")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if err := pkgrepo.Apt(ctx, dir, []string{cur.Deb}, key, nil); err != nil {
		t.Fatal(err)
	}
	must(t, m, Root, "/", apt, "apt-get", "update")
	r := must(t, m, Root, "/", apt, "apt-get", "upgrade", "-y")
	if !strings.Contains(r.Stdout+r.Stderr, "refreshing the installed shadow") {
		t.Errorf("the upgrade's postinst did not refresh:\n%s%s", r.Stdout, r.Stderr)
	}
	if got := must(t, m, Root, "/", nil, "dpkg-query", "-W", "-f", "${Version}", "cco").Stdout; got != newVersion {
		t.Errorf("after apt-get upgrade cco is %q, want %s", got, newVersion)
	}
	assertProvisioned(t, m, cur)
	t.Run("live session survives", func(t *testing.T) {
		skipIfStandIn(t)
		if err := os.WriteFile(filepath.Join(m.Root, "/home/dev/work/release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var res Result
		select {
		case res = <-session:
		case <-time.After(time.Minute):
			t.Fatal("the session did not end a minute after its release")
		}
		if res.Code != 0 || !strings.Contains(res.Stdout, "vendor codex survived") {
			t.Errorf("the session across the upgrade: exit %d\n%s\n%s", res.Code, res.Stdout, res.Stderr)
		}
	})

	t.Run("auto_upgrade", func(t *testing.T) {
		const link = "/etc/systemd/system/timers.target.wants/cco-upgrade.timer"
		for _, unit := range []string{"cco-upgrade.service", "cco-upgrade.timer"} {
			if read(t, m, "/usr/lib/systemd/system/"+unit) == nil {
				t.Errorf("the package did not install /usr/lib/systemd/system/%s", unit)
			}
		}
		if _, err := os.Lstat(filepath.Join(m.Root, link)); err == nil {
			t.Fatal("the timer is enabled before auto_upgrade = true")
		}
		if err := os.WriteFile(filepath.Join(m.Root, "/etc/cco/install.toml"), []byte("auto_upgrade = true\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if rep := ccoInstall(t, m); status(rep, "autoupgrade.timer") != "changed" {
			t.Errorf("auto_upgrade = true: the step is %q", status(rep, "autoupgrade.timer"))
		}
		if l, err := os.Readlink(filepath.Join(m.Root, link)); err != nil || l != "/usr/lib/systemd/system/cco-upgrade.timer" {
			t.Errorf("%s: %q %v", link, l, err)
		}
		must(t, m, Root, "/", offline, "cco-install", "status", "--verify")
		if err := os.WriteFile(filepath.Join(m.Root, "/etc/cco/install.toml"), []byte("auto_upgrade = false\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ccoInstall(t, m)
		if _, err := os.Lstat(filepath.Join(m.Root, link)); err == nil {
			t.Error("auto_upgrade = false left the timer enabled")
		}
		if err := os.WriteFile(filepath.Join(m.Root, "/etc/cco/install.toml"), []byte("auto_upgrade = true\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ccoInstall(t, m)
		must(t, m, Root, "/", apt, "apt-get", "remove", "-y", "cco")
		if _, err := os.Lstat(filepath.Join(m.Root, link)); err == nil {
			t.Error("removing the package left the timer enabled")
		}
		assertNotProvisioned(t, m)
	})

	t.Run("another key is refused", func(t *testing.T) {
		other, err := signing.Generate("not the fleet's key", "other@cco-dev.invalid")
		if err != nil {
			t.Fatal(err)
		}
		if err := pkgrepo.Apt(ctx, dir, nil, other, nil); err != nil {
			t.Fatal(err)
		}
		// No index from before: what apt knows now is only what it accepted.
		must(t, m, Root, "/", nil, "sh", "-c", "rm -rf /var/lib/apt/lists/*")
		r := m.Exec(ctxT(t), Root, "/", apt, "apt-get", "update")
		if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "NO_PUBKEY") || !strings.Contains(r.Stdout+r.Stderr, "is not signed") {
			t.Errorf("apt-get update of a repository signed by another key: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		if r := m.Exec(ctxT(t), Root, "/", apt, "apt-get", "install", "-y", "cco"); r.Code == 0 {
			t.Errorf("apt-get install cco from a repository signed by another key succeeded:\n%s%s", r.Stdout, r.Stderr)
		}
	})
}
