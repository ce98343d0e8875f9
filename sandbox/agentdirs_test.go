package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/internal/testenv"
)

// A profile's workspace read-only entry that ends in "/" is a directory: a
// missing one shows as an empty read-only directory (its placeholder a
// directory on the host), never a file an agent then fails to read through. A missing
// agent directory the agent writes at start (WorkspaceScratch: OpenCode's
// .opencode) is an empty writable tmpfs, gone with the session.
func TestAgentDirectoryPlaceholders(t *testing.T) {
	f := newFixture(t)
	for _, d := range []string{".opencode", ".factory"} {
		testenv.Must(t, os.RemoveAll(filepath.Join(f.ws, d)))
	}
	p, _ := agent.Lookup("droid")
	s, pr, err := Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, User: "ada", UID: 1000, Cwd: f.ws, Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	placeholder := func(path string) *Placeholder {
		for i := range pr.Placeholders {
			if pr.Placeholders[i].Path == path {
				return &pr.Placeholders[i]
			}
		}
		return nil
	}
	factory := filepath.Join(f.ws, ".factory")
	if ph := placeholder(factory); ph == nil || !ph.Dir {
		t.Errorf("%s: placeholder %+v, want a directory", factory, ph)
	}
	if !slices.ContainsFunc(s.ReadOnly, func(b Bind) bool { return b.Dst == factory && b.EmptyDir }) {
		t.Errorf("%s is not an empty read-only directory: %+v", factory, s.ReadOnly)
	}
	oc := filepath.Join(f.ws, ".opencode")
	if ph := placeholder(oc); ph == nil || !ph.Dir {
		t.Errorf("%s: placeholder %+v, want a directory", oc, ph)
	}
	if !slices.Contains(s.Masks, Mask{Path: oc, Kind: MaskTmpfs}) {
		t.Errorf("%s is not a writable tmpfs: %+v", oc, s.Masks)
	}
	if slices.ContainsFunc(s.ReadOnly, func(b Bind) bool { return b.Dst == oc }) {
		t.Errorf("%s is also read-only", oc)
	}
	// An existing .opencode is a tree; what it runs is read-only in it.
	testenv.Must(t, os.MkdirAll(oc, 0o700))
	s, _, err = Plan(&Launch{Profile: p, Config: &Config{}, Home: f.home, User: "ada", UID: 1000, Cwd: f.ws, Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(s.Trees, func(b Bind) bool { return b.Dst == oc }) ||
		!slices.ContainsFunc(s.ReadOnly, func(b Bind) bool { return b.Dst == oc+"/plugins" && b.EmptyDir }) {
		t.Errorf("existing %s: trees %+v, read-only %+v", oc, s.Trees, s.ReadOnly)
	}
}
