package vendorfetch

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/cco-dev/cco/provision"
)

// systemPath is where a Node named by command name is looked for, inside
// the target root: the system's PATH, not the caller's (sudo and cron
// differ, and a user's ~/bin must not pick what runs every session).
var systemPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// checkNode finds the Node binary gemini.node names and checks its version
// against the package's engines.node. It returns the binary's path on the
// target system.
func checkNode(run *provision.View, node string, m *npmManifest) (string, error) {
	want := ""
	if len(m.Engines) > 0 {
		// engines is an object in every current package; old ones wrote an
		// array, which npm ignores too.
		var e map[string]string
		if json.Unmarshal(m.Engines, &e) == nil {
			want = strings.TrimSpace(e["node"])
		}
	}
	fix := "install Node.js " + want + " (apt-get install nodejs, or NodeSource's packages for a newer one) or set gemini.node to the path of one"
	p := node
	if !strings.HasPrefix(node, "/") {
		p = ""
		for _, d := range systemPath {
			if fi, err := run.Root.Lstat(d + "/" + node); err == nil && !fi.IsDir() {
				p = d + "/" + node
				break
			}
		}
		if p == "" {
			return "", fmt.Errorf("%s@%s needs Node.js %s, and there is no %q on the system PATH (%s): %s", m.Name, m.Version, want, node, strings.Join(systemPath, ":"), fix)
		}
	} else if _, err := run.Root.Lstat(p); err != nil {
		return "", fmt.Errorf("gemini.node %s: %v: %s", p, err, fix)
	}
	ctx, cancel := context.WithTimeout(run.Ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, run.Root.HostPath(p), "--version")
	cmd.Env = []string{"PATH=" + strings.Join(systemPath, ":")}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s --version failed (%v): %s", run.Root.HostPath(p), err, fix)
	}
	got := strings.TrimSpace(string(out))
	v, err := semver.NewVersion(strings.TrimPrefix(got, "v"))
	if err != nil {
		return "", fmt.Errorf("%s --version printed %q, not a Node version: %s", run.Root.HostPath(p), got, fix)
	}
	if want == "" {
		return p, nil
	}
	c, err := semver.NewConstraint(want)
	if err != nil {
		// npm does not enforce an engines range it cannot read either.
		return p, nil
	}
	if !c.Check(v) {
		return "", fmt.Errorf("%s@%s needs Node.js %s, but %s is %s: %s", m.Name, m.Version, want, p, got, fix)
	}
	return p, nil
}
