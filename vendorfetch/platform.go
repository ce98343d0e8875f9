package vendorfetch

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/cco-dev/cco/provision"
)

// goarch is the test seam for the machine's architecture.
var goarch = runtime.GOARCH

// DetectPlatform names Claude Code's platform for the target system:
// linux-x64 or linux-arm64, with -musl when the target root has a musl
// loader (/lib/libc.musl-*.so.1). It looks inside root, not at the host:
// under --root the machine being provisioned is another system.
func DetectPlatform(root provision.FileReader) (string, error) {
	var arch string
	switch goarch {
	case "amd64":
		arch = "x64"
	case "arm64":
		arch = "arm64"
	default:
		return "", fmt.Errorf("no vendor builds for the architecture %s (only amd64 and arm64)", goarch)
	}
	p := "linux-" + arch
	if musl, err := hasMusl(root); err != nil {
		return "", err
	} else if musl {
		p += "-musl"
	}
	return p, nil
}

func hasMusl(root provision.FileReader) (bool, error) {
	d, err := root.Open("/lib")
	if err != nil {
		return false, nil // no /lib at all: not a musl system
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", root.HostPath("/lib"), err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "libc.musl-") && strings.HasSuffix(n, ".so.1") {
			return true, nil
		}
	}
	return false, nil
}

// platformArch checks a Claude platform name and returns its architecture.
func platformArch(p string) (string, error) {
	switch p {
	case "linux-x64", "linux-x64-musl":
		return "x64", nil
	case "linux-arm64", "linux-arm64-musl":
		return "arm64", nil
	}
	return "", fmt.Errorf("platform: %q is not linux-x64, linux-arm64, linux-x64-musl or linux-arm64-musl", p)
}

// codexTarget is Codex's target triple for a platform (Linux builds are
// static musl whatever the host's libc).
func codexTarget(platform string) string {
	arch, _ := platformArch(platform)
	if arch == "arm64" {
		return "aarch64-unknown-linux-musl"
	}
	return "x86_64-unknown-linux-musl"
}
