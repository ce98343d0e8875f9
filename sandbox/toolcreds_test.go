package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

// TestPlanMasksCredentialsByName: a credential file at any depth of a
// bound toolchain tree is shown as its stand-in; one beside a tree that is
// not bound is left alone (the jail does not show it); a link so named is
// masked at its target inside a bound tree.
func TestPlanMasksCredentialsByName(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("claude")
	files := map[string]string{
		".sdkman/candidates/maven/3.9.9/conf/settings.xml":       "<settings/>\n",
		".nvm/versions/node/v22.11.0/lib/node_modules/npm/npmrc": "",
		".local/share/pipx/venvs/black/pip.conf":                 "",
		".dotnet/nuget.config":                                   "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<configuration />\n",
		".volta/tools/image/node/22/secret.txt":                  "", // the target of the link below
	}
	for rel := range files {
		testenv.Must(t, os.MkdirAll(filepath.Dir(filepath.Join(f.home, rel)), 0o755))
		testenv.Must(t, os.WriteFile(filepath.Join(f.home, rel), []byte("secret"), 0o644))
	}
	testenv.Must(t, os.Symlink("secret.txt", filepath.Join(f.home, ".volta/tools/image/node/22/.npmrc")))
	testenv.Must(t, os.MkdirAll(filepath.Join(f.home, "notbound"), 0o755))
	testenv.Must(t, os.WriteFile(filepath.Join(f.home, "notbound/pip.conf"), []byte("x"), 0o644))
	s, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, User: "ada", Cwd: f.ws, Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{}
	for _, b := range s.HomeReadOnly {
		if b.isData() {
			shown[b.Dst] = string(b.Data)
		}
	}
	for rel, want := range files {
		if got, ok := shown[filepath.Join(f.home, rel)]; !ok || got != want {
			t.Errorf("~/%s: shown %q (masked %v), want %q", rel, got, ok, want)
		}
	}
	if _, ok := shown[filepath.Join(f.home, "notbound/pip.conf")]; ok {
		t.Errorf("a file outside the bound trees got a mask")
	}
	for _, n := range pr.Notes {
		if strings.Contains(n, "credential") {
			t.Errorf("a note about the walk, within its budget: %s", n)
		}
	}
}

// TestPlanNamesWhatTheBudgetLeft: past its budget the walk names, in one
// note, the part of the trees it did not search, and the fix.
func TestPlanNamesWhatTheBudgetLeft(t *testing.T) {
	f := newFixture(t)
	p, _ := agent.Lookup("claude")
	deep := filepath.Join(f.home, ".rustup/toolchains/stable/share/doc")
	testenv.Must(t, os.MkdirAll(deep, 0o755))
	testenv.Must(t, os.WriteFile(filepath.Join(deep, "credentials"), []byte("secret"), 0o644))
	old := scanBudget
	scanBudget = 3
	t.Cleanup(func() { scanBudget = old })
	_, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, User: "ada", Cwd: f.ws, Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, n := range pr.Notes {
		if strings.Contains(n, "credential") {
			notes = append(notes, n)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "~/.rustup/") || !strings.Contains(notes[0], "fix: ") || !strings.Contains(notes[0], "home_read_only") {
		t.Errorf("notes %q, want one naming the unsearched part of ~/.rustup and the fix", notes)
	}
}
