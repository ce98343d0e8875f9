// Package vmtests runs cco's end-to-end scenarios on a freshly built Debian
// root: an image made once by mmdebstrap and cached, unpacked per test and
// started as an isolated machine in its own mount, pid, uts, ipc and network
// namespaces (see docs/adr/0060). The scenarios install the real .deb,
// provision with cco-install, run the agents as a normal user, upgrade and
// remove, exactly as an operator would.
//
// The tests need root, unshare/nsenter (util-linux) and the cached image;
// building the image needs mmdebstrap and the Debian archive, so it is a
// separate step (go run ./vm-tests/cmd/mkroot), as installing a package is,
// and no test reaches the network. They run when CCO_VM_TESTS=1.
package vmtests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Image describes the Debian root the scenarios start from.
type Image struct {
	Suite    string
	Mirror   string
	Includes []string
	// CacheDir keeps built images between runs.
	CacheDir string
}

// DefaultImage is bookworm with what the scenarios need: bubblewrap (the
// package's dependency, installed up front so dpkg -i works offline),
// passwd for a normal user, python3 and python3-apt for Ansible (its
// modules, and the apt module installing the .deb), and man-db,
// bash-completion, zsh and fish, where the package's man pages and
// completion scripts are used.
func DefaultImage() Image {
	return Image{
		Suite:    envOr("CCO_VM_SUITE", "bookworm"),
		Mirror:   envOr("CCO_VM_MIRROR", "http://deb.debian.org/debian"),
		Includes: []string{"bubblewrap", "passwd", "python3", "python3-apt", "man-db", "bash-completion", "zsh", "fish"},
		CacheDir: envOr("CCO_VM_CACHE", "/var/cache/cco-vm-tests"),
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Path is the cached tarball; its name changes with anything that changes
// its content, so a stale cache is never used.
func (im Image) Path() string {
	h := sha256.Sum256([]byte(im.Suite + "\n" + im.Mirror + "\n" + strings.Join(im.Includes, ",")))
	return filepath.Join(im.CacheDir, fmt.Sprintf("%s-%s.tar.zst", im.Suite, hex.EncodeToString(h[:6])))
}

// Cached reports whether the image is already built.
func (im Image) Cached() bool {
	fi, err := os.Stat(im.Path())
	return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
}

// Build makes the image with mmdebstrap unless it is cached. It writes to a
// temporary name and renames, so an interrupted build leaves no image.
func (im Image) Build(ctx context.Context, log io.Writer) (string, error) {
	if im.Cached() {
		return im.Path(), nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", fmt.Errorf("building %s needs mmdebstrap: apt-get install mmdebstrap", im.Path())
	}
	if err := os.MkdirAll(im.CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", im.CacheDir, err)
	}
	tmp := strings.TrimSuffix(im.Path(), ".tar.zst") + ".new.tar.zst"
	cmd := exec.CommandContext(ctx, "mmdebstrap", "--variant=apt", "--mode=root",
		"--include="+strings.Join(im.Includes, ","), im.Suite, tmp, im.Mirror)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("mmdebstrap %s into %s: %w", im.Suite, tmp, err)
	}
	if err := os.Rename(tmp, im.Path()); err != nil {
		return "", fmt.Errorf("renaming %s: %w", tmp, err)
	}
	return im.Path(), nil
}
