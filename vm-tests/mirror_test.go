package vmtests

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mirrorPort is where the machine serves its vendor mirror, on its own
// loopback: the machine has no other network.
const mirrorPort = "8080"

// codexTarget is the Codex build for the machine's architecture.
func codexTarget() string {
	if hostArch() == "arm64" {
		return "aarch64-unknown-linux-musl"
	}
	return "x86_64-unknown-linux-musl"
}

// codexPackage is a Codex standalone package in the vendor's layout whose
// bin/codex is the fake vendor, reporting its version and its jail.
func codexPackage(t *testing.T, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	files := []struct {
		name string
		mode int64
		body string
	}{
		{"codex-package.json", 0o644, fmt.Sprintf(`{"layoutVersion": 1, "version": %q, "target": %q, "entrypoint": "bin/codex"}`, version, codexTarget())},
		{"bin/codex", 0o755, strings.Replace(fakeVendor, "#!/bin/sh\n", "#!/bin/sh\necho \"codex version "+version+"\"\n", 1)},
		{"bin/codex-code-mode-host", 0o755, "#!/bin/sh\n"},
		{"codex-path/rg", 0o755, "#!/bin/sh\n"},
		{"codex-resources/bwrap", 0o755, "#!/bin/sh\n"},
	}
	for _, dir := range []string{"bin/", "codex-path/", "codex-resources/"} {
		// The vendor's archives carry uid/gid 1001.
		tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, Uid: 1001, Gid: 1001, ModTime: time.Unix(1700000000, 0)})
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: f.mode, Size: int64(len(f.body)), Uid: 1001, Gid: 1001, ModTime: time.Unix(1700000000, 0)}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

// publishCodex puts a release into the machine's mirror and points the
// latest channel at it.
func publishCodex(t *testing.T, m *Machine, version string) {
	t.Helper()
	dir := filepath.Join(m.Root, "/srv/mirror/codex")
	asset := "codex-package-" + codexTarget() + ".tar.gz"
	pkg := codexPackage(t, version)
	sum := sha256.Sum256(pkg)
	rel := filepath.Join(dir, "releases", version)
	if err := os.MkdirAll(rel, 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "channels"), 0o755)
	for name, body := range map[string][]byte{
		filepath.Join(rel, asset): pkg,
		// Other lines, as the vendor's file lists every target and kind.
		filepath.Join(rel, "codex-package_SHA256SUMS"): []byte(strings.Repeat("0", 64) + "  codex-package-other-target.tar.gz\n" +
			hex.EncodeToString(sum[:]) + "  " + asset + "\n"),
		filepath.Join(dir, "channels", "latest"): []byte(version + "\n"),
	} {
		if err := os.WriteFile(name, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// serveMirror starts a static file server for /srv/mirror on the
// machine's loopback and waits until it answers.
func serveMirror(t *testing.T, m *Machine) {
	t.Helper()
	must(t, m, Root, "/", nil, "sh", "-c", "python3 -m http.server "+mirrorPort+" --bind 127.0.0.1 --directory /srv/mirror >/var/log/mirror.log 2>&1 &")
	probe := "import urllib.request; urllib.request.urlopen('http://127.0.0.1:" + mirrorPort + "/codex/channels/latest', timeout=1)"
	for i := 0; ; i++ {
		if r := m.Exec(ctxT(t), Root, "/", nil, "python3", "-c", probe); r.Code == 0 {
			return
		} else if i == 50 {
			t.Fatalf("the mirror does not answer on 127.0.0.1:%s: %s", mirrorPort, r.Stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mirrorEnv points cco-install's Codex steps at the machine's mirror only.
var mirrorEnv = []string{
	"CCO_AGENTS=codex",
	"CCO_CODEX_BASE_URLS=http://127.0.0.1:" + mirrorPort + "/codex",
	"CCO_CODEX_GITHUB_BASE_URL=",
	"CCO_CODEX_GITHUB_API_URL=",
	"CCO_DOWNLOAD_RETRIES=0",
}

func installFromMirror(t *testing.T, m *Machine, args ...string) report {
	t.Helper()
	r := must(t, m, Root, "/", mirrorEnv, append([]string{"cco-install", "--json"}, args...)...)
	var rep report
	if err := decode(r.Stdout, &rep); err != nil {
		t.Fatalf("cco-install %v: %v\n%s", args, err, r.Stdout)
	}
	if rep.Failed != 0 || rep.Conflicts != 0 {
		t.Fatalf("cco-install %v: %d failed, %d conflicts:\n%s\n%s", args, rep.Failed, rep.Conflicts, r.Stdout, r.Stderr)
	}
	return rep
}

func status(rep report, id string) string {
	for _, s := range rep.Steps {
		if s.ID == id {
			return s.Status
		}
	}
	return "(absent)"
}

// The vendor journey: cco-install fetches Codex from a mirror on the
// machine's loopback, the user's codex runs the vendor in its jail, a
// second run changes nothing, --upgrade codex switches to the mirror's
// newer release, and dpkg -r leaves the system as it was.
func TestCodexFromLoopbackMirror(t *testing.T) {
	skipIfStandIn(t)
	b := packages(t)[newVersion]
	m := boot(t)
	dev, err := m.AddUser(ctxT(t), "dev")
	if err != nil {
		t.Fatal(err)
	}
	before := system(t, m)
	publishCodex(t, m, "0.50.0")
	serveMirror(t, m)
	if err := m.Put(b.Deb, "/tmp/cco.deb", 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco.deb")

	first := installFromMirror(t, m)
	if got := status(first, "vendor.codex"); got != "changed" {
		t.Fatalf("vendor.codex: %s, want changed: %+v", got, first.Steps)
	}
	codex := func(want string) {
		t.Helper()
		must(t, m, dev, dev.Home, nil, "mkdir", "-p", "work")
		r := m.Exec(ctxT(t), dev, dev.Home+"/work", nil, "codex", "--hello")
		if r.Code != 0 {
			t.Fatalf("codex as %s: exit %d\n%s%s", dev.Name, r.Code, r.Stdout, r.Stderr)
		}
		for _, w := range []string{"codex version " + want, "--hello", "NoNewPrivs:\t1", `"agent":"codex"`} {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("codex did not report %q:\n%s\nstderr:\n%s", w, r.Stdout, r.Stderr)
			}
		}
	}
	codex("0.50.0")
	if rep := installFromMirror(t, m); rep.Changed != 0 {
		t.Errorf("second run changed %d steps: %+v", rep.Changed, rep.Steps)
	}

	publishCodex(t, m, "0.51.0")
	up := installFromMirror(t, m, "--upgrade", "codex")
	if got := status(up, "vendor.codex"); got != "changed" {
		t.Errorf("--upgrade codex: vendor.codex %s, want changed: %+v", got, up.Steps)
	}
	codex("0.51.0")
	if rep := installFromMirror(t, m); rep.Changed != 0 {
		t.Errorf("after the upgrade a run changed %d steps: %+v", rep.Changed, rep.Steps)
	}

	must(t, m, Root, "/", nil, "dpkg", "-r", "cco")
	os.RemoveAll(filepath.Join(m.Root, "/srv/mirror"))
	assertClean(t, m, before)
}

// A package upgrade on a machine whose Codex came from the mirror keeps
// that Codex: the postinst refresh skips the vendor steps and must not
// take an installed vendor away; the next run against the mirror finds
// nothing to do.
func TestPackageUpgradeKeepsVendor(t *testing.T) {
	skipIfStandIn(t)
	bs := packages(t)
	m := boot(t)
	dev, err := m.AddUser(ctxT(t), "dev")
	if err != nil {
		t.Fatal(err)
	}
	publishCodex(t, m, "0.50.0")
	serveMirror(t, m)
	for v, b := range bs {
		if err := m.Put(b.Deb, "/tmp/cco-"+v+".deb", 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco-"+oldVersion+".deb")
	installFromMirror(t, m)
	must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco-"+newVersion+".deb")
	assertProvisioned(t, m, bs[newVersion])
	must(t, m, dev, dev.Home, nil, "mkdir", "-p", "work")
	r := m.Exec(ctxT(t), dev, dev.Home+"/work", nil, "codex", "--hello")
	if r.Code != 0 || !strings.Contains(r.Stdout, "codex version 0.50.0") {
		t.Fatalf("codex after the package upgrade: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if rep := installFromMirror(t, m); rep.Changed != 0 {
		t.Errorf("after the package upgrade a mirror run changed %d steps: %+v", rep.Changed, rep.Steps)
	}
}
