package realagents

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A Node program's dependency tree (Pi's), for the test registry: the
// lockfile npm resolved for it once, and a pack of every package the
// lockfile gives linux-x64 (another platform's optional build is left
// out: TreeStubs names those). Cached in tree/<name>@<version>/ beside the
// packs: package-lock.json and packs/<name>@<version>.tgz.

// TreePack is one package of a tree.
type TreePack struct {
	Name, Version string
	File          string // the pack in the cache
	// Manifest is its package.json's fields that a registry's packument
	// carries (dependencies, os, cpu, bin, engines, ...).
	Manifest map[string]any
}

// TreeStub is a package of the lockfile for another platform: the test
// registry serves a stub of it, which npm records and cco leaves out.
type TreeStub struct {
	Name, Version string
	OS, CPU, Libc []string
}

// manifestKeys are the package.json fields a packument's version carries
// that npm's resolution reads.
var manifestKeys = []string{"dependencies", "optionalDependencies", "peerDependencies", "peerDependenciesMeta",
	"bundleDependencies", "bundledDependencies", "os", "cpu", "libc", "engines", "bin"}

// lockEntry is what this package reads of a lockfile entry.
type lockEntry struct {
	Name, Version       string
	Optional, Dev, Link bool
	InBundle            bool `json:"inBundle"`
	OS, CPU, Libc       []string
}

// Tree returns p's tree from the cache, resolving and packing it with npm
// (from the public registry) when it is not there yet.
func Tree(t testing.TB, p Pack) (lockfile string, packs []TreePack, stubs []TreeStub) {
	t.Helper()
	Require(t)
	dir := filepath.Join(CacheDir, "tree", p.Key())
	lockfile = filepath.Join(dir, "package-lock.json")
	if _, err := os.Stat(lockfile); err != nil {
		unlock := lock(t)
		if _, err := os.Stat(lockfile); err != nil {
			fetchTree(t, p, dir)
		}
		unlock()
	}
	b, err := os.ReadFile(lockfile)
	if err != nil {
		t.Fatal(err)
	}
	var lf struct {
		Packages map[string]lockEntry `json:"packages"`
	}
	if err := json.Unmarshal(b, &lf); err != nil {
		t.Fatalf("%s: %v (fix: remove %s, and the next run resolves it again)", lockfile, err, dir)
	}
	seen := map[string]bool{}
	for _, k := range slices.Sorted(mapKeys(lf.Packages)) {
		e := lf.Packages[k]
		if k == "" || e.InBundle || e.Dev || e.Link {
			continue
		}
		name := e.Name
		if name == "" {
			name = k[strings.LastIndex(k, "node_modules/")+len("node_modules/"):]
		}
		key := name + "@" + e.Version
		if seen[key] {
			continue
		}
		seen[key] = true
		if !linuxX64(e) {
			stubs = append(stubs, TreeStub{Name: name, Version: e.Version, OS: e.OS, CPU: e.CPU, Libc: e.Libc})
			continue
		}
		f := filepath.Join(dir, "packs", key+".tgz")
		m, err := Manifest(f)
		if err != nil {
			t.Fatalf("%s: %v (fix: remove %s, and the next run packs the tree again)", f, err, dir)
		}
		packs = append(packs, TreePack{Name: name, Version: e.Version, File: f, Manifest: m})
	}
	return lockfile, packs, stubs
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// linuxX64 is npm's platform rule for a glibc linux-x64 machine.
func linuxX64(e lockEntry) bool {
	ok := func(list []string, have string) bool {
		if len(list) == 0 || slices.Contains(list, have) {
			return len(list) == 0 || !slices.Contains(list, "!"+have)
		}
		for _, v := range list {
			if !strings.HasPrefix(v, "!") {
				return false
			}
		}
		return !slices.Contains(list, "!"+have)
	}
	return ok(e.OS, "linux") && ok(e.CPU, "x64") && ok(e.Libc, "glibc")
}

// fetchTree resolves p's tree with npm and packs every linux-x64 package
// of it into dir.
func fetchTree(t testing.TB, p Pack, dir string) {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("%s's tree is not cached at %s and npm is not installed to fetch it (fix: install npm)", p.Key(), dir)
	}
	tmp, err := os.MkdirTemp(CacheDir, ".tree-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	root, _ := json.Marshal(map[string]any{"name": "cco-tree", "private": true, "dependencies": map[string]string{p.Name: p.Version}})
	if err := os.WriteFile(filepath.Join(tmp, "package.json"), root, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		c := exec.Command(npm, args...)
		c.Dir = tmp
		out, err := c.Output()
		if err != nil {
			t.Fatalf("npm %s: %v (fix: check that registry.npmjs.org is reachable, or put the tree at %s)", strings.Join(args[:1], " "), err, dir)
		}
		return out
	}
	run("install", "--package-lock-only", "--ignore-scripts", "--omit=dev", "--no-audit", "--no-fund")
	b, err := os.ReadFile(filepath.Join(tmp, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lf struct {
		Packages map[string]lockEntry `json:"packages"`
	}
	if err := json.Unmarshal(b, &lf); err != nil {
		t.Fatal(err)
	}
	var specs []string
	for k, e := range lf.Packages {
		if k == "" || e.InBundle || e.Dev || e.Link || !linuxX64(e) {
			continue
		}
		name := e.Name
		if name == "" {
			name = k[strings.LastIndex(k, "node_modules/")+len("node_modules/"):]
		}
		if s := name + "@" + e.Version; !slices.Contains(specs, s) {
			specs = append(specs, s)
		}
	}
	packs := filepath.Join(tmp, "packs")
	if err := os.Mkdir(packs, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(specs); i += 50 {
		batch := specs[i:min(i+50, len(specs))]
		var res []struct{ Name, Version, Filename string }
		if err := json.Unmarshal(run(append([]string{"pack", "--json", "--pack-destination", packs}, batch...)...), &res); err != nil {
			t.Fatalf("npm pack --json: %v", err)
		}
		for _, r := range res {
			to := filepath.Join(packs, r.Name+"@"+r.Version+".tgz")
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(packs, r.Filename), to); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(tmp, "package.json"))
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
}

// Manifest is the fields of the package.json at the top of an npm tarball
// (whose one top directory is usually, not always, "package") that a
// registry's packument carries for its version.
func Manifest(tgz string) (map[string]any, error) {
	m, err := packageJSON(tgz)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, k := range manifestKeys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// packageJSON reads the package.json at the top of an npm tarball.
func packageJSON(tgz string) (map[string]any, error) {
	f, err := os.Open(tgz)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("no package.json")
		}
		if err != nil {
			return nil, err
		}
		parts := strings.Split(strings.TrimPrefix(h.Name, "./"), "/")
		if len(parts) == 2 && parts[1] == "package.json" {
			var m map[string]any
			if err := json.NewDecoder(io.LimitReader(tr, 4<<20)).Decode(&m); err != nil {
				return nil, err
			}
			return m, nil
		}
	}
}
