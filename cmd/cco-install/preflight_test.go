package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/hostcheck"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest"
)

func readerAt(t *testing.T, dir string) provision.Reader {
	t.Helper()
	return provisiontest.Root(t, dir).ReadOnly()
}

// bubblewrap missing or older than 0.8.0 is one problem with the fix that
// names this system's package manager; 0.8.0 and later pass.
func TestCheckBwrap(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "usr/bin/apt-get"), nil, 0o755)
	root := readerAt(t, dir)
	version := func(out string) func(string) (string, error) {
		return func(string) (string, error) { return out, nil }
	}
	if p := checkBwrap(root, version("")); len(p) != 1 || !strings.Contains(p[0].Detail, "not installed") || !strings.Contains(p[0].Fix, "sudo apt-get install bubblewrap`, or pass --install-deps") {
		t.Fatalf("missing bwrap: %+v", p)
	}
	os.WriteFile(filepath.Join(dir, "usr/bin/bwrap"), nil, 0o755)
	for out, ok := range map[string]bool{"bubblewrap 0.4.0\n": false, "bubblewrap 0.7.9": false, "bubblewrap 0.8.0": true, "bubblewrap 0.11.0": true, "bubblewrap 1.0": true} {
		p := checkBwrap(root, version(out))
		if ok != (len(p) == 0) {
			t.Errorf("%q: problems %+v", out, p)
		}
		if !ok && (len(p) != 1 || !strings.Contains(p[0].Detail, "older than the 0.8.0")) {
			t.Errorf("%q: %+v", out, p)
		}
	}
	if p := checkBwrap(root, func(string) (string, error) { return "", errors.New("exec format error") }); len(p) != 1 {
		t.Errorf("a bwrap that does not run: %+v", p)
	}
}

// Unusable user namespaces are a finding on the host, never for a staged
// root or an image build.
func TestUsernsProblem(t *testing.T) {
	fail := func() error { return errors.New("setting up uid map: Permission denied") }
	host := readerAt(t, "/")
	if _, err := os.Stat("/usr/bin/bwrap"); err == nil {
		if p := usernsProblem(host, false, fail); len(p) != 1 || p[0].ID != "userns" || !strings.Contains(p[0].Detail, "Permission denied") {
			t.Errorf("failing probe on the host: %+v", p)
		}
		if p := usernsProblem(host, false, func() error { return nil }); len(p) != 0 {
			t.Errorf("working probe: %+v", p)
		}
	}
	if p := usernsProblem(host, true, fail); len(p) != 0 {
		t.Errorf("an image build probes nothing: %+v", p)
	}
	if p := usernsProblem(readerAt(t, t.TempDir()), false, fail); len(p) != 0 {
		t.Errorf("a staged root is not this kernel: %+v", p)
	}
}

// TestRunCommandIgnoresPATH: what --install-deps runs (apt-get, dnf) is
// the system's program, never one planted first on root's PATH.
func TestRunCommandIgnoresPATH(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	if err := os.WriteFile(filepath.Join(dir, "true"), []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	if err := runCommand(os.Stderr)("true"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("PLANTED: runCommand ran %s/true", dir)
	}
	if err := runCommand(os.Stderr)("cco-no-such-program"); err == nil || !strings.Contains(err.Error(), "system's directories") {
		t.Errorf("a missing program: %v", err)
	}
}

// A blocking host finding refuses a run on the host before it writes
// anything, with its cause and fix; a staged root or an image build is not
// checked against this machine's kernel.
func TestPreflightHostFindings(t *testing.T) {
	old := hostHost
	t.Cleanup(func() { hostHost = old })
	hostHost = func(provision.Reader) hostcheck.Host {
		return hostcheck.Host{
			ReadFile: func(p string) ([]byte, error) {
				if p == "/proc/sys/user/max_user_namespaces" {
					return []byte("0\n"), nil
				}
				return nil, os.ErrNotExist
			},
			Exists:      func(string) bool { return false },
			MountAPI:    func() bool { return false },
			LandlockABI: func() int { return 3 },
		}
	}
	cfg := loadConfig(readerAt(t, t.TempDir()), nil)
	var got *provision.Finding
	for _, f := range preflight(readerAt(t, "/"), cfg, false) {
		if f.ID == "preflight.max_user_namespaces" {
			got = &f
		}
		if f.ID == "preflight.mount_api" {
			t.Errorf("a fallback engine is no refusal: %+v", f)
		}
	}
	if got == nil || !strings.Contains(got.Detail, "max_user_namespaces is 0") || !strings.Contains(got.Fix, "sysctl") {
		t.Fatalf("max_user_namespaces 0 on the host: %+v", got)
	}
	for _, image := range []bool{true, false} {
		root := readerAt(t, "/")
		if !image {
			root = readerAt(t, t.TempDir())
		}
		for _, f := range preflight(root, cfg, image) {
			if strings.HasPrefix(f.ID, "preflight.max_user") {
				t.Errorf("image %v, host %v: %+v", image, root.IsHost(), f)
			}
		}
	}
}
