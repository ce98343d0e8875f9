package vendorfetch

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cco-dev/cco/internal/testenv"
	"github.com/cco-dev/cco/provision"
	"github.com/cco-dev/cco/vendorfetch/npmtest"
)

// treePkg is one package of a test tree: its manifest fields and files
// (named below package/).
type treePkg struct {
	name, version string
	fields        map[string]any
	files         map[string]string
}

// piTree is a Pi-shaped tree: the package, whose dist/cli.js prints its
// version and its dependencies' (real Node runs it); dep-a 1.2.0 needs
// @s/dep-b ^1 while the package needs @s/dep-b 2.0.0, so npm nests one of
// them; an optional build for linux-x64 and one for darwin.
func piTree(version string) []treePkg {
	cli := `#!/usr/bin/env node
import a from "dep-a";
import b from "@s/dep-b";
console.log("pi ` + version + ` " + a + " " + b);
`
	return []treePkg{
		{NpmPi, version, map[string]any{"type": "module", "bin": map[string]string{"pi": "dist/cli.js"}, "engines": map[string]string{"node": ">=20.6.0"},
			"dependencies":         map[string]string{"dep-a": "^1.0.0", "@s/dep-b": "2.0.0"},
			"optionalDependencies": map[string]string{"plat-linux-x64": "1.0.0", "plat-darwin": "1.0.0"}},
			map[string]string{"dist/cli.js": cli}},
		{"dep-a", "1.2.0", map[string]any{"type": "module", "main": "index.js", "dependencies": map[string]string{"@s/dep-b": "^1.0.0"}},
			map[string]string{"index.js": `import b from "@s/dep-b"; export default "a1.2.0(" + b + ")";`}},
		{"@s/dep-b", "1.0.0", map[string]any{"type": "module", "main": "index.js"}, map[string]string{"index.js": `export default "b1.0.0";`}},
		{"@s/dep-b", "2.0.0", map[string]any{"type": "module", "main": "index.js"}, map[string]string{"index.js": `export default "b2.0.0";`}},
		{"plat-linux-x64", "1.0.0", map[string]any{"os": []string{"linux"}, "cpu": []string{"x64", "arm64"}}, map[string]string{"x.node": "native"}},
		{"plat-darwin", "1.0.0", map[string]any{"os": []string{"darwin"}}, map[string]string{"x.node": "native"}},
	}
}

// publishTree publishes every package of the tree, with its package.json.
func (r *npmReg) publishTree(pkgs []treePkg, tags ...string) {
	for i, p := range pkgs {
		pj := map[string]any{"name": p.name, "version": p.version}
		for k, v := range p.fields {
			pj[k] = v
		}
		b, _ := json.Marshal(pj)
		es := []tarEntry{{name: "package/package.json", body: string(b)}}
		for f, body := range p.files {
			es = append(es, tarEntry{name: "package/" + f, body: body, mode: 0o644})
		}
		pub := npmtest.Pub{Name: p.name, Version: p.version, Tarball: npmTarball(r.t, es), Fields: p.fields}
		if i == 0 {
			pub.Tags = tags
		}
		r.Publish(pub)
	}
}

// treeSetup is a test registry serving piTree, a root with a Node, and a
// configuration that installs Pi from them.
func treeSetup(t *testing.T) (*npmReg, Config, string) {
	t.Helper()
	needNpm(t)
	r := newNpmReg(t, newStore(t))
	root := t.TempDir()
	writeNode(t, root, "v20.20.2")
	cfg := r.config(AgentPi)
	cfg.Platform = "linux-x64"
	r.publishTree(piTree("0.73.1"), "latest")
	return r, cfg, root
}

// needNpm fails the test without npm, which resolves a tree (CI installs
// it with nodejs).
func needNpm(t *testing.T) {
	t.Helper()
	if _, err := systemCommand("npm"); err != nil {
		testenv.Missing(t, "npm resolves Pi's dependency tree: "+err.Error()+" (apt-get install npm)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Missing(t, "node runs the installed tree: "+err.Error())
	}
}

// Pi's whole tree from the registry: npm resolves it (as nobody when the
// test is root, no script), cco fetches and verifies every package and
// lays the tree out as the lockfile says, nested dependency included, the
// other platform's build left out; the installed program runs under real
// Node with its dependencies; the lockfile stays in the version; a second
// run fetches nothing.
func TestPiTreeFromRegistry(t *testing.T) {
	r, cfg, root := treeSetup(t)
	sr := wantStatus(t, install(t, root, cfg), StepPi, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "the tree of 5 packages") || !strings.Contains(sr.Detail, "registry signature") {
		t.Errorf("detail %q", sr.Detail)
	}
	vdir := filepath.Join(root, PiDir, "0.73.1")
	for f, want := range map[string]string{
		"node_modules/" + NpmPi + "/dist/cli.js":            "pi 0.73.1",
		"node_modules/dep-a/index.js":                       "a1.2.0",
		"node_modules/dep-a/node_modules/@s/dep-b/index.js": "b1.0.0",
		"node_modules/@s/dep-b/index.js":                    "b2.0.0",
		"node_modules/plat-linux-x64/x.node":                "native",
		"package-lock.json":                                 `"lockfileVersion"`,
		"package.json":                                      `"cco-pi"`,
	} {
		b, err := os.ReadFile(filepath.Join(vdir, f))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s: %q %v, want %q", f, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(vdir, "node_modules/plat-darwin")); err == nil {
		t.Error("the darwin build was installed")
	}
	if l, _ := os.Readlink(filepath.Join(vdir, "node")); l != "/usr/bin/node" {
		t.Errorf("interpreter link %q", l)
	}
	rc := readReceipt(t, root)
	if e := rc.Paths[PiDir+"/0.73.1/node_modules/dep-a/node_modules/@s/dep-b/index.js"]; e == nil || e.Step != StepPi {
		t.Errorf("the nested file is not in the receipt: %+v", e)
	}
	node, _ := exec.LookPath("node")
	out, err := exec.Command(node, filepath.Join(vdir, "node_modules", NpmPi, "dist/cli.js")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "pi 0.73.1 a1.2.0(b1.0.0) b2.0.0" {
		t.Errorf("the installed tree runs: %q %v", out, err)
	}
	r.Reset()
	wantStatus(t, install(t, root, cfg), StepPi, provision.StatusOK)
	if n := r.Count("/dep-a/-/"); n != 0 {
		t.Errorf("a no-op run fetched a tarball %d times", n)
	}
	assertNoLeftovers(t, root)
}

// A package whose tarball is not what the registry's integrity says fails
// the whole tree, and nothing is installed.
func TestPiTreeIntegrity(t *testing.T) {
	r, cfg, root := treeSetup(t)
	tree := piTree("0.73.1")
	// dep-a served with another package's bytes under its integrity.
	r.Publish(npmtest.Pub{Name: "dep-a", Version: "1.2.0", Tarball: npmTarball(t, []tarEntry{{name: "package/index.js", body: "evil"}}),
		IntegrityOf: []byte("not these bytes"), Fields: tree[1].fields})
	sr := wantStatus(t, install(t, root, cfg), StepPi, provision.StatusFailed)
	if !strings.Contains(sr.Detail, "integrity mismatch") && !strings.Contains(sr.Detail, "integrity") {
		t.Errorf("detail %q", sr.Detail)
	}
	if _, err := os.Stat(filepath.Join(root, PiDir, "current")); err == nil {
		t.Error("installed anyway")
	}
	assertNoLeftovers(t, root)
}

// The bundle carries the lockfile, the packuments and every tarball: an
// install from it needs no npm and no network, and verifies the same.
func TestPiTreeBundle(t *testing.T) {
	r, cfg, _ := treeSetup(t)
	out := filepath.Join(t.TempDir(), "b.tar.xz")
	if err := WriteBundle(context.Background(), cfg, out); err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer func(p []string) { systemPath = p }(systemPath)
	systemPath = []string{t.TempDir()} // no npm
	root := t.TempDir()
	writeNodeAt(t, root, "/opt/node/bin/node", "v22.1.0")
	inst := DefaultConfig()
	inst.Agents, inst.Bundle, inst.NpmKeys, inst.Progress, inst.Platform = []string{AgentPi}, out, r.KeysFile, "never", "linux-x64"
	n := inst.Npm[AgentPi]
	n.Node = "/opt/node/bin/node"
	inst.Npm[AgentPi] = n
	sr := wantStatus(t, install(t, root, inst), StepPi, provision.StatusChanged)
	if !strings.Contains(sr.Detail, "the bundle") || !strings.Contains(sr.Detail, "registry signature") {
		t.Errorf("detail %q", sr.Detail)
	}
	if b, err := os.ReadFile(filepath.Join(root, PiDir, "0.73.1", "node_modules/dep-a/node_modules/@s/dep-b/index.js")); err != nil || !strings.Contains(string(b), "b1.0.0") {
		t.Errorf("nested: %q %v", b, err)
	}
}

// lockTree refuses a lockfile that is not exactly the tree of the package:
// another root, a link, a path out of node_modules, another platform's
// package that is not optional, a package with no sha512.
func TestLockTreeRefusals(t *testing.T) {
	base := func(extra string) []byte {
		return []byte(`{"lockfileVersion": 3, "packages": {
"": {"dependencies": {"p": "1.0.0"}},
"node_modules/p": {"version": "1.0.0", "integrity": "sha512-` + strings.Repeat("A", 86) + `=="}` + extra + `}}`)
	}
	if es, err := lockTree(base(""), "p", "1.0.0", "linux-x64"); err != nil || len(es) != 1 || es[0].path != "node_modules/p" {
		t.Fatalf("%v %v", es, err)
	}
	integ := `"integrity": "sha512-` + strings.Repeat("A", 86) + `=="`
	for _, c := range []struct {
		name, extra, want string
		pkg, version      string
	}{
		{"another root", "", "does not depend on q@1.0.0 alone", "q", "1.0.0"},
		{"another version", "", "does not depend on p@2.0.0 alone", "p", "2.0.0"},
		{"link", `, "node_modules/x": {"version": "1.0.0", "link": true, "resolved": "../x"}`, "is a link", "p", "1.0.0"},
		{"escape", `, "node_modules/../../etc": {"version": "1.0.0", ` + integ + `}`, "not a package name", "p", "1.0.0"},
		{"outside", `, "lib/x": {"version": "1.0.0", ` + integ + `}`, "not under node_modules", "p", "1.0.0"},
		{"nested escape", `, "node_modules/p/node_modules/..": {"version": "1.0.0", ` + integ + `}`, "not a package name", "p", "1.0.0"},
		{"other platform", `, "node_modules/x": {"version": "1.0.0", "os": ["darwin"], ` + integ + `}`, "is for [darwin]", "p", "1.0.0"},
		{"no sha512", `, "node_modules/x": {"version": "1.0.0", "integrity": "sha1-AAAA"}`, "has no sha512", "p", "1.0.0"},
		{"bad version", `, "node_modules/x": {"version": "../1", ` + integ + `}`, "is not a version", "p", "1.0.0"},
	} {
		_, err := lockTree(base(c.extra), c.pkg, c.version, "linux-x64")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// An optional package of another platform is left out; a libc list.
	es, err := lockTree(base(`, "node_modules/x": {"version": "1.0.0", "optional": true, "os": ["linux"], "cpu": ["x64"], "libc": ["musl"], `+integ+`}`), "p", "1.0.0", "linux-x64")
	if err != nil || len(es) != 1 {
		t.Errorf("glibc: %v %v", es, err)
	}
	es, err = lockTree(base(`, "node_modules/x": {"version": "1.0.0", "optional": true, "os": ["linux"], "cpu": ["x64"], "libc": ["musl"], `+integ+`}`), "p", "1.0.0", "linux-x64-musl")
	if err != nil || len(es) != 2 {
		t.Errorf("musl: %v %v", es, err)
	}
	for _, c := range []struct {
		list []string
		have string
		ok   bool
	}{{nil, "x64", true}, {[]string{"x64"}, "x64", true}, {[]string{"arm64"}, "x64", false}, {[]string{"!arm64"}, "x64", true}, {[]string{"!x64"}, "x64", false}} {
		if platformOK(c.list, c.have) != c.ok {
			t.Errorf("platformOK(%v, %s) != %v", c.list, c.have, c.ok)
		}
	}
}

// The tree is never laid out through a link a package carries: a package
// whose node_modules is a link to elsewhere makes the nested dependency's
// placement fail.
func TestTreeNeverFollowsALink(t *testing.T) {
	dir := t.TempDir()
	out := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "node_modules/a"), 0o755))
	must(os.Symlink(out, filepath.Join(dir, "node_modules/a/node_modules")))
	d, err := os.Open(dir)
	must(err)
	defer d.Close()
	if _, err := mkdirAllIn(d, "node_modules/a/node_modules/@s", map[string]bool{}); err == nil || !strings.Contains(err.Error(), "not a directory of the tree") {
		t.Errorf("followed the link: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("made %v outside the tree", ents)
	}
}
