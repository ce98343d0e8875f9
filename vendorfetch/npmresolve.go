package vendorfetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cco-dev/cco/internal/sysbin"
)

// Unprivileged is the user npm runs as when cco-install runs as root
// (nobody): npm parses what a registry sends, and nothing of a package
// ever runs as root.
const Unprivileged = 65534

// npmTimeout bounds one resolution: npm fetches a packument per package,
// one after another on a slow registry.
const npmTimeout = 10 * time.Minute

// npmResolve has npm resolve the dependency tree of the project pkgJSON (a
// package.json) against the registry and returns its package-lock.json.
// npm runs with --package-lock-only and --ignore-scripts: it fetches
// packuments, no tarball, and runs nothing of any package. It runs in a
// scratch directory of its own, with no user or global npmrc, as the
// unprivileged user when cco-install is root. The proxy variables pass
// through.
func npmResolve(ctx context.Context, cfg Config, registry string, pkgJSON []byte) ([]byte, error) {
	npm, err := systemCommand("npm")
	if err != nil {
		return nil, fmt.Errorf("the dependency tree is resolved by npm, and %v (fix: apt-get install npm, or install from an offline bundle made where npm is)", err)
	}
	tmp, err := os.MkdirTemp("", "cco-npm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	for _, f := range []struct {
		name string
		b    []byte
	}{{"package.json", pkgJSON}, {"npmrc", nil}, {"globalnpmrc", nil}} {
		if err := os.WriteFile(filepath.Join(tmp, f.name), f.b, 0o644); err != nil {
			return nil, err
		}
	}
	asNobody := os.Geteuid() == 0
	if asNobody {
		if err := chownTree(tmp, Unprivileged); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--package-lock-only", "--ignore-scripts", "--omit=dev",
		"--no-audit", "--no-fund", "--no-update-notifier", "--registry="+registry,
		"--userconfig="+filepath.Join(tmp, "npmrc"), "--globalconfig="+filepath.Join(tmp, "globalnpmrc"),
		"--cache="+filepath.Join(tmp, "cache"), "--loglevel=error")
	cmd.Dir = tmp
	cmd.Env = []string{"PATH=" + strings.Join(systemPath, ":"), "HOME=" + tmp, "NO_UPDATE_NOTIFIER=1"}
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "NODE_EXTRA_CA_CERTS"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if asNobody {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Unprivileged, Gid: Unprivileged, Groups: []uint32{}}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cfg.Log.Write([]byte("resolving the dependency tree with npm (" + registry + ")\n"))
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("npm could not resolve the dependency tree from %s (%v): %s", registry, err, lastLines(stderr.String(), 5))
	}
	b, err := os.ReadFile(filepath.Join(tmp, "package-lock.json"))
	if err != nil {
		return nil, fmt.Errorf("npm wrote no lockfile: %w", err)
	}
	return b, nil
}

// systemCommand finds name in the system's directories (sysbin): the
// host's, for a tool cco-install runs itself.
func systemCommand(name string) (string, error) { return sysbin.PathIn(systemPath, name) }

// chownTree gives dir and what is in it to uid (and the same gid), never
// following a link.
func chownTree(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// lastLines is the last k non-empty lines of s, joined, for a message.
func lastLines(s string, k int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > k {
		lines = lines[len(lines)-k:]
	}
	if len(lines) == 0 {
		return "npm printed nothing"
	}
	return strings.Join(lines, " | ")
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
