package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeInstaller records each call (arguments, and whether CCO_AGENTS is set
// and empty) and answers `config` with the bundle key when one is given.
const fakeInstaller = `#!/bin/sh
if [ "$1" = config ]; then
	[ -n "$FAKE_BUNDLE" ] && echo "bundle = \"$FAKE_BUNDLE\"  # file /etc/cco/install.toml"
	echo 'agents = ["claude","codex"]  # default'
	exit 0
fi
echo "$* agents=${CCO_AGENTS-unset}" >> "$FAKE_LOG"
exit ${FAKE_RC:-0}
`

type scriptCase struct {
	name    string
	args    []string
	receipt bool
	bundle  string
	rc      string
	calls   string // the recorded installer calls, one a line
	stderr  string // a fragment the script must print
}

func runScript(t *testing.T, script string, tc scriptCase) {
	t.Helper()
	dir := t.TempDir()
	fake := filepath.Join(dir, "cco-install")
	if err := os.WriteFile(fake, []byte(fakeInstaller), 0o755); err != nil {
		t.Fatal(err)
	}
	logf := filepath.Join(dir, "calls")
	receipt := filepath.Join(dir, "receipt.json")
	if tc.receipt {
		os.WriteFile(receipt, []byte("{}"), 0o644)
	}
	cmd := exec.Command("/bin/sh", append([]string{script}, tc.args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "CCO_INSTALL=" + fake, "CCO_RECEIPT=" + receipt,
		"FAKE_LOG=" + logf, "FAKE_BUNDLE=" + tc.bundle, "FAKE_RC=" + tc.rc}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v failed the package operation: %v\n%s", script, tc.args, err, stderr.String())
	}
	calls, _ := os.ReadFile(logf)
	if string(calls) != tc.calls {
		t.Errorf("installer calls:\n%s\nwant:\n%s", calls, tc.calls)
	}
	if !strings.Contains(stderr.String(), tc.stderr) {
		t.Errorf("stderr %q lacks %q", stderr.String(), tc.stderr)
	}
}

func TestPostinstall(t *testing.T) {
	for _, tc := range []scriptCase{
		{name: "deb first install prints the next command", args: []string{"configure", ""}, stderr: "run: sudo cco-install"},
		{name: "rpm first install prints the next command", args: []string{"1"}, stderr: "run: sudo cco-install"},
		{name: "deb upgrade refreshes offline", args: []string{"configure", "0.1.0"}, receipt: true,
			calls: "--yes agents=\n", stderr: "refreshing"},
		{name: "rpm upgrade refreshes offline", args: []string{"2"}, receipt: true, calls: "--yes agents=\n"},
		{name: "upgrade of an unprovisioned machine stays put", args: []string{"configure", "0.1.0"}},
		{name: "first install with a bundle", args: []string{"configure", ""}, bundle: "/srv/cco.tar.xz",
			calls: "--yes --bundle /srv/cco.tar.xz agents=unset\n", stderr: "configured bundle /srv/cco.tar.xz"},
		{name: "rpm first install with a bundle", args: []string{"1"}, bundle: "/srv/b.tar.xz",
			calls: "--yes --bundle /srv/b.tar.xz agents=unset\n"},
		{name: "a failed refresh never fails the package", args: []string{"configure", "0.1.0"}, receipt: true, rc: "3",
			calls: "--yes agents=\n", stderr: "did not finish (exit 3)"},
		{name: "a failed bundle install never fails the package", args: []string{"1"}, bundle: "/b", rc: "1",
			calls: "--yes --bundle /b agents=unset\n", stderr: "(exit 1)"},
		{name: "abort-upgrade does nothing", args: []string{"abort-upgrade", "0.2.0"}, receipt: true},
	} {
		t.Run(tc.name, func(t *testing.T) { runScript(t, "../postinstall.sh", tc) })
	}
}

func TestPreremove(t *testing.T) {
	for _, tc := range []scriptCase{
		{name: "deb remove uninstalls", args: []string{"remove"}, calls: "--uninstall --yes agents=unset\n"},
		{name: "rpm erase uninstalls", args: []string{"0"}, calls: "--uninstall --yes agents=unset\n"},
		{name: "deb upgrade keeps the installation", args: []string{"upgrade", "0.2.0"}},
		{name: "rpm upgrade keeps the installation", args: []string{"1"}},
		{name: "deb deconfigure keeps it", args: []string{"deconfigure", "in-favour", "x"}},
		{name: "a failed uninstall never fails the removal", args: []string{"remove"}, rc: "1",
			calls: "--uninstall --yes agents=unset\n", stderr: "removed anyway"},
	} {
		t.Run(tc.name, func(t *testing.T) { runScript(t, "../preremove.sh", tc) })
	}
	t.Run("missing installer", func(t *testing.T) {
		cmd := exec.Command("/bin/sh", "../preremove.sh", "remove")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "CCO_INSTALL=/nonexistent/cco-install"}
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "nothing to undo") {
			t.Fatalf("err %v, output %q", err, out)
		}
	})
}
