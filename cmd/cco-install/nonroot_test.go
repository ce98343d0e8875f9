package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

// Without --root, cco-install provisions the machine itself: as non-root it
// refuses at once, writes nothing, and says the exact command to use.
func TestRefusesNonRootWithoutRoot(t *testing.T) {
	if os.Getenv("CCO_TEST_AS_NONROOT") == "1" {
		os.Exit(run([]string{"--force"}, os.Stdin, os.Stdout, os.Stderr))
	}
	testenv.RequireRoot(t)
	dir := nobodyDir(t)
	cmd := asNobody(t, dir, "TestRefusesNonRootWithoutRoot", "CCO_TEST_AS_NONROOT=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("want exit 2, got %v; stderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "sudo cco-install") || !strings.Contains(stderr.String(), "needs root") {
		t.Errorf("the refusal must name the command to use; stderr: %s", stderr.String())
	}
}

// status needs no root: run as nobody over an installed tree it may read,
// it checks everything it can, exits 0 when in sync, and says what it
// skipped because only root may read there (a 0700 home).
func TestStatusWithoutRoot(t *testing.T) {
	if args := os.Getenv("CCO_TEST_NONROOT_ARGS"); args != "" {
		os.Exit(run(strings.Fields(args), os.Stdin, os.Stdout, os.Stderr))
	}
	testenv.RequireRoot(t)
	dir := nobodyDir(t)
	root := filepath.Join(dir, "root")
	for _, d := range []string{"etc", "home/alice", "root/.config/fish"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	// Root's dotfiles, in a home only root may enter.
	for _, f := range []string{".bashrc", ".profile", ".zshrc", ".config/fish/config.fish"} {
		os.WriteFile(filepath.Join(root, "root", f), []byte("export PATH=$HOME/.local/bin:$PATH\n"), 0o644)
	}
	os.Chmod(filepath.Join(root, "root"), 0o700)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n"), 0o644)
	os.Chown(filepath.Join(root, "home/alice"), 1000, 1000)
	os.Chmod(filepath.Join(root, "home/alice"), 0o700)
	shadow := filepath.Join(dir, "shadow")
	os.WriteFile(shadow, []byte("#!/bin/sh\n"), 0o755)
	t.Setenv("CCO_SHADOW_PATH", shadow)
	t.Setenv("CCO_EGRESS_PROXY_PATH", shadow)
	t.Setenv("CCO_AGENTS", "")
	t.Setenv("CCO_IMAGE", "no")
	t.Setenv("CCO_USERS", "alice")
	var out bytes.Buffer
	if code := run([]string{"--root", root}, nil, &out, &out); code != 0 {
		t.Fatalf("install: exit %d: %s", code, out.String())
	}
	before := treehash.Hash(t, root)
	cmd := asNobody(t, dir, "TestStatusWithoutRoot", "CCO_TEST_NONROOT_ARGS=status --root "+root)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("status as nobody: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "in sync") {
		t.Errorf("status as nobody is not in sync:\n%s", stdout.String())
	}
	if !strings.Contains(stdout.String(), "skipped  alice's home (/home/alice): only root can read it") {
		t.Errorf("status must say it skipped the 0700 home:\n%s", stdout.String())
	}
	// A user's status and dry run are quiet about root's files: the note
	// that each home was skipped, once, and nothing else.
	dry := asNobody(t, dir, "TestStatusWithoutRoot", "CCO_TEST_NONROOT_ARGS=--dry-run --root "+root)
	var dryOut, dryErr bytes.Buffer
	dry.Stdout, dry.Stderr = &dryOut, &dryErr
	if err := dry.Run(); err != nil {
		t.Fatalf("a dry run as nobody: %v\nstdout: %s\nstderr: %s", err, dryOut.String(), dryErr.String())
	}
	for what, out := range map[string]string{"status": stdout.String() + stderr.String(), "dry run": dryOut.String() + dryErr.String()} {
		if strings.Contains(out, "permission denied") {
			t.Errorf("%s as nobody warns about what only root may read:\n%s", what, out)
		}
		for _, home := range []string{"root's home (/root)", "alice's home (/home/alice)"} {
			if n := strings.Count(out, "skipped"+map[bool]string{true: ": ", false: "  "}[what == "dry run"]+home+": only root can read it"); n != 1 {
				t.Errorf("%s as nobody says %d times that it skipped %s, want once:\n%s", what, n, home, out)
			}
		}
	}
	if !strings.Contains(dryErr.String(), "run `sudo cco-install --dry-run` to check it") {
		t.Errorf("the dry run's note does not name the command that checks the home:\n%s", dryErr.String())
	}
	if after := treehash.Hash(t, root); after != before {
		t.Errorf("status or the dry run changed the tree")
	}
}

// nobodyDir is a temporary directory that nobody may enter (t.TempDir's
// parents are root's alone), removed after the test.
func nobodyDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "cco-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	return dir
}

// asNobody runs this test binary's test as uid 65534 with env added: a copy
// in dir, since nobody cannot reach the go test build directory.
func asNobody(t *testing.T, dir, test string, env ...string) *exec.Cmd {
	exe := filepath.Join(dir, "cco-install.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}
