// Package deptest checks what a program links, in the manner of
// tailscale's tstest/deptest: a test names the packages its program must
// never link, with why, and fails when one is among its dependencies for
// any platform the release builds.
package deptest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
)

// Platforms are the GOOS/GOARCH pairs the release builds.
var Platforms = [][2]string{{"linux", "amd64"}, {"linux", "arm64"}}

// Check fails t for every package in bad (import path, or a path prefix
// ending in "/...") that pkg links on a release platform; bad's values say
// why it must not.
func Check(t testing.TB, pkg string, bad map[string]string) {
	t.Helper()
	goTool := testenv.GoTool()
	for _, p := range Platforms {
		c := exec.Command(goTool, "list", "-deps", pkg)
		c.Env = append(os.Environ(), "GOOS="+p[0], "GOARCH="+p[1], "CGO_ENABLED=0")
		out, err := c.Output()
		if err != nil {
			t.Fatalf("go list -deps %s for %s/%s: %v", pkg, p[0], p[1], err)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list -deps %s listed nothing", pkg)
		}
		for _, d := range deps {
			for b, why := range bad {
				if d == b || strings.HasSuffix(b, "/...") && (d == strings.TrimSuffix(b, "/...") || strings.HasPrefix(d, strings.TrimSuffix(b, "..."))) {
					t.Errorf("%s links %s on %s/%s: %s", pkg, d, p[0], p[1], why)
				}
			}
		}
	}
}
