// Package repo publishes cco's packages as signed package repositories a
// fleet can host on any static web server (or a file:// path): an apt
// repository made by apt-utils' apt-ftparchive and an rpm repository made
// by createrepo_c, the distributions' own tools, each signed with the
// release key. Publishing into an existing repository keeps the packages
// already in its pool, so a newer version sits beside the older ones and
// apt-get upgrade (or dnf upgrade) finds it.
//
// The apt layout, with Suite and Codename "stable" and one component:
//
//	DIR/cco-archive-keyring.gpg              the public key (signed-by=)
//	DIR/cco-archive-keyring.asc              the same, armored
//	DIR/pool/main/c/cco/cco_V_ARCH.deb
//	DIR/dists/stable/Release                 hashes of the indexes
//	DIR/dists/stable/InRelease               Release, clear-signed
//	DIR/dists/stable/Release.gpg             Release's detached signature
//	DIR/dists/stable/main/binary-ARCH/Packages{,.gz}
//
// The rpm layout: DIR/*.rpm, DIR/repodata/ (createrepo_c), its
// DIR/repodata/repomd.xml.asc (for repo_gpgcheck) and DIR/RPM-GPG-KEY-cco.
package repo

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cco-dev/cco/packaging/signing"
)

// Suite is the apt suite (and codename) the repository publishes.
const Suite = "stable"

// Component is the apt repository's one component.
const Component = "main"

// Keyring is the binary public key's file name at the repository's top.
const Keyring = "cco-archive-keyring.gpg"

// RPMKey is the armored public key's file name in an rpm repository.
const RPMKey = "RPM-GPG-KEY-cco"

// Apt publishes debs into the apt repository at dir, creating it if need be,
// and signs its Release.
func Apt(ctx context.Context, dir string, debs []string, key *signing.Key, log io.Writer) error {
	for _, tool := range []string{"apt-ftparchive", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("building the apt repository %s needs %s: apt-get install apt-utils dpkg", dir, tool)
		}
	}
	pool := filepath.Join(dir, "pool", Component)
	for _, deb := range debs {
		name, err := field(ctx, deb, "Package")
		if err != nil {
			return err
		}
		dst := filepath.Join(pool, name[:1], name, filepath.Base(deb))
		if err := copyFile(deb, dst); err != nil {
			return err
		}
		logf(log, "apt repository: %s", dst)
	}
	arches, err := poolArches(ctx, pool)
	if err != nil {
		return err
	}
	dists := filepath.Join(dir, "dists", Suite)
	for _, arch := range arches {
		packages, err := output(ctx, dir, "apt-ftparchive", "--arch", arch, "packages", filepath.Join("pool", Component))
		if err != nil {
			return err
		}
		d := filepath.Join(dists, Component, "binary-"+arch)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "Packages"), packages, 0o644); err != nil {
			return err
		}
		if err := writeGzip(filepath.Join(d, "Packages.gz"), packages); err != nil {
			return err
		}
	}
	// The old signed files go first: apt-ftparchive would hash them too.
	for _, f := range []string{"Release", "InRelease", "Release.gpg"} {
		if err := os.Remove(filepath.Join(dists, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	conf := "APT::FTPArchive::Release::"
	release, err := output(ctx, dists, "apt-ftparchive",
		"-o", conf+"Origin=cco", "-o", conf+"Label=cco", "-o", conf+"Suite="+Suite, "-o", conf+"Codename="+Suite,
		"-o", conf+"Architectures="+strings.Join(arches, " "), "-o", conf+"Components="+Component,
		"-o", conf+"Description=cco packages", "release", ".")
	if err != nil {
		return err
	}
	inRelease, err := key.ClearSign(release)
	if err != nil {
		return err
	}
	sig, err := key.DetachSign(release)
	if err != nil {
		return err
	}
	pub, err := key.PublicKey(false)
	if err != nil {
		return err
	}
	armored, err := key.PublicKey(true)
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		filepath.Join(dists, "Release"): release, filepath.Join(dists, "InRelease"): inRelease,
		filepath.Join(dists, "Release.gpg"): sig, filepath.Join(dir, Keyring): pub,
		filepath.Join(dir, strings.TrimSuffix(Keyring, ".gpg")+".asc"): armored,
	} {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			return err
		}
	}
	logf(log, "apt repository: %s signed by %s (%s)", dists, key.Fingerprint(), strings.Join(arches, " "))
	return nil
}

// RPM publishes rpms into the rpm repository at dir with createrepo_c and
// signs its repomd.xml.
func RPM(ctx context.Context, dir string, rpms []string, key *signing.Key, log io.Writer) error {
	if _, err := exec.LookPath("createrepo_c"); err != nil {
		return fmt.Errorf("building the rpm repository %s needs createrepo_c, which is not installed: apt-get install createrepo-c (or dnf install createrepo_c)", dir)
	}
	for _, p := range rpms {
		if err := copyFile(p, filepath.Join(dir, filepath.Base(p))); err != nil {
			return err
		}
	}
	if _, err := output(ctx, dir, "createrepo_c", "--quiet", "--update", "."); err != nil {
		return err
	}
	repomd := filepath.Join(dir, "repodata", "repomd.xml")
	b, err := os.ReadFile(repomd)
	if err != nil {
		return err
	}
	sig, err := key.DetachSign(b)
	if err != nil {
		return err
	}
	if err := os.WriteFile(repomd+".asc", sig, 0o644); err != nil {
		return err
	}
	pub, err := key.PublicKey(true)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, RPMKey), pub, 0o644); err != nil {
		return err
	}
	logf(log, "rpm repository: %s signed by %s", dir, key.Fingerprint())
	return nil
}

// poolArches lists the architectures of the debs in the pool.
func poolArches(ctx context.Context, pool string) ([]string, error) {
	seen := map[string]bool{}
	err := filepath.WalkDir(pool, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".deb") {
			return err
		}
		a, err := field(ctx, p, "Architecture")
		seen[a] = true
		return err
	})
	var out []string
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("no .deb in %s to publish", pool)
	}
	return out, err
}

func field(ctx context.Context, deb, name string) (string, error) {
	b, err := output(ctx, "", "dpkg-deb", "--field", deb, name)
	s := strings.TrimSpace(string(b))
	if err == nil && s == "" {
		err = fmt.Errorf("%s has no %s field", deb, name)
	}
	return s, err
}

func output(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, stderr.String())
	}
	return out, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// writeGzip writes a gzip with no name and no time, so the same index
// gives the same bytes.
func writeGzip(path string, b []byte) error {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}
