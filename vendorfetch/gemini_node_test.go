package vendorfetch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/agent"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/provision/provisiontest/treehash"
)

// writeNodeAt puts a Node that prints version at target in the test root.
func writeNodeAt(t *testing.T, root, target, version string) {
	t.Helper()
	p := filepath.Join(root, target)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+version+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// symlinkIn makes the link target -> to in the test root.
func symlinkIn(t *testing.T, root, target, to string) {
	t.Helper()
	p := filepath.Join(root, target)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(to, p); err != nil {
		t.Fatal(err)
	}
}

// interpreterLink is where the profile's interpreter (what the jail runs)
// points in the test root.
func interpreterLink(t *testing.T, root string) string {
	t.Helper()
	p, _ := agent.Lookup(AgentGemini)
	if p.Interpreter != GeminiDir+"/current/node" {
		t.Fatalf("the profile runs %s, not the link the step makes (%s/current/node)", p.Interpreter, GeminiDir)
	}
	l, err := os.Readlink(filepath.Join(root, p.Interpreter))
	if err != nil {
		t.Fatalf("the interpreter link: %v", err)
	}
	return l
}

// An old node first on the system PATH and a newer one that gemini.node
// names (through a link): the version's interpreter link, which the jail
// runs, is the newer one's resolved path, and the receipt records it.
func TestGeminiLinksTheNamedNode(t *testing.T) {
	_, r, cfg, root := geminiSetup(t)
	r.publishGemini("0.61.0", "latest")
	writeNodeAt(t, root, "/usr/local/bin/node", "v18.19.0")
	writeNodeAt(t, root, "/opt/node-v22/bin/node", "v22.1.0")
	symlinkIn(t, root, "/usr/bin/node22", "/opt/node-v22/bin/node")
	cfg.Gemini.Node = "/usr/bin/node22"
	wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
	if l := interpreterLink(t, root); l != "/opt/node-v22/bin/node" {
		t.Fatalf("the interpreter link points at %q, want the resolved /opt/node-v22/bin/node", l)
	}
	link := GeminiDir + "/0.61.0/node"
	if e := readReceipt(t, root).Paths[link]; e == nil || e.Kind != provision.KindLink || e.Target != "/opt/node-v22/bin/node" || e.Step != StepGemini {
		t.Errorf("the receipt's entry of %s: %+v", link, e)
	}
	if st := loadStateFromStep(t, root, StepGemini); st.Node != "/opt/node-v22/bin/node" {
		t.Errorf("state node %q", st.Node)
	}
	wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusOK)

	// gemini.node changed to the old one: refused, and nothing changes.
	cfg.Gemini.Node = "node"
	before := treehash.Shape(t, root)
	sr := wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusFailed)
	for _, w := range []string{"needs Node.js >=20", "/usr/local/bin/node is v18.19.0"} {
		if !strings.Contains(sr.Detail, w) {
			t.Errorf("detail %q lacks %q", sr.Detail, w)
		}
	}
	if after := treehash.Shape(t, root); after != before {
		t.Errorf("a refused relink changed the tree:\n%s\n---\n%s", before, after)
	}

	// A newer Node named: the link is made again, and nothing is fetched.
	writeNodeAt(t, root, "/opt/node-v24/bin/node", "v24.0.0")
	cfg.Gemini.Node = "/opt/node-v24/bin/node"
	r.Reset()
	sr = wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "linked gemini 0.61.0 to the interpreter /opt/node-v24/bin/node") {
		t.Errorf("detail %q", sr.Detail)
	}
	if n := r.Count("/" + NpmGemini); n != 0 {
		t.Errorf("a relink made %d requests to the registry", n)
	}
	if l := interpreterLink(t, root); l != "/opt/node-v24/bin/node" {
		t.Errorf("after the relink the link points at %q", l)
	}
	if st := loadStateFromStep(t, root, StepGemini); st.Node != "/opt/node-v24/bin/node" {
		t.Errorf("state node %q after the relink", st.Node)
	}
	wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusOK)

	// Node removed: the status says so, and the run names the fix.
	os.Remove(filepath.Join(root, "opt/node-v24/bin/node"))
	sr = wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "gemini.node /opt/node-v24/bin/node") || !strings.Contains(sr.Detail, "install Node.js >=20") {
		t.Errorf("detail %q", sr.Detail)
	}
	assertNoLeftovers(t, root)
}

// A Node where the jail does not show it (a home, /root, /tmp) is refused
// with the fix, whether gemini.node names it or a link on PATH leads there.
func TestGeminiNodeInAHiddenTreeIsRefused(t *testing.T) {
	for _, c := range []struct {
		name, node, real, link, want string
	}{
		{"root's home", "/root/.nvm/versions/node/v22.1.0/bin/node", "/root/.nvm/versions/node/v22.1.0/bin/node", "", "under /root"},
		{"a link into a home", "node", "/home/ada/.nvm/versions/node/v22.1.0/bin/node", "/usr/local/bin/node", "under /home"},
		{"an account's home elsewhere", "/srv/ada/node/bin/node", "/srv/ada/node/bin/node", "", "under /srv/ada"},
		{"tmp", "/tmp/node", "/tmp/node", "", "under /tmp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, r, cfg, root := geminiSetup(t)
			r.publishGemini("0.61.0", "latest")
			writeNodeAt(t, root, c.real, "v22.1.0")
			if c.link != "" {
				symlinkIn(t, root, c.link, c.real)
			}
			if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/bash\nada:x:1000:1000::/srv/ada:/bin/bash\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg.Gemini.Node = c.node
			sr := wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusFailed)
			for _, w := range []string{c.want, "the jail does not show", "system-wide"} {
				if !strings.Contains(sr.Detail, w) {
					t.Errorf("detail %q lacks %q", sr.Detail, w)
				}
			}
			if _, err := os.Lstat(filepath.Join(root, GeminiDir)); err == nil {
				t.Error("a refused gemini left its directory")
			}
		})
	}
}

// A rollback to a version whose link is gone (installed before cco made
// one) makes the link first, from today's gemini.node.
func TestGeminiRollbackLinksThePrevious(t *testing.T) {
	_, r, cfg, root := geminiSetup(t)
	for _, v := range []string{"0.60.0", "0.61.0"} {
		r.publishGemini(v, "latest")
		cfg.Upgrade = map[string]bool{AgentGemini: true}
		wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusChanged)
	}
	if err := os.Remove(filepath.Join(root, GeminiDir, "0.60.0/node")); err != nil {
		t.Fatal(err)
	}
	sr := rollback(t, root, cfg, AgentGemini)
	if sr.Status != provision.StatusChanged || !strings.Contains(sr.Detail, "back to 0.60.0") {
		t.Fatalf("rollback: %s %s", sr.Status, sr.Detail)
	}
	if l := interpreterLink(t, root); l != "/usr/bin/node" {
		t.Errorf("after the rollback the link points at %q", l)
	}
	cfg.Upgrade = nil
	wantStatus(t, install(t, root, cfg), StepGemini, provision.StatusOK)
}
