package vmtests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
)

// offline keeps cco-install's vendor steps out: the machine has no network
// (the vendor mirror scenario will set agents and a loopback base URL).
var offline = []string{"CCO_AGENTS="}

// report is cco-install --json's document.
type report struct {
	Schema    int    `json:"schema"`
	Version   string `json:"version"`
	Changed   int    `json:"changed"`
	Conflicts int    `json:"conflicts"`
	Failed    int    `json:"failed"`
	Steps     []struct {
		ID     string   `json:"id"`
		Status string   `json:"status"`
		Detail string   `json:"detail"`
		Paths  []string `json:"paths"`
	} `json:"steps"`
}

func ccoInstall(t *testing.T, m *Machine, args ...string) report {
	t.Helper()
	r := must(t, m, Root, "/", offline, append([]string{"cco-install", "--json"}, args...)...)
	var rep report
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("cco-install %v: stdout is not one JSON report: %v\n%s", args, err, r.Stdout)
	}
	if rep.Failed != 0 || rep.Conflicts != 0 {
		t.Fatalf("cco-install %v: %d failed, %d conflicts:\n%s", args, rep.Failed, rep.Conflicts, r.Stdout)
	}
	return rep
}

// read returns a file of the machine, or nil when it does not exist.
func read(t *testing.T, m *Machine, target string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.Root, target))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// system lists every path of the machine's own filesystem with its type
// and mode, leaving out what a package operation or a run legitimately
// touches (dpkg's database and logs, caches, /tmp, users' homes).
func system(t *testing.T, m *Machine) []string {
	t.Helper()
	r := must(t, m, Root, "/", nil, "find", "/", "-xdev",
		"(", "-path", "/var/lib/dpkg", "-o", "-path", "/var/log", "-o", "-path", "/var/cache",
		"-o", "-path", "/tmp", "-o", "-path", "/home", "-o", "-path", "/root", "-o", "-path", "/var/tmp", ")", "-prune",
		"-o", "-printf", "%p %y %m\n")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	sort.Strings(lines)
	return lines
}

// diffLists returns what is only in a and only in b.
func diffLists(a, b []string) (onlyA, onlyB []string) {
	in := func(list []string) map[string]bool {
		s := map[string]bool{}
		for _, x := range list {
			s[x] = true
		}
		return s
	}
	sa, sb := in(a), in(b)
	for _, x := range a {
		if !sb[x] {
			onlyA = append(onlyA, x)
		}
	}
	for _, x := range b {
		if !sa[x] {
			onlyB = append(onlyB, x)
		}
	}
	return onlyA, onlyB
}

func assertClean(t *testing.T, m *Machine, before []string) {
	t.Helper()
	gone, left := diffLists(before, system(t, m))
	if len(gone) > 0 || len(left) > 0 {
		t.Errorf("the system is not as before the package:\nleft behind: %v\ngone: %v", left, gone)
	}
}

// installed are the files the provisioned machine must hold, each with the
// bytes of the package's copy it comes from.
var installed = []struct{ path, from string }{
	{"/usr/local/bin/claude", "/usr/lib/cco/shadow"},
	{"/usr/local/bin/codex", "/usr/lib/cco/shadow"},
	{"/usr/libexec/cco/sandbox-helper", "/usr/lib/cco/shadow"},
	{"/usr/libexec/cco/egress-proxy", "/usr/lib/cco/egress-proxy"},
}

// assertProvisioned checks that the package's copies are b's binaries and
// that every installed file is executable and holds its copy's bytes.
func assertProvisioned(t *testing.T, m *Machine, b *Build) {
	t.Helper()
	packaged := map[string][]byte{"/usr/lib/cco/shadow": b.Shadow, "/usr/lib/cco/egress-proxy": b.EgressProxy}
	for p, want := range packaged {
		if got := read(t, m, p); !bytes.Equal(got, want) {
			t.Errorf("%s is not the package's binary (%d bytes, want %d)", p, len(got), len(want))
		}
	}
	for _, f := range installed {
		if got, want := read(t, m, f.path), packaged[f.from]; !bytes.Equal(got, want) {
			t.Errorf("%s is not the package's %s (%d bytes, want %d)", f.path, f.from, len(got), len(want))
			continue
		}
		if fi, err := os.Stat(filepath.Join(m.Root, f.path)); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, want 0755", f.path, fi.Mode().Perm())
		}
	}
	if read(t, m, "/var/lib/cco/receipt.json") == nil {
		t.Error("no receipt")
	}
}

func assertNotProvisioned(t *testing.T, m *Machine) {
	t.Helper()
	for _, f := range installed {
		if read(t, m, f.path) != nil {
			t.Errorf("%s is present", f.path)
		}
	}
	if read(t, m, "/var/lib/cco/receipt.json") != nil {
		t.Error("/var/lib/cco/receipt.json is present")
	}
}

// fakeVendor stands in for a vendor binary: it reports the jail it finds
// itself in, as the marker, its capabilities and its working directory.
const fakeVendor = `#!/bin/sh
echo "vendor $(basename "$0") args: $*"
echo "cwd: $(pwd)"
grep -E '^(NoNewPrivs|CapEff):' /proc/self/status
echo "marker: $(cat /run/cco/jail 2>&1)"
`

// putFakeVendors installs a fake binary where each profile expects its
// vendor's (the vendor mirror scenario will install the real layout), and
// removes them, with the directories it made, when the test ends: they
// are the test's, not cco's, and must not count against a clean removal.
func putFakeVendors(t *testing.T, m *Machine) { t.Helper(); putVendors(t, m, fakeVendor) }

// putVendors is putFakeVendors with script as every vendor binary.
func putVendors(t *testing.T, m *Machine, script string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "vendor")
	if err := os.WriteFile(src, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range agent.Names() {
		p, _ := agent.Lookup(name)
		top := p.Binary
		for d := filepath.Dir(p.Binary); d != "/"; d = filepath.Dir(d) {
			if _, err := os.Lstat(filepath.Join(m.Root, d)); err == nil {
				break
			}
			top = d
		}
		if err := m.Put(src, p.Binary, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(filepath.Join(m.Root, top)) })
	}
}

func decode(s string, v any) error { return json.Unmarshal([]byte(s), v) }
