package repo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/packaging/release"
	"github.com/cco-dev/cco/packaging/signing"
)

// need fails (or, outside the shipping run, skips) without a tool.
func need(t *testing.T, tool, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		why := tool + " is not installed (apt-get install " + pkg + ")"
		if os.Getenv("CCO_VM_TESTS") != "1" {
			t.Skip(why + "; scripts/test.sh installs it and reruns this with CCO_VM_TESTS=1")
		}
		testenv.Missing(t, why)
	}
}

// build makes version's packages from stand-in binaries.
func build(t *testing.T, version string) map[string]string {
	t.Helper()
	f, err := release.Load("../../goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pre := map[string]string{}
	for _, id := range []string{"cco-install", "shadow", "egress-proxy"} {
		p := filepath.Join(dir, id)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		pre[id] = p
	}
	o := &release.Options{Repo: "../..", Dist: filepath.Join(dir, "dist"), Version: version, Arches: []string{"amd64"}, Epoch: time.Unix(1700000000, 0), Prebuilt: pre}
	if _, err := release.BuildBinaries(context.Background(), f, o); err != nil {
		t.Fatal(err)
	}
	arts, err := release.Packages(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range arts {
		out[a.Kind] = a.Path
	}
	return out
}

func newKey(t *testing.T) *signing.Key {
	t.Helper()
	k, err := signing.Generate("cco test repository key", "repo@cco-dev.invalid")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// gpgv is apt's own verifier: the repository's Release must verify with
// the published keyring, in both signed forms, and not with another key.
func TestAptRepository(t *testing.T) {
	need(t, "apt-ftparchive", "apt-utils")
	need(t, "gpgv", "gpgv")
	key, other := newKey(t), newKey(t)
	dir := t.TempDir()
	for _, v := range []string{"0.1.0", "0.2.0"} {
		if err := Apt(context.Background(), dir, []string{build(t, v)["deb"]}, key, nil); err != nil {
			t.Fatal(err)
		}
	}
	dists := filepath.Join(dir, "dists", Suite)
	packages, err := os.ReadFile(filepath.Join(dists, "main", "binary-amd64", "Packages"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Package: cco\n", "Version: 0.1.0\n", "Version: 0.2.0\n", "Filename: pool/main/c/cco/cco_0.2.0_amd64.deb\n", "SHA256: "} {
		if !strings.Contains(string(packages), want) {
			t.Errorf("Packages lacks %q:\n%s", want, packages)
		}
	}
	release, err := os.ReadFile(filepath.Join(dists, "Release"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Suite: stable\n", "Codename: stable\n", "Architectures: amd64\n", "Components: main\n", " main/binary-amd64/Packages.gz\n", "SHA256:\n"} {
		if !strings.Contains(string(release), want) {
			t.Errorf("Release lacks %q:\n%s", want, release)
		}
	}
	otherRing := filepath.Join(t.TempDir(), "other.gpg")
	b, _ := other.PublicKey(false)
	os.WriteFile(otherRing, b, 0o644)
	for _, args := range [][]string{{"InRelease"}, {"Release.gpg", "Release"}} {
		cmd := exec.Command("gpgv", append([]string{"--keyring", filepath.Join(dir, Keyring)}, args...)...)
		cmd.Dir = dists
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("gpgv %v with the repository's keyring: %v\n%s", args, err, out)
		}
		cmd = exec.Command("gpgv", append([]string{"--keyring", otherRing}, args...)...)
		cmd.Dir = dists
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("gpgv %v verified with a key that did not sign:\n%s", args, out)
		}
	}
}

// The rpm repository: createrepo_c's metadata lists the package, and its
// repomd.xml carries a signature by the key published beside it.
func TestRPMRepository(t *testing.T) {
	need(t, "createrepo_c", "createrepo-c")
	key := newKey(t)
	dir := t.TempDir()
	if err := RPM(context.Background(), dir, []string{build(t, "0.2.0")["rpm"]}, key, nil); err != nil {
		t.Fatal(err)
	}
	repomd, err := os.ReadFile(filepath.Join(dir, "repodata", "repomd.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(repomd), "primary") {
		t.Errorf("repomd.xml names no primary metadata:\n%s", repomd)
	}
	sig, _ := os.ReadFile(filepath.Join(dir, "repodata", "repomd.xml.asc"))
	pub, _ := os.ReadFile(filepath.Join(dir, RPMKey))
	if err := signing.Verify(pub, repomd, sig); err != nil {
		t.Errorf("repomd.xml.asc does not verify with %s: %v", RPMKey, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cco-0.2.0-1.x86_64.rpm")); err != nil {
		t.Error(err)
	}
}

// Without createrepo_c the error says what to install.
func TestRPMRepositoryNeedsCreaterepo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := RPM(context.Background(), t.TempDir(), nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "apt-get install createrepo-c") {
		t.Errorf("without createrepo_c: %v", err)
	}
}
