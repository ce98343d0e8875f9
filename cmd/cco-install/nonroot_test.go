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
)

// Without --root, cco-install provisions the machine itself: as non-root it
// refuses at once, writes nothing, and says the exact command to use.
func TestRefusesNonRootWithoutRoot(t *testing.T) {
	if os.Getenv("CCO_TEST_AS_NONROOT") == "1" {
		os.Exit(run([]string{"--force"}, os.Stdin, os.Stdout, os.Stderr))
	}
	testenv.RequireRoot(t)
	dir, err := os.MkdirTemp("", "cco-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	exe := filepath.Join(dir, "cco-install.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestRefusesNonRootWithoutRoot$")
	cmd.Env = append(os.Environ(), "CCO_TEST_AS_NONROOT=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("want exit 2, got %v; stderr: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "sudo cco-install") || !strings.Contains(stderr.String(), "needs root") {
		t.Errorf("the refusal must name the command to use; stderr: %s", stderr.String())
	}
}
