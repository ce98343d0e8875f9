package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// After a switch the current and the previous version stay; older ones are
// pruned, except one a running process still holds, which goes at a later
// upgrade once nothing uses it.
func TestPruneKeepsTwoAndNeverOneInUse(t *testing.T) {
	st, root, shadow, env := storeRoot(t, "claude")
	vdir := func(v string) string { return filepath.Join(root, "usr/libexec/cco/claude", v) }
	upgradeTo := func(v string) string {
		t.Helper()
		st.stable.Store(v)
		var out strings.Builder
		cmd := installer(t, root, shadow, env, "--upgrade", "claude")
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("upgrade to %s: %v\n%s", v, err, out.String())
		}
		return out.String()
	}
	runReport(t, installer(t, root, shadow, env))
	upgradeTo("2.1.330")
	if _, err := os.Stat(vdir("2.1.328")); err != nil {
		t.Fatal("the previous version must be kept for --rollback")
	}

	// A session started on 2.1.328 is still running (it holds the binary).
	hold := exec.Command("sh", "-c", "exec 3<"+filepath.Join(vdir("2.1.328"), "claude")+"; exec sleep 30")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer hold.Process.Kill()
	out := upgradeTo("2.1.331")
	if _, err := os.Stat(vdir("2.1.328")); err != nil {
		t.Fatalf("2.1.328 is in use and must be kept: %s", out)
	}
	if !strings.Contains(out, "in use by pid") {
		t.Fatalf("the report must say why 2.1.328 was kept: %s", out)
	}
	hold.Process.Kill()
	hold.Wait()

	out = upgradeTo("2.1.332")
	for _, v := range []string{"2.1.328", "2.1.330"} {
		if _, err := os.Stat(vdir(v)); !os.IsNotExist(err) {
			t.Fatalf("%s must be pruned now: %v\n%s", v, err, out)
		}
	}
	for _, v := range []string{"2.1.331", "2.1.332"} {
		if _, err := os.Stat(vdir(v)); err != nil {
			t.Fatalf("%s (current or previous) must stay: %v", v, err)
		}
	}
	// What was pruned is out of the receipt: status stays in sync.
	if r := runReport(t, installer(t, root, shadow, env)); r.Changed != 0 {
		t.Fatalf("a run after pruning changes %d steps", r.Changed)
	}
	b, _ := os.ReadFile(filepath.Join(root, "var/lib/cco/receipt.json"))
	if strings.Contains(string(b), "/2.1.328/") || strings.Contains(string(b), "/2.1.330/") {
		t.Fatal("pruned versions are still in the receipt")
	}
}
