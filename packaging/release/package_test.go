package release

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

// standIns writes small files in place of the binaries: packaging is about
// where bytes go, not what they are.
func standIns(t *testing.T) map[string]string {
	dir := t.TempDir()
	m := map[string]string{}
	for _, id := range []string{"cco-install", "shadow", "egress-proxy"} {
		p := filepath.Join(dir, id)
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+id+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		m[id] = p
	}
	return m
}

func buildAll(t *testing.T, version string, epoch time.Time) map[string]Artifact {
	t.Helper()
	f, err := Load("../../goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{Repo: "../..", Dist: t.TempDir(), Version: version, Arches: []string{"amd64"}, Epoch: epoch, Prebuilt: standIns(t)}
	if _, err := BuildBinaries(context.Background(), f, o); err != nil {
		t.Fatal(err)
	}
	arts, err := Packages(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]Artifact{}
	for _, a := range arts {
		m[a.Kind] = a
	}
	for _, k := range []string{"deb", "rpm", "checksum"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("no %s among %v", k, arts)
		}
	}
	return m
}

func TestPackagesAreReproducible(t *testing.T) {
	epoch := time.Unix(1700000000, 0)
	a, b := buildAll(t, "0.1.0", epoch), buildAll(t, "0.1.0", epoch)
	for _, k := range []string{"deb", "rpm"} {
		if a[k].SHA256 != b[k].SHA256 {
			t.Errorf("%s differs between two builds of the same input: %s vs %s", k, a[k].SHA256, b[k].SHA256)
		}
	}
	c := buildAll(t, "0.1.0", epoch.Add(time.Hour))
	for _, k := range []string{"deb", "rpm"} {
		if a[k].SHA256 == c[k].SHA256 {
			t.Errorf("%s ignores the epoch", k)
		}
	}
	sums, err := os.ReadFile(a["checksum"].Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"deb", "rpm"} {
		line := a[k].SHA256 + "  " + filepath.Base(a[k].Path)
		if !strings.Contains(string(sums), line) {
			t.Errorf("checksums.txt lacks %q:\n%s", line, sums)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		why := name + " is not installed (apt-get install " + map[string]string{"dpkg-deb": "dpkg", "rpm": "rpm"}[name] + ")"
		if os.Getenv("CCO_VM_TESTS") != "1" {
			// The shipping block at the end of scripts/test.sh installs
			// it and runs these again with CCO_VM_TESTS=1, where a
			// missing tool fails.
			t.Skip(why + "; scripts/test.sh installs it and reruns this with CCO_VM_TESTS=1")
		}
		testenv.Missing(t, why)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func TestDebLayout(t *testing.T) {
	m := buildAll(t, "0.2.0", time.Unix(1700000000, 0))
	deb := m["deb"].Path
	if filepath.Base(deb) != "cco_0.2.0_amd64.deb" {
		t.Errorf("file name %s", filepath.Base(deb))
	}
	if got := run(t, "dpkg-deb", "--field", deb, "Package", "Version", "Architecture", "Depends"); got != "Package: cco\nVersion: 0.2.0\nArchitecture: amd64\nDepends: bubblewrap\n" {
		t.Errorf("control fields:\n%s", got)
	}
	list := run(t, "dpkg-deb", "--contents", deb)
	for _, want := range []string{"-rwxr-xr-x root/root", "./usr/bin/cco-install", "./usr/lib/cco/shadow", "./usr/lib/cco/egress-proxy", "2023-11-14 22:13",
		// The man pages, completion where each shell looks (Debian's zsh
		// in vendor-completions), and the copyright file.
		"./usr/share/man/man8/cco-install.8", "./usr/share/man/man8/cco-install-status.8",
		"./usr/share/bash-completion/completions/cco-install", "./usr/share/zsh/vendor-completions/_cco-install",
		"./usr/share/fish/vendor_completions.d/cco-install.fish", "./usr/share/doc/cco/copyright"} {
		if !strings.Contains(list, want) {
			t.Errorf("contents lack %q:\n%s", want, list)
		}
	}
	for _, p := range []string{"./usr/lib/cco/shadow", "./usr/lib/cco/egress-proxy"} {
		if !regexp.MustCompile(`(?m)^-rwxr-xr-x root/root .* \Q` + p + `\E$`).MatchString(list) {
			t.Errorf("%s is not -rwxr-xr-x root/root:\n%s", p, list)
		}
	}
	for _, p := range []string{"./usr/bin/shadow", "./usr/bin/egress-proxy"} {
		if strings.Contains(list, p) {
			t.Errorf("%s: the shadow and the egress proxy must not be on PATH:\n%s", p, list)
		}
	}
	if strings.Contains(list, "site-functions") {
		t.Errorf("the deb carries the rpm's zsh place:\n%s", list)
	}
	// The description names every agent of the agent table.
	desc := run(t, "dpkg-deb", "--field", deb, "Description")
	for _, name := range agent.Names() {
		if !regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(name) + `\b`).MatchString(desc) {
			t.Errorf("the package description does not name the agent %s (goreleaser.yaml, nfpms description):\n%s", name, desc)
		}
	}
	ctl := t.TempDir()
	run(t, "dpkg-deb", "--control", deb, ctl)
	for script, src := range map[string]string{"postinst": "../postinstall.sh", "prerm": "../preremove.sh"} {
		got, err := os.ReadFile(filepath.Join(ctl, script))
		if err != nil {
			t.Fatalf("no %s in the deb: %v", script, err)
		}
		want, _ := os.ReadFile(src)
		if string(got) != string(want) {
			t.Errorf("%s is not %s", script, src)
		}
	}
}

func TestRPMLayout(t *testing.T) {
	m := buildAll(t, "0.2.0", time.Unix(1700000000, 0))
	rpm := m["rpm"].Path
	if filepath.Base(rpm) != "cco-0.2.0-1.x86_64.rpm" {
		t.Errorf("file name %s", filepath.Base(rpm))
	}
	if got := run(t, "rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{ARCH} %{BUILDHOST} %{BUILDTIME}\n", rpm); got != "cco 0.2.0 x86_64 cco-release 1700000000\n" {
		t.Errorf("header: %q", got)
	}
	// The man pages are one per command: all of them, and cco-install(8).
	var files, man []string
	for _, l := range strings.Split(strings.TrimSpace(run(t, "rpm", "-qpl", rpm)), "\n") {
		if strings.HasPrefix(l, "/usr/share/man/man8/cco-install") && strings.HasSuffix(l, ".8") {
			man = append(man, l)
			continue
		}
		files = append(files, l)
	}
	want := []string{"/usr/bin/cco-install", "/usr/lib/cco/egress-proxy", "/usr/lib/cco/shadow",
		"/usr/lib/systemd/system/cco-upgrade.service", "/usr/lib/systemd/system/cco-upgrade.timer",
		"/usr/share/bash-completion/completions/cco-install", "/usr/share/doc/cco/README", "/usr/share/doc/cco/copyright",
		"/usr/share/fish/vendor_completions.d/cco-install.fish", "/usr/share/zsh/site-functions/_cco-install"}
	if strings.Join(files, "\n") != strings.Join(want, "\n") {
		t.Errorf("files:\n%s\nwant (besides the man pages):\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Contains(man, "/usr/share/man/man8/cco-install.8") || !slices.Contains(man, "/usr/share/man/man8/cco-install-status.8") {
		t.Errorf("the man pages: %v", man)
	}
	if got := run(t, "rpm", "-qp", "--requires", rpm); !strings.HasPrefix(got, "bubblewrap\n") {
		t.Errorf("requires:\n%s", got)
	}
	scripts := run(t, "rpm", "-qp", "--scripts", rpm)
	for _, want := range []string{"postinstall scriptlet", "cco package postinstall", "preuninstall scriptlet", "cco package preremove"} {
		if !strings.Contains(scripts, want) {
			t.Errorf("scripts lack %q:\n%s", want, scripts)
		}
	}
}
