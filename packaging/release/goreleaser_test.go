package release

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSameAsGoreleaser is the optional parity check: with CCO_GORELEASER
// naming a goreleaser v2 binary, it runs a snapshot release of a copy of
// this checkout and requires mkpkg, given goreleaser's own binaries and
// version, to produce a byte-identical deb and an rpm with the same header
// fields, files (rpm --dump: path, size, mtime, digest, mode, owner),
// requirements and scripts. (The rpm's bytes differ when goreleaser links
// another nfpm release, whose rpm writer encodes the header differently.)
// goreleaser
// cannot be fetched offline in every CI (its latest release needs a newer
// Go), so this runs only where it is provided; see docs/parts/shipping.md.
func TestSameAsGoreleaser(t *testing.T) {
	gr := os.Getenv("CCO_GORELEASER")
	if gr == "" {
		t.Skip("optional: set CCO_GORELEASER=/path/to/goreleaser to compare with goreleaser's own packages")
	}
	work := filepath.Join(t.TempDir(), "src")
	if out, err := exec.Command("cp", "-a", "../..", work).CombinedOutput(); err != nil {
		t.Fatalf("copying the checkout: %v\n%s", err, out)
	}
	os.RemoveAll(filepath.Join(work, "dist"))
	cmd := exec.Command(gr, "release", "--snapshot", "--clean", "--skip=publish", "-f", "goreleaser.yaml")
	cmd.Dir = work
	// A remote, so goreleaser's git state (CommitDate) is complete.
	if out, err := exec.Command("git", "-C", work, "remote", "add", "cco-parity", "https://github.com/cco-dev/cco.git").CombinedOutput(); err != nil {
		t.Fatalf("git remote add in the copy: %v\n%s", err, out)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser: %v\n%s", err, out)
	}
	grDist := filepath.Join(work, "dist")
	meta, err := os.ReadFile(filepath.Join(grDist, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var md struct{ Version string }
	if err := json.Unmarshal(meta, &md); err != nil || md.Version == "" {
		t.Fatalf("goreleaser's metadata.json: %v\n%s", err, meta)
	}
	f, err := Load(filepath.Join(work, "goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := Epoch(work)
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{Repo: work, Dist: t.TempDir(), Version: md.Version, Epoch: epoch,
		Prebuilt: map[string]string{}}
	for _, arch := range []string{"amd64", "arm64"} {
		o.Arches = []string{arch}
		for _, b := range f.Builds {
			o.Prebuilt[b.ID] = filepath.Join(grDist, b.ID+"_linux_"+arch+distSuffix[arch], b.Binary)
		}
		if _, err := BuildBinaries(context.Background(), f, o); err != nil {
			t.Fatal(err)
		}
		arts, err := Packages(context.Background(), f, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range arts {
			if a.Kind != "deb" && a.Kind != "rpm" {
				continue
			}
			theirs := filepath.Join(grDist, filepath.Base(a.Path))
			sum, err := fileSHA256(theirs)
			if err != nil {
				t.Errorf("goreleaser made no %s: %v", filepath.Base(a.Path), err)
				continue
			}
			if a.Kind == "deb" {
				if sum != a.SHA256 {
					t.Errorf("%s: mkpkg's differs from goreleaser's (compare dpkg-deb -I and -c of %s and %s)", filepath.Base(a.Path), a.Path, theirs)
				}
				continue
			}
			for _, q := range [][]string{{"--dump"}, {"--scripts"}, {"--requires"},
				{"--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{BUILDHOST} %{BUILDTIME} %{LICENSE} %{URL} %{VENDOR} %{PACKAGER} %{SUMMARY}\n"}} {
				mine := rpmlibFree(run(t, "rpm", append(append([]string{"-qp"}, q...), a.Path)...))
				their := rpmlibFree(run(t, "rpm", append(append([]string{"-qp"}, q...), theirs)...))
				if mine != their {
					t.Errorf("%s: rpm -qp %s differs:\nmkpkg:\n%s\ngoreleaser:\n%s", filepath.Base(a.Path), q[0], mine, their)
				}
			}
		}
	}
}

// rpmlibFree drops rpmlib(...) lines: rpm's own feature markers, which
// depend on the nfpm release, not on the package.
func rpmlibFree(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "rpmlib(") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
