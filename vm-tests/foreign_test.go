package vmtests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// A requirements.toml that cco did not write is left alone through
// provisioning, a second run, and the package's removal: a conflict by
// default (exit 3, with the snippet to merge), a warning when
// codex.foreign_policy is warn.
func TestForeignCodexRequirementsLeftAlone(t *testing.T) {
	b := packages(t)[newVersion]
	m := boot(t)
	const target = "/etc/codex/requirements.toml"
	foreign := []byte("# the site's own policy\napproval_policy = \"on-request\"\n")
	if err := os.MkdirAll(filepath.Join(m.Root, "/etc/codex"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Root, target), foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(b.Deb, "/tmp/cco.deb", 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, m, Root, "/", nil, "dpkg", "-i", "/tmp/cco.deb")

	unchanged := func(when string) {
		t.Helper()
		if got := read(t, m, target); string(got) != string(foreign) {
			t.Fatalf("%s: %s was changed:\n%s", when, target, got)
		}
	}
	for _, run := range []string{"first", "second"} {
		r := m.Exec(ctxT(t), Root, "/", offline, "cco-install", "--json")
		if r.Code != 3 {
			t.Fatalf("%s run: exit %d, want 3 (a conflict)\n%s\n%s", run, r.Code, r.Stdout, r.Stderr)
		}
		var rep report
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("%s run: %v\n%s", run, err, r.Stdout)
		}
		status := map[string]string{}
		for _, s := range rep.Steps {
			status[s.ID] = s.Status
		}
		if status["policy.codex.requirements"] != "conflict" || rep.Conflicts != 1 || rep.Failed != 0 {
			t.Errorf("%s run: steps %v, %d conflicts, %d failed", run, status, rep.Conflicts, rep.Failed)
		}
		unchanged(run + " run")
	}
	r := m.Exec(ctxT(t), Root, "/", append(offline, "CCO_CODEX_FOREIGN_POLICY=warn"), "cco-install", "--json")
	if r.Code != 0 {
		t.Errorf("with codex.foreign_policy=warn: exit %d\n%s", r.Code, r.Stderr)
	}
	unchanged("the warn run")
	must(t, m, Root, "/", nil, "dpkg", "-r", "cco")
	unchanged("after dpkg -r")
	assertNotProvisioned(t, m)
}
