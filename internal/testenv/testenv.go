// Package testenv holds the test helpers that decide whether a test can run
// here. In CI (CI=true or CCO_REQUIRE_BWRAP=1) a missing prerequisite fails the
// test instead of skipping it: a skipped sandbox test must never count as
// passing.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Strict reports whether missing prerequisites fail rather than skip.
func Strict() bool {
	return os.Getenv("CI") == "true" || os.Getenv("CCO_REQUIRE_BWRAP") == "1"
}

// RequireBwrap returns bwrap's path, or skips the test (fails it in CI).
func RequireBwrap(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		Missing(t, "bwrap is not installed (apt-get install bubblewrap)")
	}
	return p
}

// RequireRoot skips the test unless it runs as root (fails it in CI, which runs as root).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "the test needs root")
	}
}

// Missing skips, or in CI fails, for the reason given.
func Missing(t testing.TB, why string) {
	t.Helper()
	if Strict() {
		t.Fatalf("required in CI: %s", why)
	}
	t.Skip(why)
}
